"""labkit.only (labkit/learn/rerun.py): a re-run cell closes what its last run started before starting it again; and notebook
09 run the learner's way (issue 65): its first cells, a lock-in, then Run All, in a real kernel on real brokers."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient

from labkit.broker.embedded import HEAP_ENV
from labkit.learn import rerun

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "09_replication.ipynb"
#: What the hub's doctor states for notebook 09: the lab's peak (MiB) measured on the hub, and at that peak JupyterLab's
#: share (a kernel started here has no JupyterLab beside it, so its process tree is held to the rest).
STATED = next(n for n in json.loads((REPO / "labkit" / "doctor" / "hub-memory.json").read_text())["notebooks"]
              if n["notebook"] == NOTEBOOK.name)
#: The kernel's process tree at most (MiB): the stated peak less JupyterLab's share.
BUDGET_MIB = STATED["peak_mib"] - STATED["at_peak"]["jupyterlab"]
#: The brokers' heap cap the stated figure was measured with: the one labkit/hub/config.py gives each attendee's lab.
HUB_HEAP = {HEAP_ENV: "256"}
#: JVMs of one cluster of notebook 09: a controller and three brokers.
ONE_CLUSTER = 4


class Thing:
    """Something a cell starts, recording in ``log`` when it was made and closed."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log
        log.append(f"made {name}")

    def close(self) -> None:
        self.log.append(f"closed {self.name}")


@pytest.fixture(autouse=True)
def empty_registry():
    yield
    rerun._MADE.clear()


def test_a_second_call_of_a_name_closes_the_first_before_making_the_second():
    log: list[str] = []
    first = rerun.only("cluster", lambda: Thing("first", log))
    second = rerun.only("cluster", lambda: Thing("second", log))
    assert (first.name, second.name) == ("first", "second")
    assert log == ["made first", "closed first", "made second"]


def test_other_names_are_left_running():
    log: list[str] = []
    rerun.only("cluster", lambda: Thing("cluster", log))
    rerun.only("broker", lambda: Thing("broker", log))
    assert log == ["made cluster", "made broker"]


def test_stop_is_used_when_there_is_no_close():
    stopped = []

    class Stoppable:
        def stop(self) -> None:
            stopped.append(self)

    first = rerun.only("spark", Stoppable)
    rerun.only("spark", Stoppable)
    assert stopped == [first]


def test_a_thing_nothing_can_close_is_refused_and_not_kept():
    with pytest.raises(TypeError, match="close"):
        rerun.only("x", object)
    assert "x" not in rerun._MADE


def test_a_failed_make_leaves_nothing_kept_and_the_earlier_closed():
    log: list[str] = []
    rerun.only("cluster", lambda: Thing("first", log))

    def fails() -> Thing:
        raise RuntimeError("no ports")

    with pytest.raises(RuntimeError):
        rerun.only("cluster", fails)
    assert log == ["made first", "closed first"] and "cluster" not in rerun._MADE


class TreeSampler:
    """The kernel's process tree, sampled every ``every_s`` seconds in a thread: the most JVMs at once and the peak
    RSS (MiB)."""

    def __init__(self, pid: int, every_s: float = 0.25) -> None:
        self.kernel = psutil.Process(pid)
        self.every_s, self.most_jvms, self.peak_mib = every_s, 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def jvms(self) -> list[psutil.Process]:
        found = []
        for child in self.kernel.children(recursive=True):
            try:
                if child.name() == "java":
                    found.append(child)
            except psutil.Error:  # gone meanwhile
                continue
        return found

    def sample(self) -> None:
        rss = 0
        for proc in [self.kernel, *self.kernel.children(recursive=True)]:
            try:
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
        self.peak_mib = max(self.peak_mib, rss / 2**20)
        self.most_jvms = max(self.most_jvms, len(self.jvms()))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.sample()
            except psutil.NoSuchProcess:  # the kernel ended
                return

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_notebook_09_run_all_after_a_lock_in_keeps_one_cluster_under_its_stated_memory():
    """The run-sheet's routine: the learner runs the first cells (to the prediction, and the cluster's start if it
    comes first), locks in with the widget's own function, then presses Run All; the test replays Run All up to the
    first experiment (the cells that start things; the rest would only cost CPU) and the notebook's last cell. One
    cluster's JVMs at any time, none left after the notebook's ``cluster.close()``, and the lab's peak (the kernel's
    process tree, with the hub's heap cap the figure was measured with) under the figure ``make doctor`` states for
    09, less JupyterLab's share of it."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    predicted = next(i for i, cell in enumerate(code) if "labkit.predict(" in cell.source)
    started = next(i for i, cell in enumerate(code) if "EmbeddedCluster(" in cell.source)
    first_experiment = next(i for i, cell in enumerate(code) if "labkit.Experiment(" in cell.source)
    assert started < first_experiment, "the cluster starts after the first experiment: the replay would miss it"
    first_cells = code[:max(predicted, started) + 1]
    run_all = code[:first_experiment]
    lock_in = nbformat.v4.new_code_cell('prediction.lock_in("lost")  # the Lock in button\'s own function')
    client = NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    with client.setup_kernel(env={**os.environ, **HUB_HEAP}):
        kernel = psutil.Process(client.km.provisioner.process.pid)
        with TreeSampler(kernel.pid) as sampler:
            for cell in [*first_cells, lock_in, *run_all]:
                client.execute_cell(cell, notebook.cells.index(cell) if cell in notebook.cells else 0)
                sampler.sample()
            client.execute_cell(code[-1], notebook.cells.index(code[-1]))  # cluster.close()
            sampler.sample()
            left = [proc.pid for proc in sampler.jvms()]
    print(f"notebook 09 replayed: at most {sampler.most_jvms} JVMs at once, the kernel's tree at most "
          f"{sampler.peak_mib:.0f} MiB (budget {BUDGET_MIB} MiB: {STATED['peak_mib']} stated less JupyterLab's "
          f"{STATED['at_peak']['jupyterlab']}), left after close: {left}")
    assert sampler.most_jvms == ONE_CLUSTER, f"{sampler.most_jvms} JVMs at once: more than one cluster's"
    assert left == [], f"JVMs left in the kernel after the notebook's cluster.close(): {left}"
    assert sampler.peak_mib < BUDGET_MIB, (sampler.peak_mib, BUDGET_MIB)
