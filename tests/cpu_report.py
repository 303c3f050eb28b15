"""Where the suite's CPU goes: a pytest plugin (``conftest.py`` loads it) that prints, after ``make test``'s slowest
items, the CPU seconds of each test file (user + system time of the pytest process and everything it started: the
brokers' and participants' JVMs, notebook kernels, participants, Spark drivers), then the longest worker's wall
(the run's critical path: from the session's start to that worker's last item).

A file's figure is the CPU used from the start of each of its items' setup to the end of its teardown, summed over
its items; with pytest-xdist each worker measures what it started and sends the figure with the teardown report. A
process that lives across files (a worker's session broker) is charged to the file that runs while it works. The
whole run's figure is the CPU from the start of the session to its end, workers included, and the load average is
sampled every 10 s beside it. Every new test is held to the share of the total its file shows.

Two meters, the first that works here:

* **cgroup** (:class:`CgroupMeter`): where cgroup v1's ``cpuacct`` controller is writable (root on this machine), the
  run and each worker get a cgroup of their own; every process started inside inherits it and stays in it when its
  parent dies, so the figure is exact: an orphan (the JVM of a SIGKILLed Spark driver, whose parent died first and
  which init reaps) is counted too.
* **process tree** (:class:`TreeMeter`, psutil): ``user + system + children_user + children_system`` of this process
  and every live descendant. A process that ended was reaped by its parent, whose ``children_*`` times hold it from
  then on, so nothing counts twice; an orphan's CPU is lost.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
import pytest

from labkit.core.waiting import wait_until

#: How often the load average is sampled during the run (s).
LOAD_SAMPLE_S = 10.0
#: Where cgroup v1 mounts its cpuacct controller.
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
#: How long a closing meter tries to remove its cgroup (s): the processes it started may take a moment to end.
REMOVE_S = 5.0
_START = pytest.StashKey[float]()


def tree_cpu_s(process: psutil.Process | None = None) -> float:
    """CPU seconds (user + system) used so far by ``process`` (default: this one), its live descendants and every
    descendant they reaped."""
    process = process or psutil.Process()
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # ended since the listing: its parent's children_* has it
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


class TreeMeter:
    """CPU seconds of this process tree (:func:`tree_cpu_s`); orphans are not counted."""

    name = "process tree (psutil): a process orphaned before it ended is not counted"

    def cpu_s(self) -> float:
        return tree_cpu_s()

    def close(self) -> None:
        pass


class CgroupMeter:
    """CPU seconds of a cgroup v1 ``cpuacct`` group made for this process, which every process it starts inherits
    (orphans included); closed, it moves this process back and removes the group once it is empty.

    Raises:
        OSError: no writable cpuacct hierarchy here (not root, or cgroup v2 only).
    """

    name = "cgroup cpuacct: every process started, orphans included"

    def __init__(self, label: str) -> None:
        self.parent = CPUACCT / _own_cpuacct_path()
        self.group = self.parent / f"{label}-{os.getpid()}"
        self.group.mkdir()
        try:
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            self.group.rmdir()
            raise

    def cpu_s(self) -> float:
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        """Move this process back to its parent group and remove the group and the empty groups in it (a worker's,
        when the worker ended before its own removal went through); a group a process still runs in is left to it."""
        try:
            (self.parent / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            return
        wait_until(lambda: _remove_empty(self.group), REMOVE_S)


def _remove_empty(group: Path) -> bool:
    """Remove cgroup ``group`` and its sub-groups, deepest first; whether all went (a group with a process in it
    stays)."""
    for sub in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            sub.rmdir()
        except OSError:
            pass
    try:
        group.rmdir()
    except OSError:
        return not group.exists()
    return True


def _own_cpuacct_path() -> str:
    """This process's cpuacct cgroup, relative to :data:`CPUACCT` (from ``/proc/self/cgroup``).

    Raises:
        OSError: no cpuacct controller of cgroup v1 here.
    """
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return path.lstrip("/")
    raise OSError("no cgroup v1 cpuacct controller")


def meter(label: str) -> CgroupMeter | TreeMeter:
    """A :class:`CgroupMeter` where cgroup v1's cpuacct is writable, else a :class:`TreeMeter`."""
    try:
        return CgroupMeter(label)
    except OSError:
        return TreeMeter()


