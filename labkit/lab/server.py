"""Run ``make lab``'s broker and JupyterLab in the background, and stop them.

Usage: ``python -m labkit up|down|status``. ``up`` starts an :class:`EmbeddedBroker` of the Kafka
release :func:`~labkit.broker.settings.kafka_version` names in a detached process (data kept in
``$LABKIT_HOME/lab/broker-data-<version>``) and JupyterLab on 127.0.0.1 with a random token, then
prints the URL. JupyterLab serves the learner's working copies of the notebooks and runs with the settings of
:mod:`labkit.lab.workspace` (idle kernels culled). Their pids, start times and addresses are kept in
``$LABKIT_HOME/lab/*.json``, which is how :func:`labkit.connect` finds the lab broker. A pid is trusted only while
the process behind it has the start time recorded with it (psutil's ``create_time``): after a reboot or pid reuse
the pid names a stranger, which ``down`` never signals.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Callable

import psutil

from labkit.broker.ports import HOST, free_port
from labkit.broker.probe import check_reachable
from labkit.broker.runtime import labkit_home
from labkit.broker.settings import kafka_version
from labkit.core.errors import LabkitError
from labkit.core.jsonfile import write_json
from labkit.core.procs import process_state, start_time, why_not_ours
from labkit.core.waiting import wait_until
from labkit.lab.workspace import make_copies, work_dir, write_lab_settings, write_server_config

REPO = Path(__file__).resolve().parents[2]


def lab_dir() -> Path:
    """``$LABKIT_HOME/lab``: the lab's state files, logs and broker data."""
    return labkit_home() / "lab"


def _state(name: str) -> dict | None:
    """The state file ``name`` as written, or ``None`` if there is none (or it is unreadable)."""
    try:
        state = json.loads((lab_dir() / f"{name}.json").read_text())
        return state if isinstance(state.get("pid"), int) else None
    except (OSError, ValueError, AttributeError):
        return None


def read_state(name: str) -> dict | None:
    """Read the lab's state file ``name`` (``"broker"``, ``"jupyter"``).

    Returns its JSON if the process it names is the one the lab started and alive, else ``None``. A state file of an
    older labkit (no start time) is read while its pid is alive: its address is harmless to use, though :func:`down`
    never signals that pid."""
    state = _state(name)
    if not state:
        return None
    if "started" not in state:
        return state if psutil.pid_exists(state["pid"]) else None
    return None if why_not_ours(state) else state


def running_broker_state(wait_s: float = 0.0) -> dict | None:
    """``{"pid", "started", "bootstrap", "version", "proxied": [listener port, proxy port]}`` of the lab broker (started
    by ``make lab``, or by an attendee's server on the workshop hub: :func:`spawn_broker`), or ``None`` if none is
    ready. A broker still starting (:func:`starting_broker`) is waited for, at most ``wait_s`` seconds."""
    if wait_s > 0 and starting_broker():
        wait_until(lambda: not starting_broker(), wait_s, 0.2)
    state = read_state("broker")
    return state if state and "bootstrap" in state else None


def running_broker(wait_s: float = 0.0) -> str | None:
    """Bootstrap address ("host:port") of the lab broker, or ``None`` if none is ready (:func:`running_broker_state`,
    waiting at most ``wait_s`` seconds for one that starts)."""
    state = running_broker_state(wait_s)
    return state["bootstrap"] if state else None


def starting_broker() -> dict | None:
    """``{"pid", "started", "version"}`` of the lab broker's daemon while it starts or waits for a first request
    (alive, and not yet ready: its state file has no ``"bootstrap"``), else ``None``."""
    state = read_state("broker")
    return state if state and "bootstrap" not in state else None


def wanted_file() -> Path:
    """The file a kernel writes to ask for the lab broker (:func:`want_broker`)."""
    return lab_dir() / "broker.wanted"


def want_broker() -> None:
    """Ask the lab broker's daemon to start the broker now, if it waits for a first request (the workshop hub's:
    :func:`labkit.hub.singleuser.serve_broker`); nothing else changes."""
    wanted_file().touch()


#: Seconds the lab broker may take to be ready (``EmbeddedBroker``'s 60 s were overrun by most of twenty attendees'
#: brokers starting at once on the workshop hub's two cores, tests/test_hub.py): about 10 s alone.
BROKER_READY_S = 240.0


