"""Shared fixtures: one real embedded broker for the session, used by tests and notebooks alike. With parallel
workers (pytest-xdist, ``make test``) every worker is a session of its own, with its own broker; a file (a test
module, a notebook) runs whole in one worker (``--dist loadfile``), the slowest files first (:data:`SLOWEST`)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import psutil
import pytest

from labkit.broker import EmbeddedBroker
from labkit.learn import predictions, testmode

#: The per-file CPU report printed after the slowest items (tests/cpu_report.py); the page of notebooks 02, 06 and 07
#: checked in a browser after their last cell (tests/notebook_pages.py).
pytest_plugins = ("tests.cpu_report", "tests.notebook_pages")

_session_broker: EmbeddedBroker | None = None


def session_broker() -> EmbeddedBroker:
    """The session's broker, started on first use."""
    global _session_broker
    if _session_broker is None:
        _session_broker = EmbeddedBroker(proxy_listener=True).start()
    return _session_broker


def labkit_children() -> list[int]:
    """Pids of Kafka JVMs that are children of this test process (labkit starts them directly), as psutil reads them."""
    found = []
    for child in psutil.Process().children():
        try:
            if any("kafka.Kafka" in arg for arg in child.cmdline()):
                found.append(child.pid)
        except psutil.Error:  # gone meanwhile, or not ours to read
            continue
    return found


#: The files that take longest, slowest first (seconds measured in a ``make test`` run with 4 workers, printed by its
#: ``--durations``): handed out first, so that no long file starts last and keeps one worker busy alone at the end.
#: Every other file follows in collection order. A file missing here only costs balance, never correctness.
SLOWEST = (
    "tests/test_hub.py",
    "tests/test_hub_room.py",
    "notebooks/04_spark_pipeline.ipynb",
    "notebooks/08_broker_crashes.ipynb",
    "notebooks/09_replication.ipynb",
    "tests/test_exercise.py",
    "tests/test_java.py",
    "notebooks/06_share_groups.ipynb",
    "tests/test_soak.py",
    "tests/test_embedded.py",
    "notebooks/02_zombie_fencing.ipynb",
    "tests/test_older_releases.py",
    "notebooks/05_unassigned_partition.ipynb",
    "tests/test_bootstrap_route.py",
    "tests/test_multinode.py",
    "tests/test_spark_role.py",
    "tests/test_participant.py",
)


#: Memory a worker may take at its peak, GiB: its own broker, and notebook 09's four-JVM cluster with its kernel and
#: participants (issue 65 measured 1,557 MiB for the whole lab running 09 in ``make lab``), with room to spare.
WORKER_GIB = 3


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``make test``'s workers (``-n auto``, pytest-xdist's hook): two per CPU this process may run on (the suite
    mostly waits on real timeouts, so a CPU has room for a second worker), at least 4 (as on this two-CPU machine) and
    at most one per :data:`WORKER_GIB` of the machine's memory."""
    cpus = len(os.sched_getaffinity(0))
    return max(4, min(2 * cpus, int(psutil.virtual_memory().total / 2**30 // WORKER_GIB)))


def pytest_configure(config: pytest.Config) -> None:
    """The test run says so (``LABKIT_CI=1``, :func:`labkit.under_test`): the kernels nbval starts inherit this
    process's environment, and a notebook's CI-only cells (pressing a playground's buttons, locking in a prediction)
    act only then; the predictions go to a folder of this process's own. A SIGTERM
    (a time limit) stops the run with every fixture's teardown (:func:`labkit.learn.testmode.stop_on_sigterm`)."""
    os.environ.setdefault(testmode.ENV, "1")
    # each test process keeps the predictions its notebooks lock in apart: another worker runs the same notebook on
    # another Kafka release at the same time (tests/test_older_releases.py)
    os.environ[predictions.FOLDER_ENV] = tempfile.mkdtemp(prefix="labkit-predictions-")
    atexit.register(shutil.rmtree, os.environ[predictions.FOLDER_ENV], ignore_errors=True)
    testmode.stop_on_sigterm(controller=not hasattr(config, "workerinput"))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the files of :data:`SLOWEST` first, in its order; a file's own items keep their order (a notebook's
    cells run top to bottom)."""
    rank = {name: i for i, name in enumerate(SLOWEST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Notebooks run in their own kernels; they reach the session broker through LABKIT_BOOTSTRAP."""
    if any(item.path.suffix == ".ipynb" for item in session.items) and not os.environ.get("LABKIT_BOOTSTRAP"):
        broker = session_broker()
        os.environ["LABKIT_BOOTSTRAP"] = broker.bootstrap_servers
        os.environ["LABKIT_PROXIED"] = f"{broker.proxied_listener_port}:{broker.proxy_port}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the session broker, then fail the run if any broker JVM this session started is left."""
    if _session_broker is not None:
        _session_broker.close()
    from labkit.broker import embedded

    embedded._kill_all()
    left = labkit_children()
    if left:
        print(f"\nFAILED: Kafka JVMs left after the test session: pids {left}")
        session.exitstatus = 1


@pytest.fixture(scope="session")
def broker() -> EmbeddedBroker:
    """The session's real broker (do not kill it; start your own EmbeddedBroker for that)."""
    return session_broker()


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker) -> str:
    """Bootstrap address of the session's broker."""
    return broker.bootstrap_servers
