"""labkit.core.procs on real processes: a child lives as long as the lab, whatever thread started it, and dies with it,
even by SIGKILL; what Popen raises reaches the caller; a start not made in time leaves no child; a forked lab spawns
too; process states come from psutil; terminate gives SIGTERM, then SIGKILL to those that ignore it, and signals
nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psutil
import pytest

from labkit.core.procs import process_state, spawn, terminate
from labkit.core.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie (ended, not yet reaped by its parent)."""
    return process_state(pid) in ("", "Z")


def spawned_in_a_thread_that_ends(argv: list[str]) -> subprocess.Popen:
    """``spawn(argv)`` called from a thread of its own; returns once that thread has ended, in the kernel too: Linux
    sends a parent-death signal while the thread exits, before the thread leaves its process's thread list."""
    started = []
    thread = threading.Thread(target=lambda: started.append(spawn(argv)), name="short-lived")
    thread.start()
    thread.join()
    assert wait_until(lambda: thread.native_id not in {t.id for t in psutil.Process().threads()}, 60, 0.01)
    return started[0]


def test_a_child_started_from_a_thread_that_ends_lives_on():
    child = spawned_in_a_thread_that_ends(["sleep", "600"])
    try:
        assert not wait_until(lambda: ended(child.pid), 2, 0.05), "the child died with the thread that started it"
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


#: The lab: starts a ``sleep`` from a thread that ends, writes its pid to the file ``argv[1]``, then waits forever.
LAB = """
import os, sys, threading
from tests.test_procs import spawned_in_a_thread_that_ends
child = spawned_in_a_thread_that_ends(["sleep", "600"])
with open(sys.argv[1] + ".partial", "w") as f:
    f.write(str(child.pid))
os.rename(sys.argv[1] + ".partial", sys.argv[1])
threading.Event().wait()
"""


def test_when_the_lab_is_sigkilled_its_children_die(tmp_path):
    pid_file = tmp_path / "child.pid"
    lab = subprocess.Popen([sys.executable, "-c", LAB, str(pid_file)], cwd=REPO, stderr=subprocess.PIPE)
    child = None
    try:
        assert wait_until(lambda: pid_file.exists() or lab.poll() is not None, 60), "the lab script wrote no pid"
        assert lab.poll() is None, lab.stderr.read().decode()
        child = psutil.Process(int(pid_file.read_text()))
        assert child.ppid() == lab.pid and not ended(child.pid)
        lab.send_signal(signal.SIGKILL)
        lab.wait()
        assert wait_until(lambda: ended(child.pid), 60, 0.05), "the lab's child outlived it"
    finally:
        lab.kill()
        lab.wait()
        if child is not None and child.is_running():  # psutil: the same process (its start time), not a stranger
            child.kill()


def test_what_popen_raises_reaches_the_caller_unchanged():
    missing = f"/nonexistent/{uuid.uuid4()}/java"
    with pytest.raises(FileNotFoundError) as caught:
        spawn([missing])
    assert caught.value.filename == missing
    with pytest.raises(TypeError, match="preexec_fn"):
        spawn(["true"], preexec_fn=None)  # the spawner's own


def test_a_start_not_made_in_time_leaves_no_child():
    argv = ["sleep", f"600.{uuid.uuid4().int % 10**9}"]  # a command line no other process has

    def running() -> bool:
        for child in psutil.Process().children():
            try:
                if child.cmdline() == argv:
                    return True
            except psutil.NoSuchProcess:  # gone meanwhile, or a zombie
                pass
        return False

    with pytest.raises(TimeoutError, match="did not start sleep within 0 s"):
        spawn(argv, timeout_s=0)
    assert wait_until(lambda: not running(), 60)


def test_a_forked_lab_starts_children_with_a_spawner_thread_of_its_own():
    spawn(["true"]).wait()  # this process's spawner thread runs; a fork copies only the forking thread
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(spawn(["true"], timeout_s=30).wait())
        finally:
            os._exit(1)
    codes = []

    def reaped() -> bool:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            codes.append(os.waitstatus_to_exitcode(status))
        return bool(done)

    assert wait_until(reaped, 120) and codes == [0]


def test_process_state_is_the_linux_letter_of_psutils_status():
    child = spawn(["sleep", "600"])
    try:
        assert process_state(child.pid) in ("S", "R")
        os.kill(child.pid, signal.SIGSTOP)
        assert wait_until(lambda: process_state(child.pid) == "T", 60, 0.01)
        child.kill()
        assert wait_until(lambda: process_state(child.pid) == "Z", 60, 0.01)  # not yet reaped
    finally:
        child.kill()
        child.wait()
    assert process_state(child.pid) == ""


def test_terminate_ends_a_polite_process_by_sigterm_a_stubborn_one_by_sigkill_and_no_other():
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ignoring SIGTERM', flush=True); time.sleep(600)"],
                                stdout=subprocess.PIPE, text=True)
    polite, bystander = (subprocess.Popen(["sleep", "600"]) for _ in range(2))
    gone = subprocess.Popen(["true"])
    gone_proc = psutil.Process(gone.pid)
    try:
        assert stubborn.stdout.readline().strip() == "ignoring SIGTERM"
        gone.wait()  # reaped: its pid names no process any more
        found = [psutil.Process(stubborn.pid), psutil.Process(polite.pid), gone_proc]
        assert terminate(found, 1.0, 60.0) == []
        # psutil reaped our children while waiting: the exit statuses are its (negative: the signal that ended it)
        assert (found[0].returncode, found[1].returncode) == (-signal.SIGKILL, -signal.SIGTERM)
        assert bystander.poll() is None
    finally:
        for child in (stubborn, polite, bystander):
            child.kill()
            child.wait()
