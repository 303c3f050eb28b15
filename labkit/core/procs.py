"""Start children that never outlive their Python; tell which process a pid names.

Child processes that live as long as the Python that started them, and never longer; which process a pid names.

Every child the lab starts (a participant, a broker JVM, a Spark daemon) is forked by one long-lived daemon thread
of the process, the spawner (:func:`spawn`), and asks Linux to SIGKILL it when its parent dies (prctl(2)
``PR_SET_PDEATHSIG``). Linux sends that signal when the *thread* that forked the child ends, not the process: a
child forked by a short-lived thread (a supervisor's, a thread pool's) would die with that thread. The spawner thread
ends only when the process does, so a child lives until the lab (the kernel, the test process, ``make stop``) ends,
whatever thread asked for it, and dies with it, even when the lab is SIGKILLed.

Where there is no parent-death signal (every system but Linux, e.g. macOS), the spawner still starts every child,
but nothing kills a child when the lab dies without running its atexit handlers (SIGKILL, a crash): the child is
reparented to init (launchd) and keeps running, a broker JVM keeping its ports, until it is killed by hand. When the
lab exits normally, the atexit handlers of participants, brokers and Spark clusters stop their processes on every
system. Only Linux is tested here.

Processes are inspected with psutil; the one call psutil cannot make, setting the parent-death signal, goes to
libc's ``prctl`` through ctypes (:func:`_die_with_parent`).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

import psutil

#: Seconds :func:`spawn` waits by default for the spawner thread to start a child: a fork and exec take
#: milliseconds, even queued behind other starts on a loaded machine.
SPAWN_TIMEOUT_S = 60.0

#: Linux state letters (``ps`` STAT codes, ``/proc/<pid>/stat``) of the statuses psutil names: :func:`process_state`.
_STATE_LETTERS = {psutil.STATUS_RUNNING: "R", psutil.STATUS_SLEEPING: "S", psutil.STATUS_DISK_SLEEP: "D",
                  psutil.STATUS_STOPPED: "T", psutil.STATUS_TRACING_STOP: "t", psutil.STATUS_ZOMBIE: "Z",
                  psutil.STATUS_DEAD: "X", psutil.STATUS_WAKING: "W", psutil.STATUS_IDLE: "I",
                  psutil.STATUS_PARKED: "P"}

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: libc's prctl(2), resolved once in the parent (never between fork and exec); ``None`` off Linux. The one call to C
#: in labkit: psutil reads processes but cannot set a parent-death signal.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent(parent: int) -> None:
    """``preexec_fn`` of every child, run in the child between fork and exec: ask Linux to SIGKILL it when the thread
    that forked it (the spawner) ends, and SIGKILL it now if process ``parent`` already died before the request, as
    prctl(2) advises for ``PR_SET_PDEATHSIG`` (the child is then another process's)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _serve(jobs: queue.SimpleQueue) -> None:
    """The spawner thread: start each child asked for, forever; hand back its Popen or what Popen raised."""
    preexec = None if _prctl is None else functools.partial(_die_with_parent, os.getpid())
    while True:
        future, argv, popen_kwargs = jobs.get()
        if not future.set_running_or_notify_cancel():  # the caller gave up before its turn
            continue
        try:
            future.set_result(subprocess.Popen(argv, preexec_fn=preexec, **popen_kwargs))
        except BaseException as exc:  # the caller's to handle: the spawner serves on
            future.set_exception(exc)


_lock = threading.Lock()
_jobs: queue.SimpleQueue | None = None  # the spawner thread's queue, once it runs


def _spawner() -> queue.SimpleQueue:
    """The spawner thread's queue of ``(future, argv, popen_kwargs)``; the thread starts on first use."""
    global _jobs
    with _lock:
        if _jobs is None:
            _jobs = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(_jobs,), name="labkit-spawner", daemon=True).start()
        return _jobs


def _after_fork_in_child() -> None:
    """A forked child has no spawner thread (fork copies only the forking thread): it starts its own on first use."""
    global _lock, _jobs
    _lock, _jobs = threading.Lock(), None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _kill_unclaimed(future: concurrent.futures.Future) -> None:
    """Done callback of a start :func:`spawn` gave up waiting for: the child it started, if any, goes."""
    if future.exception() is None:
        future.result().kill()
        future.result().wait()