class CpuReport:
    """Measures each item's CPU (on a worker, or the only process); adds them up per file and prints them (on the
    controller, or the only process)."""

    def __init__(self, printer: bool, worker: str) -> None:
        self.cpu_s: dict[str, float] = defaultdict(float)
        self.wall_s: dict[str, float] = defaultdict(float)
        self.loads: list[float] = []
        self.worker = worker
        self.t0 = time.monotonic()
        self.worker_end_s: dict[str, float] = {}  # by worker: its last teardown, s since the session began
        self.worker_files: dict[str, set[str]] = defaultdict(set)
        self.meter = meter(f"labkit-pytest-{worker}")
        self._start_cpu = self.meter.cpu_s()
        self._done = threading.Event()
        if printer:
            threading.Thread(target=self._sample_load, daemon=True, name="cpu-report-load").start()

    def _sample_load(self) -> None:
        while not self._done.wait(LOAD_SAMPLE_S):
            self.loads.append(os.getloadavg()[0])

    # -- on each worker (or the only process): measure ------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item.stash[_START] = self.meter.cpu_s()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        if call.when == "teardown" and _START in item.stash:
            report = outcome.get_result()
            report.cpu_s = self.meter.cpu_s() - item.stash[_START]  # travels to the controller, as does:
            report.worker = self.worker

    def pytest_unconfigure(self) -> None:
        self._done.set()
        self.meter.close()

    # -- on the controller (or the only process): add up and print -----------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::")[0]
        self.wall_s[path] += report.duration
        self.cpu_s[path] += getattr(report, "cpu_s", 0.0)
        if hasattr(report, "worker"):
            self.worker_end_s[report.worker] = time.monotonic() - self.t0
            self.worker_files[report.worker].add(path)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        self._done.set()
        total = self.meter.cpu_s() - self._start_cpu
        tr = terminalreporter
        tr.write_sep("=", "CPU seconds per test file (user + system of every process it started)")
        tr.write_line(f"{'cpu s':>8} {'wall s':>8}  file")
        for path, cpu in sorted(self.cpu_s.items(), key=lambda kv: -kv[1]):
            tr.write_line(f"{cpu:8.1f} {self.wall_s[path]:8.1f}  {path}")
        tr.write_line(f"{sum(self.cpu_s.values()):8.1f} {'':8}  all test files")
        load = (f"load average mean {sum(self.loads) / len(self.loads):.1f}, max {max(self.loads):.1f}"
                if self.loads else "load average not sampled (run shorter than 10 s)")
        tr.write_line(critical_path(self.worker_end_s, self.worker_files))
        tr.write_line(f"whole run: {total:.0f} CPU s on {len(os.sched_getaffinity(0))} of {os.cpu_count()} CPUs; "
                      f"{load}; measured by {self.meter.name}")


def critical_path(end_s: dict[str, float], files: dict[str, set[str]]) -> str:
    """The line naming the longest worker: the run's critical path (issue 52), each worker's wall being seconds from
    the session's start to its last item's teardown (``end_s``, by worker id, e.g. "gw0"; "main" without workers),
    with the files it ran (``files``); the others' walls beside it."""
    if not end_s:
        return "longest worker: none (no test ran)"
    longest = max(end_s, key=end_s.get)
    others = ", ".join(f"{w} {s:.0f} s" for w, s in sorted(end_s.items()) if w != longest)
    n = len(files[longest])
    return (f"longest worker: {longest}, {end_s[longest]:.0f} s of wall, {n} file{'s' * (n != 1)}"
            + (f" (the others: {others})" if others else ""))


def pytest_configure(config: pytest.Config) -> None:
    """Register the report (on xdist workers too: they measure, the controller prints)."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    config.pluginmanager.register(CpuReport(printer=worker is None, worker=worker or "main"), "labkit-cpu-report")