def serve_broker(hold: Callable[[threading.Event], bool] = lambda stop: True,
                 on_ready: Callable[[], None] = lambda: None) -> None:
    """Run the lab broker in this process until SIGTERM or SIGINT, then stop it cleanly. Its state file
    (``$LABKIT_HOME/lab/broker.json``) says it starts (no ``"bootstrap"``: :func:`starting_broker`) from the first
    moment, so that a kernel waits for it (:func:`labkit.connect`) rather than start a broker of its own; then
    ``hold(stop)`` runs (the workshop hub's daemon waits there for a first request, :func:`want_broker`; it returns
    False if ``stop`` was set meanwhile, and the daemon ends), the broker starts, ``on_ready()`` runs, and the file says
    where the broker listens.

    Raises:
        What :meth:`~labkit.broker.EmbeddedBroker.start` raises (no Java, a start slower than
        :data:`BROKER_READY_S`); the state file is removed first.
    """
    from labkit.broker import EmbeddedBroker

    stop = stop_on_signal()
    version = kafka_version()
    state_file = lab_dir() / "broker.json"
    mine = {"pid": os.getpid(), "started": start_time(os.getpid()), "version": version}
    _publish(state_file, mine)
    try:
        if not hold(stop):
            state_file.unlink(missing_ok=True)
            return
        broker = EmbeddedBroker(lab_dir() / f"broker-data-{version}", version=version, proxy_listener=True,
                                start_timeout_s=BROKER_READY_S).start()
    except BaseException:
        state_file.unlink(missing_ok=True)
        raise
    on_ready()
    serve_until(stop, broker, state_file, {**mine, "bootstrap": broker.bootstrap_servers,
                                           "proxied": [broker.proxied_listener_port, broker.proxy_port]})