def spawn(argv: Sequence[str], *, timeout_s: float = SPAWN_TIMEOUT_S, **popen_kwargs: object) -> subprocess.Popen:
    """Start ``argv`` as ``subprocess.Popen(argv, **popen_kwargs)`` would, but from labkit's spawner thread, so that
    the child lives until this process ends, whichever thread calls, and is SIGKILLed when it ends, even by SIGKILL
    (Linux: prctl(2) ``PR_SET_PDEATHSIG``, which fires when the forking thread ends; elsewhere, see the module).
    Waits at most ``timeout_s`` seconds for the spawner. Thread-safe.

    Returns:
        The child's ``subprocess.Popen``: wait for it, signal it and read its pid from any thread.
    Raises:
        What ``subprocess.Popen`` raised, unchanged (e.g. ``FileNotFoundError`` for a missing program;
            ``TypeError`` for ``preexec_fn``, which the spawner sets itself).
        TimeoutError: the spawner did not start the child within ``timeout_s`` seconds; a child it starts after
            that is killed.
    """
    future: concurrent.futures.Future = concurrent.futures.Future()
    _spawner().put((future, list(argv), popen_kwargs))
    concurrent.futures.wait([future], timeout_s)
    if not future.done():
        if not future.cancel():  # being started: killed as soon as it is
            future.add_done_callback(_kill_unclaimed)
        raise TimeoutError(f"labkit's spawner thread did not start {argv[0]} within {timeout_s:g} s")
    return future.result()


def os_status(pid: int) -> str:
    """psutil's status of process ``pid`` (``psutil.Process(pid).status()``: e.g. "running", "sleeping", "stopped"
    after SIGSTOP, "zombie"), or "gone" if there is no such process (or it may not be read)."""
    try:
        return psutil.Process(pid).status()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "gone"


def process_state(pid: int) -> str:
    """Linux state letter of process ``pid``, from :func:`os_status`: "R" running, "S" sleeping, "D" disk sleep, "T"
    stopped (SIGSTOP), "t" stopped by a tracer, "Z" zombie (ended, not yet reaped), "I" idle; "?" for a status
    without a letter here (psutil's "wake-kill", BSD's "locked" and "waiting"); "" if there is no such process."""
    status = os_status(pid)
    return "" if status == "gone" else _STATE_LETTERS.get(status, "?")


def start_time(pid: int) -> float:
    """Start time of process ``pid`` (psutil's ``create_time``: seconds since the epoch), recorded in a state
    file beside the pid so that a later check can tell the same process from one that reuses its pid
    (:func:`why_not_ours`).

    Raises:
        psutil.NoSuchProcess: no process ``pid``.
    """
    return psutil.Process(pid).create_time()


def why_not_ours(state: dict) -> str:
    """Why the process a state file names (``{"pid": int, "started": float seconds since the epoch}``) is not the
    one the lab started and must not be signalled, or ``""`` if it is (alive, same start time). A state file
    without ``"started"`` (from an older labkit) is never trusted."""
    pid, started = state["pid"], state.get("started")
    try:
        proc = psutil.Process(pid)
        created, status = proc.create_time(), proc.status()
    except psutil.NoSuchProcess:
        return "not running"
    if status == psutil.STATUS_ZOMBIE:
        return "not running"
    if started is None:
        return (f"not verifiable (pid {pid} is alive but its state file, from an older labkit, has no start time): "
                "not signalled; stop it yourself if it is the lab's")
    if abs(created - started) > 0.1:  # create_time is exact to a clock tick
        return f"not running (pid reused: pid {pid} is now another process, not signalled)"
    return ""


def terminate(procs: Sequence[psutil.Process], grace_s: float, kill_s: float) -> list[psutil.Process]:
    """SIGTERM each of ``procs`` (found with psutil by the caller), SIGKILL those alive ``grace_s`` seconds later, and
    wait at most ``kill_s`` seconds more. psutil refuses to signal a pid reused since it read the process, so nothing
    else is signalled; a process that ended meanwhile is skipped. Returns those still alive (none, unless one is stuck
    in the kernel)."""
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    return psutil.wait_procs(alive, timeout=kill_s)[1] if alive else []
