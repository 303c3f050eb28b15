"""The attendees' Unix users: made on first sign-in, each with a home of mode 0700, and removed only by whoever made
them (the hub's test).

Debian's ``useradd`` (package ``passwd``) makes the user, its own group (``USERGROUPS_ENAB yes``) and its home from
``/etc/skel``, mode 0755 with the default ``UMASK 022`` (issue 38): :func:`create` sets 0700 at once, before the
attendee's first process runs, so no attendee can list or read another's files. The user has no password (``useradd``
leaves it locked): attendees reach the machine through the hub only.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import threading
import time

import psutil

from labkit.errors import LabkitError
from labkit.hub.names import COMMENT, is_lab_user, unix_name, why_refused

#: ``useradd`` locks ``/etc/passwd`` and fails rather than waits when another holds it: one at a time in the hub.
_USERADD = threading.Lock()
#: The shell an attendee's JupyterLab terminal opens (``useradd --shell``).
SHELL = "/bin/bash"


def create(name: str) -> pwd.struct_passwd:
    """Make the Unix user of hub user ``name`` (:func:`labkit.hub.names.unix_name`) with home mode 0700, or return it
    if the lab made it before (its home's mode set to 0700 again). Blocking (``useradd``, a few ms): call it from a
    thread in the hub.

    Raises:
        LabkitError: the name is refused (:func:`labkit.hub.names.why_refused`), or ``useradd`` failed (its message
            quoted).
    """
    if (why := why_refused(name)):
        raise LabkitError(why)
    user = unix_name(name)
    with _USERADD:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            done = subprocess.run(["useradd", "--create-home", "--user-group", "--shell", SHELL,
                                   "--comment", f"{COMMENT} {name}", user], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise LabkitError(f"useradd {user} failed: {done.stderr.strip()}") from None
            entry = pwd.getpwnam(user)
    if not is_lab_user(entry):  # made by someone else between the check and here
        raise LabkitError(f"The Unix user {user} exists and was not made by the lab: choose another name.")
    os.chmod(entry.pw_dir, 0o700)
    return entry


def processes_of(uid: int) -> list[int]:
    """The pids of every live process (zombies left out: they are only waiting for their parent) whose effective uid
    is ``uid``, as psutil reads them."""
    return [p.info["pid"] for p in psutil.process_iter(["pid", "uids", "status"])
            if p.info["uids"] is not None and p.info["uids"].effective == uid
            and p.info["status"] != psutil.STATUS_ZOMBIE]


def remove(name: str, timeout_s: float = 10.0) -> bool:
    """Remove the Unix user of hub user ``name``, its home and its processes (SIGKILL), if the lab made it
    (:func:`labkit.hub.names.is_lab_user`); anything else is left alone. Returns whether a user was removed.

    Raises:
        LabkitError: ``userdel`` failed (its message quoted) or processes were left after ``timeout_s`` seconds.
    """
    try:
        entry = pwd.getpwnam(unix_name(name))
    except KeyError:
        return False
    if not is_lab_user(entry):
        return False
    deadline = time.monotonic() + timeout_s
    while (pids := processes_of(entry.pw_uid)):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise LabkitError(f"processes of {entry.pw_name} survived SIGKILL: {pids}")
        time.sleep(0.1)
    done = subprocess.run(["userdel", "--remove", entry.pw_name], capture_output=True, text=True, timeout=60)
    if done.returncode not in (0, 12):  # 12: the home could not be removed (gone already)
        raise LabkitError(f"userdel {entry.pw_name} failed: {done.stderr.strip()}")
    return True