def stop_on_signal() -> threading.Event:
    """An event that SIGTERM or SIGINT sets (a daemon's way to be asked to stop)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def serve_until(stop: threading.Event, service, state_file: Path, state: dict) -> None:
    """Publish ``state`` (JSON) in ``state_file`` while ``service`` (anything with ``is_running`` and ``stop()``:
    the lab broker, a Spark cluster) runs and ``stop`` is not set; then remove the file and stop the service."""
    _publish(state_file, state)
    try:
        while not stop.wait(1.0) and service.is_running:
            pass
    finally:
        state_file.unlink(missing_ok=True)
        service.stop()


def _publish(state_file: Path, state: dict) -> None:
    """Write ``state`` (JSON) to ``state_file`` whole or not at all (a reader sees the old file or the new one)."""
    write_json(state_file, state)


def spawn_daemon(args: list[str], log_name: str) -> subprocess.Popen:
    """Start ``args`` (a command line) as a daemon of the lab: in a session of its own (it outlives the caller and a
    Ctrl-C of its terminal), no stdin, its output appended to ``$LABKIT_HOME/lab/<log_name>``, run from the repository.

    Raises:
        OSError: the command could not be started (e.g. no such executable).
    """
    lab_dir().mkdir(parents=True, exist_ok=True)
    with open(lab_dir() / log_name, "ab") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=REPO)


def spawn_broker(command: list[str] | None = None, announce_s: float = 30.0) -> subprocess.Popen | None:
    """Start the lab broker's daemon in a session of its own (it outlives the caller) without waiting for the broker:
    ``command``, default ``python -m labkit serve-broker`` (:func:`serve_broker`), its output in
    ``$LABKIT_HOME/lab/broker-daemon.log``. Returns once the daemon's state file says it starts (or the daemon ended,
    or ``announce_s`` seconds passed), so that a kernel started afterwards waits for it; ``None`` if a lab broker
    runs or starts already (nothing is started)."""
    if read_state("broker"):
        return None
    proc = spawn_daemon(command or [sys.executable, "-m", "labkit", "serve-broker"], "broker-daemon.log")
    wait_until(lambda: read_state("broker") or proc.poll() is not None, announce_s, 0.1)
    return proc


def start_broker(timeout_s: float) -> str:
    """Start the lab broker (:func:`spawn_broker`), or find the one running or starting, and return its bootstrap
    address ("host:port") once it is ready; ``make lab`` starts it so. ``timeout_s``: seconds to wait for it.

    Raises:
        LabkitError: a broker of another Kafka release runs, or it did not start within ``timeout_s`` (its log quoted).
    """
    state = read_state("broker")
    if state and state.get("version", kafka_version()) != kafka_version():
        raise LabkitError(f"The lab broker already runs Kafka {state['version']}, not {kafka_version()}: "
                          "`make stop` first, then start the lab again.")
    proc = spawn_broker()
    address = running_broker(timeout_s)
    if address is None:
        if proc is not None and proc.poll() is None:  # only the daemon this call started, with its broker
            os.killpg(proc.pid, signal.SIGKILL)
        tail = (lab_dir() / "broker-daemon.log").read_text(errors="replace")[-3000:]
        raise LabkitError(f"The lab broker did not start; see {lab_dir() / 'broker-daemon.log'}:\n{tail}")
    return address


def _start_jupyter(timeout_s: float) -> str:
    state = read_state("jupyter")
    if state:
        if state.get("root") != str(work_dir()):
            raise LabkitError("The running JupyterLab serves the repository's own notebooks (an older labkit started "
                              "it): `make stop` first, then `make lab` serves your own copies.")
        return state["url"]
    write_lab_settings()
    config = write_server_config(labkit_home())
    port, token = free_port(), secrets.token_hex(16)
    args = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ip={HOST}", f"--port={port}",
            f"--IdentityProvider.token={token}", f"--config={config}"]
    if os.geteuid() == 0:  # containers and CI machines often run as root; JupyterLab refuses without this
        args.append("--allow-root")
    proc = spawn_daemon(args, "jupyter.log")
    url = f"http://{HOST}:{port}/lab/tree/00_tour.ipynb?token={token}"

    def answers() -> bool:
        try:
            urllib.request.urlopen(f"http://{HOST}:{port}/api/status?token={token}", timeout=1)
            return True
        except OSError:
            return proc.poll() is not None

    if not wait_until(answers, timeout_s, 0.3) or proc.poll() is not None:
        raise LabkitError(f"JupyterLab did not start; see {lab_dir() / 'jupyter.log'}")
    write_json(lab_dir() / "jupyter.json", {"pid": proc.pid, "started": start_time(proc.pid), "url": url,
                                            "root": str(work_dir())})
    return url


def up(timeout_s: float = 120.0) -> dict:
    """Start (or find) the lab broker and JupyterLab, after making or refreshing the learner's working copies of the
    notebooks (:func:`labkit.lab.workspace.make_copies`, in ``$LABKIT_HOME/work``: JupyterLab serves those, never the
    repository's). With ``LABKIT_BOOTSTRAP`` set, no broker is started: that cluster must answer, and the notebooks
    use it. Returns ``{"bootstrap", "url", "work"}`` and ``"notes"``, the copies' lines for the learner to read.

    Raises:
        BrokerUnreachableError: ``LABKIT_BOOTSTRAP`` is set and nothing answers there.
        LabkitError: the broker or JupyterLab did not start (the message names the log file), the
            lab broker already runs another Kafka release than ``LABKIT_KAFKA_VERSION`` asks for, or the running
            JupyterLab serves another folder than the copies (an older labkit's, serving the repository's notebooks).
        OSError: the working copies cannot be written.
    """
    external = os.environ.get("LABKIT_BOOTSTRAP")
    if external:
        check_reachable(external)
    notes = make_copies(work_dir())
    return {"bootstrap": external or start_broker(timeout_s), "url": _start_jupyter(timeout_s),
            "work": str(work_dir()), "notes": notes}


def down(timeout_s: float = 30.0) -> dict[str, str]:
    """Stop JupyterLab and the lab broker (SIGTERM to the process group, then SIGKILL after ``timeout_s`` seconds), each
    only if its state file's pid is still the process the lab started (:func:`labkit.core.procs.why_not_ours`); every
    state file found is removed. Returns ``{name: "stopped" or why it was not signalled}`` for each state file found
    ("jupyter", "broker")."""
    outcome = {}
    for name in ("jupyter", "broker"):
        state = _state(name)
        if not state:
            continue
        outcome[name] = why_not_ours(state) or "stopped"
        if outcome[name] == "stopped":
            os.killpg(state["pid"], signal.SIGTERM)
            if not wait_until(lambda: process_state(state["pid"]) in ("", "Z"), timeout_s, 0.2):
                os.killpg(state["pid"], signal.SIGKILL)
        (lab_dir() / f"{name}.json").unlink(missing_ok=True)
    return outcome


def main(argv: list[str]) -> int:
    """Command line: ``up``, ``down``, ``status`` or ``serve-broker``."""
    command = argv[0] if argv else "status"
    if command == "serve-broker":
        serve_broker()
    elif command == "up":
        where = up()
        kafka = "LABKIT_BOOTSTRAP" if os.environ.get("LABKIT_BOOTSTRAP") else f"Kafka {kafka_version()}"
        print(f"Kafka broker: {where['bootstrap']} ({kafka})\nJupyterLab:   {where['url']}\n"
              f"Notebooks:    your own copies, in {where['work']} (the repository's stay as they are)\n"
              + "".join(f"  {note}\n" for note in where["notes"]) + "(`make stop` ends both)")
    elif command == "down":
        print("\n".join(f"{name}: {what}" for name, what in down().items()) or "nothing was running")
    elif command == "status":
        for name, key in (("broker", "bootstrap"), ("jupyter", "url")):
            state = _state(name)
            print(f"{name}: {(state and (why_not_ours(state) or state.get(key, 'starting'))) or 'not running'}")
    else:
        print(f"unknown command {command!r}: use python -m labkit jars|up|down|status|reset|serve-broker|spark-cluster", file=sys.stderr)
        return 2
    return 0

