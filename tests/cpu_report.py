"""Where the suite's CPU goes: a pytest plugin (``conftest.py`` loads it) that prints, after ``make test``'s slowest
items, the CPU seconds of each test file: user + system time of the pytest process and its whole process tree (the
brokers' and participants' JVMs, notebook kernels, participants, Spark drivers), from psutil.

A file's figure is the tree's CPU from the start of each of its items' setup to the end of its teardown, summed over
its items; with pytest-xdist each worker measures its own tree and sends the figure with the teardown report. A
process that lives across files (a worker's session broker) is charged to the file that runs while it works. The
whole run's figure is the tree's CPU from the start of the session to its end (workers included, reaped by then), and
the load average is sampled every 10 s beside it. Every new test is held to the share of the total its file shows.

The tree's CPU is ``user + system + children_user + children_system`` of this process and of every live descendant:
a process that ended was reaped by its parent, whose ``children_*`` times hold it from then on, so nothing counts
twice and nothing is lost but a process whose parent ended before it (reaped by init).
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict

import psutil
import pytest

#: How often the load average is sampled during the run (s).
LOAD_SAMPLE_S = 10.0
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


class CpuReport:
    """Collects per-file CPU seconds and wall seconds from the test reports; prints them at the end."""

    def __init__(self, printer: bool) -> None:
        self.cpu_s: dict[str, float] = defaultdict(float)
        self.wall_s: dict[str, float] = defaultdict(float)
        self.loads: list[float] = []
        self._start_cpu = tree_cpu_s()
        self._done = threading.Event()
        if printer:  # a worker only measures
            threading.Thread(target=self._sample_load, daemon=True, name="cpu-report-load").start()

    def _sample_load(self) -> None:
        while not self._done.wait(LOAD_SAMPLE_S):
            self.loads.append(os.getloadavg()[0])

    # -- on each worker (or the only process): measure ------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item.stash[_START] = tree_cpu_s()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        if call.when == "teardown" and _START in item.stash:
            outcome.get_result().cpu_s = tree_cpu_s() - item.stash[_START]  # travels to the controller with xdist

    # -- on the controller (or the only process): add up and print -----------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::")[0]
        self.wall_s[path] += report.duration
        self.cpu_s[path] += getattr(report, "cpu_s", 0.0)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        self._done.set()
        total = tree_cpu_s() - self._start_cpu
        tr = terminalreporter
        tr.write_sep("=", "CPU seconds per test file (user + system of the process tree)")
        tr.write_line(f"{'cpu s':>8} {'wall s':>8}  file")
        for path, cpu in sorted(self.cpu_s.items(), key=lambda kv: -kv[1]):
            tr.write_line(f"{cpu:8.1f} {self.wall_s[path]:8.1f}  {path}")
        tr.write_line(f"{sum(self.cpu_s.values()):8.1f} {'':8}  all test files")
        load = (f"load average mean {sum(self.loads) / len(self.loads):.1f}, max {max(self.loads):.1f}"
                if self.loads else "load average not sampled (run shorter than 10 s)")
        tr.write_line(f"whole run: {total:.0f} CPU s on {len(os.sched_getaffinity(0))} of {os.cpu_count()} CPUs; "
                      f"{load}")


def pytest_configure(config: pytest.Config) -> None:
    """Register the report (on xdist workers too: they measure, the controller prints)."""
    config.pluginmanager.register(CpuReport(printer=not hasattr(config, "workerinput")), "labkit-cpu-report")
