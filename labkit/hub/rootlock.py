"""The hub's locks: files only root can open, taken within a deadline (issue 63).

``flock(2)`` needs only an open descriptor, a read-only one included: a lock file another user can open is a lock
that user can hold, and every hub waiting for it waits on them. An attendee's kernel that held the accounts lock
(then ``/run/labkit-accounts.lock``, mode 0644) blocked every first sign-in of the room, and the set-up's lock (then
``<prefix>/.setup.lock``, 0644) a restart of ``make hub``. So each of the hub's locks is a file in a folder that is
root's alone (:data:`LOCK_DIR`, mode 0700: no other user can even reach the file), made by ``os.open`` with mode 0600
(never through the umask), without following a symbolic link; a folder or file that is there already and is not
root's alone (another owner, group or other permission bits, a link, not a folder or file) is refused, naming it and
what to do, rather than used. A lock is waited for at most a deadline, then refused naming its holder's pid (which
the holder writes into the file), never without end.

Run as root (the hub, its set-up); "root" is this process's effective uid, so that the checks mean the same for a
test run as another user.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from labkit.core.errors import LabkitError

#: The folder of the hub's machine-wide locks (root's, 0700; in ``/run``: gone at a reboot, when no lock is held).
LOCK_DIR = Path("/run/labkit-hub")
#: Seconds between two tries of a lock another process holds.
POLL_S = 0.05


def ensure_private_folder(folder: Path) -> Path:
    """Make ``folder`` (mode 0700) unless it exists, and return it once it is a folder of this process's user that
    no other user may enter or change (no group or other permission bit, not a symbolic link).

    Raises:
        LabkitError: it is not (the message names it, its owner and mode, and the fix).
    """
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    _check_private(os.lstat(folder), folder, stat.S_ISDIR, "folder")
    return folder


def _check_private(info: os.stat_result, path: Path, kind, what: str) -> None:
    if not kind(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise LabkitError(f"The hub's lock {what} {path} is not uid {os.geteuid()}'s alone (owner uid {info.st_uid}, "
                          f"mode {stat.filemode(info.st_mode)}): another user could hold the hub's lock. Remove it "
                          f"(rm -r {path}) and start again: the hub makes it afresh, mode "
                          f"{'0700' if what == 'folder' else '0600'}.")


@contextmanager
def held(path: Path, wait_s: float, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the lock file ``path`` for the block, taken within ``wait_s`` seconds: its
    folder must be private (:func:`ensure_private_folder`, made if missing), the file is made mode 0600 if missing
    and must be this user's alone; it records this process's pid while held. ``what`` names the lock in the
    refusal. Blocking (polls every :data:`POLL_S` s): call it from a thread in the hub.

    Raises:
        LabkitError: the folder or the file is not private (named, with the fix), or another process held the lock
            for ``wait_s`` seconds (its pid named, as it wrote it).
    """
    ensure_private_folder(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _check_private(os.fstat(fd), path, stat.S_ISREG, "file")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    raise LabkitError(f"{what} ({path}) has been held by pid {holder} for {wait_s:g} s: wait for it "
                                      f"to end, or stop it (kill {holder}) and try again.") from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
