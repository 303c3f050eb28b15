"""The attendees' Unix users: made on first sign-in, each with a home of mode 0700, and removed only by whoever made
them (the hub's test).

Debian's ``useradd`` (package ``passwd``) makes the user, its own group (``USERGROUPS_ENAB yes``) and its home from
``/etc/skel``, mode 0755 with the default ``UMASK 022`` (issue 38): :func:`create` sets 0700 at once, before the
attendee's first process runs, so no attendee can list or read another's files. The user has no password (``useradd``
leaves it locked): attendees reach the machine through the hub only. Its uid is the lowest free one of
:data:`labkit.hub.sandbox.ATTENDEE_UIDS`, which gives it its network address (:func:`labkit.hub.sandbox.address`).

Every process of an attendee's Unix user is their lab's, by construction (the hub starts them as that user, and
nobody else runs as it), so :func:`end_processes` ends a lab by uid: JupyterLab, kernels, the broker, participants.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import psutil

from labkit.core import procs
from labkit.core.errors import LabkitError
from labkit.hub import rootlock, sandbox
from labkit.hub.names import COMMENT, is_lab_user, unix_name, why_refused
from labkit.hub.sandbox import ATTENDEE_UIDS

#: ``useradd`` and ``userdel`` lock ``/etc/passwd`` and fail rather than wait when another holds it, and two hubs on one
#: machine would each pick the same free uid: one at a time on the machine, by an exclusive ``flock`` of this file,
#: root's alone (:mod:`labkit.hub.rootlock`: no attendee can open it, so none can hold it, issue 63).
ACCOUNTS_LOCK = rootlock.LOCK_DIR / "accounts.lock"
#: Seconds a sign-in waits for :data:`ACCOUNTS_LOCK`: each holder keeps it for one ``useradd`` or ``userdel``, at most
#: their 60 s deadline.
ACCOUNTS_WAIT_S = 90.0
#: The shell an attendee's JupyterLab terminal opens (``useradd --shell``).
SHELL = "/bin/bash"
#: The word before a room's id in a user's comment (``labkit hub attendee ada room 3f9a1c2e``).
ROOM_WORD = "room"


def room_of(entry: pwd.struct_passwd) -> str:
    """The id of the room (:mod:`labkit.hub.rooms`) whose hub made the lab's user ``entry``: what follows ``room`` in
    its comment (:func:`create`); "" for a user made before rooms, or not by the lab."""
    words = entry.pw_gecos.split()
    return words[-1] if len(words) >= 2 and words[-2] == ROOM_WORD else ""


def create(name: str, room: str = "") -> pwd.struct_passwd:
    """Make the Unix user of hub user ``name`` (:func:`labkit.hub.names.unix_name`) with home mode 0700, its comment
    naming the ``room`` id (:func:`room_of`; none if ""), or return it if the lab made it before for this room or
    before rooms (its home's mode set to 0700 again). Blocking (``useradd``, a few ms): call it from a thread in the
    hub.

    Raises:
        LabkitError: the name is refused (:func:`labkit.hub.names.why_refused`), the user is another room's (a room
            not ended: the message says so), every uid of
            :data:`~labkit.hub.sandbox.ATTENDEE_UIDS` is taken, ``useradd`` failed (its message quoted), or
            :data:`ACCOUNTS_LOCK` was held :data:`ACCOUNTS_WAIT_S` seconds or is not root's alone.
    """
    if (why := why_refused(name)):
        raise LabkitError(why)
    user = unix_name(name)
    with _accounts_locked():
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            taken = {entry.pw_uid: entry for entry in pwd.getpwall()}
            uid = next((uid for uid in ATTENDEE_UIDS if uid not in taken), None)
            if uid is None:
                raise LabkitError(full_message([taken[uid] for uid in ATTENDEE_UIDS], room)) from None
            done = subprocess.run(["useradd", "--create-home", "--user-group", "--uid", str(uid), "--shell", SHELL,
                                   "--comment", f"{COMMENT} {name}" + (f" {ROOM_WORD} {room}" if room else ""),
                                   user], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise LabkitError(f"useradd {user} failed: {done.stderr.strip()}") from None
            entry = pwd.getpwnam(user)
    if not is_lab_user(entry):  # made by someone else between the check and here
        raise LabkitError(f"The Unix user {user} exists and was not made by the lab: choose another name.")
    if room and room_of(entry) not in ("", room):
        raise LabkitError(f"The Unix user {user} is another room's, not ended: end that room first (sudo make hub-end "
                          "ROOM=<its name>; make hub's first lines name it), or sign in under another name.")
    os.chmod(entry.pw_dir, 0o700)
    return entry


def full_message(holders: list[pwd.struct_passwd], room: str) -> str:
    """What a sign-in is told when every uid of :data:`~labkit.hub.sandbox.ATTENDEE_UIDS` is taken, by ``holders``
    (their users): how many are room ``room``'s, another room's (or made before rooms) and not the lab's, and how to
    free them as the run-sheet (docs/instructor.md) says: the end of a room that is over (``make hub-end``), or the
    lab's own removal of attendees one by one (:func:`main`), which also removes their files outside the home."""
    ours = sum(is_lab_user(e) and room != "" and room_of(e) == room for e in holders)
    others = sum(is_lab_user(e) for e in holders) - ours
    alien = len(holders) - ours - others
    return (f"All {len(ATTENDEE_UIDS)} attendee accounts of this machine are taken (uids {ATTENDEE_UIDS.start}-"
            f"{ATTENDEE_UIDS.stop - 1}): {ours} by this room's attendees, {others} by other rooms' (or from before "
            f"rooms), {alien} by users the lab did not make. Free some as the run-sheet says: end a room that is over "
            "with sudo make hub-end ROOM=<its name> (make hub's first lines name every room not ended), or remove "
            "attendees one by one with sudo .venv/bin/python -m labkit.hub.users remove <name>... --room <room>, "
            "which also removes their files outside the home.")


