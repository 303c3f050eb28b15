"""The suite's per-file CPU report (tests/cpu_report.py): its process-tree figure counts a child's CPU while it runs
and after it ended, once."""

from __future__ import annotations

import subprocess
import sys

from tests.cpu_report import tree_cpu_s

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
    assert reaped >= live  # no CPU lost when the child ended
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
