"""The attendees' Unix users: made on first sign-in, each with a home of mode 0700, and removed only by whoever made
them (the hub's test).

Debian's ``useradd`` (package ``passwd``) makes the user, its own group (``USERGROUPS_ENAB yes``) and its home from
``/etc/skel``, mode 0755 with the default ``UMASK 022`` (issue 38): :func:`create` sets 0700 at once, before the
attendee's first process runs, so no attendee can list or read another's files. The user has no password (``useradd``
leaves it locked): attendees reach the machine through the hub only. Its uid is the lowest free one of
:data:`labkit.hub.firewall.ATTENDEE_UIDS`, which gives it its block of ports (:func:`labkit.hub.firewall.port_block`).

Every process of an attendee's Unix user is their lab's, by construction (the hub starts them as that user, and
nobody else runs as it), so :func:`end_processes` ends a lab by uid: JupyterLab, kernels, the broker, participants.
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
from labkit.hub.firewall import ATTENDEE_UIDS
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
        LabkitError: the name is refused (:func:`labkit.hub.names.why_refused`), every uid of
            :data:`~labkit.hub.firewall.ATTENDEE_UIDS` is taken, or ``useradd`` failed (its message quoted).
    """
    if (why := why_refused(name)):
        raise LabkitError(why)
    user = unix_name(name)
    with _USERADD:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            taken = {entry.pw_uid for entry in pwd.getpwall()}
            uid = next((uid for uid in ATTENDEE_UIDS if uid not in taken), None)
            if uid is None:
                raise LabkitError(f"All {len(ATTENDEE_UIDS)} attendee accounts of this machine are taken (uids "
                                  f"{ATTENDEE_UIDS.start}-{ATTENDEE_UIDS.stop - 1}): remove old ones (userdel -r "
                                  "lab-<name>).") from None
            done = subprocess.run(["useradd", "--create-home", "--user-group", "--uid", str(uid), "--shell", SHELL,
                                   "--comment", f"{COMMENT} {name}", user], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise LabkitError(f"useradd {user} failed: {done.stderr.strip()}") from None
            entry = pwd.getpwnam(user)
    if not is_lab_user(entry):  # made by someone else between the check and here
        raise LabkitError(f"The Unix user {user} exists and was not made by the lab: choose another name.")
    os.chmod(entry.pw_dir, 0o700)
    return entry


def processes_of(uid: int) -> list[psutil.Process]:
    """Every live process (zombies left out: they are only waiting for their parent) whose effective uid is ``uid``,
    as psutil reads them."""
    return [p for p in psutil.process_iter(["uids", "status"])
            if p.info["uids"] is not None and p.info["uids"].effective == uid
            and p.info["status"] != psutil.STATUS_ZOMBIE]


def memory_mib(uid: int) -> list[tuple[psutil.Process, float, float]]:
    """Each live process of ``uid`` (:func:`processes_of`) with its resident and proportional set sizes, in MiB
    (psutil's ``memory_full_info``: PSS counts a page shared by n processes as 1/n of it in each); processes that end
    meanwhile, or whose memory this process may not read, are left out."""
    found = []
    for proc in processes_of(uid):
        try:
            info = proc.memory_full_info()
        except psutil.Error:  # ended meanwhile, or not readable
            continue
        found.append((proc, info.rss / 2**20, info.pss / 2**20))
    return found


def end_processes(uid: int, grace_s: float = 10.0, kill_s: float = 10.0) -> list[str]:
    """End every process of ``uid`` (:func:`processes_of`): SIGTERM, then SIGKILL to those left after ``grace_s``
    seconds (a broker stops cleanly on SIGTERM, :func:`labkit.lab.serve_broker`), again for any started meanwhile,
    until none is left. Never signals another uid's process (psutil checks the pid is still that process before each
    signal). Returns ``"<name> <pid>"`` of each process ended.

    Raises:
        LabkitError: processes of ``uid`` were still alive ``grace_s + kill_s`` seconds after the first SIGTERM
            (their pids named).
    """
    ended: dict[int, str] = {}
    deadline = time.monotonic() + grace_s + kill_s
    sig = signal.SIGTERM
    while (procs := processes_of(uid)):
        for proc in procs:
            try:
                ended.setdefault(proc.pid, f"{proc.name()} {proc.pid}")
                proc.send_signal(sig)  # psutil refuses a pid reused since process_iter read it
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=grace_s if sig == signal.SIGTERM else 1.0)
        if alive and time.monotonic() > deadline:
            raise LabkitError(f"processes of uid {uid} survived SIGKILL: {sorted(p.pid for p in alive)}")
        sig = signal.SIGKILL if alive or time.monotonic() > deadline - kill_s else signal.SIGTERM
    return list(ended.values())


def remove(name: str, timeout_s: float = 10.0) -> bool:
    """Remove the Unix user of hub user ``name``, its home and its processes (:func:`end_processes`, SIGKILL after 1 s),
    if the lab made it (:func:`labkit.hub.names.is_lab_user`); anything else is left alone. Returns whether a user was
    removed.

    Raises:
        LabkitError: ``userdel`` failed (its message quoted) or processes were left after ``timeout_s`` seconds.
    """
    try:
        entry = pwd.getpwnam(unix_name(name))
    except KeyError:
        return False
    if not is_lab_user(entry):
        return False
    end_processes(entry.pw_uid, grace_s=1.0, kill_s=timeout_s)
    done = subprocess.run(["userdel", "--remove", entry.pw_name], capture_output=True, text=True, timeout=60)
    if done.returncode not in (0, 12):  # 12: the home could not be removed (gone already)
        raise LabkitError(f"userdel {entry.pw_name} failed: {done.stderr.strip()}")
    return True