def _accounts_locked():
    """Hold :data:`ACCOUNTS_LOCK`, waiting at most :data:`ACCOUNTS_WAIT_S` (:func:`labkit.hub.rootlock.held`)."""
    return rootlock.held(ACCOUNTS_LOCK, ACCOUNTS_WAIT_S, "The lab's accounts lock")


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
    seconds (a broker stops cleanly on SIGTERM, :func:`labkit.lab.server.serve_broker`), again for any started
    meanwhile, until none is left. Never signals another uid's process (psutil checks the pid is still that process
    before each signal). Returns ``"<name> <pid>"`` of each process ended.

    Raises:
        LabkitError: processes of ``uid`` were still alive ``grace_s + kill_s`` seconds after the first SIGTERM
            (their pids named).
    """
    ended: dict[int, str] = {}
    deadline = time.monotonic() + grace_s + kill_s
    while (found := processes_of(uid)):
        if time.monotonic() > deadline:
            raise LabkitError(f"processes of uid {uid} survived SIGKILL: {sorted(p.pid for p in found)}")
        for proc in found:
            try:
                ended.setdefault(proc.pid, f"{proc.name()} {proc.pid}")
            except psutil.NoSuchProcess:
                pass
        procs.terminate(found, grace_s, kill_s=1.0)  # again for any started meanwhile (a kernel JupyterLab started)
    return list(ended.values())


def remove(name: str, tmp_root: Path | str, timeout_s: float = 10.0) -> list[str]:
    """Remove the Unix user of hub user ``name`` if the lab made it (:func:`labkit.hub.names.is_lab_user`; anything
    else is left alone): its processes (:func:`end_processes`, SIGKILL after 1 s), its sandbox
    (:func:`labkit.hub.sandbox.release`), every file of its uid in its private temporary folders under ``tmp_root``
    and the machine's shared writable folders (:func:`labkit.hub.sandbox.remove_files`: a later attendee given the
    same uid inherits nothing), then the user and its home. Returns the paths removed besides the home (empty if
    there was no such user).

    Raises:
        LabkitError: ``userdel`` failed (its message quoted), processes were left after ``timeout_s`` seconds, or
            :data:`ACCOUNTS_LOCK` was held :data:`ACCOUNTS_WAIT_S` seconds or is not root's alone.
    """
    try:
        entry = pwd.getpwnam(unix_name(name))
    except KeyError:
        return []
    if not is_lab_user(entry):
        return []
    end_processes(entry.pw_uid, grace_s=1.0, kill_s=timeout_s)
    sandbox.release(entry.pw_uid)
    removed = sandbox.remove_files(entry.pw_uid, tmp_root)
    with _accounts_locked():
        done = subprocess.run(["userdel", "--remove", entry.pw_name], capture_output=True, text=True, timeout=60)
    if done.returncode not in (0, 12):  # 12: the home could not be removed (gone already)
        raise LabkitError(f"userdel {entry.pw_name} failed: {done.stderr.strip()}")
    return removed


def main(argv: list[str]) -> int:
    """``sudo .venv/bin/python -m labkit.hub.users remove NAME... [--room ROOM | --state DIR]``: remove attendees
    (:func:`remove`) of the room named (default: the room whose hub runs, or the only one:
    :func:`labkit.hub.rooms.chosen_state`), printing what went. Returns the exit status: 1 if a name was not an
    attendee's.

    Raises:
        LabkitError: as :func:`remove`; no room was named and not exactly one runs or exists.
    """
    import argparse

    from labkit.hub import rooms

    parser = argparse.ArgumentParser(prog="python -m labkit.hub.users", description="Remove attendees of the hub: "
                                     "processes, sandbox, files of their uid anywhere they could write, user, home.")
    parser.add_argument("command", choices=["remove"])
    parser.add_argument("names", nargs="+", help="the attendees' hub names (lab-<name> are their Unix users)")
    parser.add_argument("--room", default=None, help="the room (default: the one whose hub runs)")
    parser.add_argument("--state", type=Path, default=None, help="a hub's state folder instead of a room's name")
    args = parser.parse_args(argv)
    state = rooms.chosen_state(args.room, args.state)
    status = 0
    for name in args.names:
        if not is_lab_user_name(name):
            print(f"{name}: no attendee of that name (lab-{name} is not a user the lab made)")
            status = 1
            continue
        removed = remove(name, sandbox.private_root(state))
        print(f"{name}: removed lab-{name}, its home" + "".join(f", {path}" for path in removed))
    return status


def is_lab_user_name(name: str) -> bool:
    """Whether hub user ``name``'s Unix user exists and was made by the lab."""
    try:
        return is_lab_user(pwd.getpwnam(unix_name(name)))
    except KeyError:
        return False


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
