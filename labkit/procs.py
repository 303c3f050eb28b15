"""Child processes that never outlive the Python that started them."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: ask Linux to SIGKILL the child when its parent dies,
    even by SIGKILL (``prctl(PR_SET_PDEATHSIG)``; it fires when the thread that started it ends)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def process_state(pid: int) -> str:
    """Linux state letter of process ``pid`` from ``/proc/<pid>/stat``: "R" running, "S" sleeping,
    "T" stopped (SIGSTOP), "Z" zombie; "" if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
