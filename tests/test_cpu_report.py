"""The suite's per-file CPU report (tests/cpu_report.py): its process-tree figure counts a child's CPU while it runs
and after it ended, once; its cgroup figure also counts an orphan's."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from labkit.core.waiting import wait_until
from tests.cpu_report import CgroupMeter, critical_path, tree_cpu_s

_BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_a_childs_cpu_counts_while_it_runs_and_once_it_was_reaped() -> None:
    before = tree_cpu_s()
    child = subprocess.Popen([sys.executable, "-c", _BURN.format(s=0.6) + "import time; time.sleep(30)"])
    try:
        while tree_cpu_s() - before < 0.6:  # the burn is charged while the child lives
            pass
        live = tree_cpu_s() - before
    finally:
        child.kill()
        child.wait()
    reaped = tree_cpu_s() - before
    assert live >= 0.6
    # no CPU lost when the child ended, to one clock tick: a live child's times come from /proc in ticks, a reaped
    # one's from wait()'s rusage, and the sums differ in their last bits (0.6099999999999994 against 0.61...0136)
    assert reaped >= live - 0.01
    assert reaped < live + 1.0  # and none counted twice (this process's own loop adds a little)


def test_a_grandchild_reaped_by_a_live_child_still_counts() -> None:
    before = tree_cpu_s()
    code = (f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {_BURN.format(s=0.5)!r}])\n"
            "print('done', flush=True)\ntime.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        assert 0.5 <= tree_cpu_s() - before < 2.0
    finally:
        child.kill()
        child.wait()


def test_the_cgroup_meter_counts_an_orphan_the_process_tree_misses(tmp_path):
    try:
        meter = CgroupMeter("test-cpu-report")
    except OSError as exc:
        pytest.skip(f"no writable cgroup v1 cpuacct here ({exc}): the report falls back to the process tree")
    try:
        done = tmp_path / "done"
        before, tree_before = meter.cpu_s(), tree_cpu_s()
        orphan = _BURN.format(s=0.5) + f"open({str(done)!r}, 'w').close()\n"
        # the child starts the burner and exits at once: the burner's parent is gone, init reaps it
        subprocess.run([sys.executable, "-c", f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                                              f"{orphan!r}])"], check=True)
        assert wait_until(done.exists, 60)
        time.sleep(0.2)  # the burner exits after writing the file
        assert meter.cpu_s() - before >= 0.5
        assert tree_cpu_s() - tree_before < 0.4
    finally:
        meter.close()
    assert not meter.group.exists()  # removed once empty, this process moved back


def test_the_longest_worker_is_named_with_its_wall_and_files_beside_the_others() -> None:
    files = {"gw0": {"tests/test_hub.py"}, "gw1": {"a.py", "b.py"}, "gw2": {"c.py"}}
    assert critical_path({"gw0": 901.4, "gw1": 610.2, "gw2": 655.0}, files) == (
        "longest worker: gw0, 901 s of wall, 1 file (the others: gw1 610 s, gw2 655 s)")
    assert critical_path({"gw1": 3.0}, files).startswith("longest worker: gw1, 3 s of wall, 2 files")
    assert critical_path({"main": 12.0}, {"main": {"a.py"}}) == "longest worker: main, 12 s of wall, 1 file"
    assert critical_path({}, {}) == "longest worker: none (no test ran)"
