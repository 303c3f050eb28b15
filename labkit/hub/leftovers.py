"""What a hub that ended without stopping (SIGKILL, a crash, the machine's OOM killer) left running: found and stopped
by the next hub on the same state folder, before it starts (:func:`stop_left_by`, which :mod:`labkit.hub.run` calls
with the state folder's lock held, so no live hub owns what it finds), and said line by line.

Stopped rather than adopted: a restarted hub chooses new ports for its API and proxy (:func:`labkit.hub.run.prepare`),
and a lab left running would keep talking to the old hub's API address, where nothing answers, so its attendee could
not open it again. Stopping loses the attendee's running kernels, never their files (their home stays); their next
sign-in starts a fresh lab in a fresh sandbox. JupyterHub itself then finds each such server gone (its database still
names it) and marks it stopped.

Found, never assumed (psutil, as root):

* the old hub's own processes: root's, working in the state folder (JupyterHub runs its proxy and services there),
  whose command line is JupyterHub's, the proxy's or a service's (:data:`HUB_COMMANDS`);
* each attendee's lab: the processes in the attendee's own groups (:func:`labkit.hub.sandbox.cgroups`, each
  controller's ``cgroup.procs``, which only root can write: a lab's process cannot leave them) whose real uid is that
  attendee's (:data:`labkit.hub.sandbox.ATTENDEE_UIDS`), for each attendee this hub made a sandbox for (their private
  folder in its state folder, :func:`labkit.hub.sandbox.private_tmp`, root's); then the attendee's sandbox
  (namespace, cgroups) once no process is left in their groups. Nothing the attendee controls (an environment
  variable, a command line, a session) decides: ``env -u ... setsid sleep`` stays in its groups and is found (issue
  63). A process the lab did not make is never signalled: another uid's (a root process moved into the group, a
  process of a uid this hub made no sandbox for) or one outside the attendee's groups.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Callable

import psutil

from labkit.core import procs
from labkit.hub import firewall, sandbox

#: What the command line of a hub's own process contains: JupyterHub, its proxy, its two services.
HUB_COMMANDS = ("bin/jupyterhub", "configurable-http-proxy", "labkit.hub.liveview", "jupyterhub_idle_culler")
#: Seconds between SIGTERM and SIGKILL.
GRACE_S = 10.0


def hub_processes(state: Path | str) -> list[psutil.Process]:
    """The processes of a hub on ``state`` (root's, working in that folder, a command of :data:`HUB_COMMANDS`), this
    process excluded."""
    where = str(Path(state).resolve())
    found = []
    for proc in psutil.process_iter(["uids", "cwd", "cmdline"]):
        info = proc.info
        if (proc.pid != os.getpid() and info["uids"] and info["uids"].real == 0 and info["cwd"] == where
                and any(command in " ".join(info["cmdline"] or []) for command in HUB_COMMANDS)):
            found.append(proc)
    return found


def in_groups(uid: int) -> set[int]:
    """The pids in attendee ``uid``'s groups (every controller's ``cgroup.procs``, read now); empty without groups."""
    pids: set[int] = set()
    for group in sandbox.cgroups(uid):
        try:
            pids.update(int(line) for line in (group / "cgroup.procs").read_text().split())
        except FileNotFoundError:  # no group (never made, or released)
            continue
    return pids


def lab_processes(state: Path | str) -> dict[int, list[psutil.Process]]:
    """``{uid: processes}``: the processes of the labs a hub on ``state`` made (module docstring: the attendee's uid
    and groups, for the uids with a private folder under ``state``), as the OS says, never as a process says."""
    root = sandbox.private_root(Path(state).resolve())
    found: dict[int, list[psutil.Process]] = {}
    for uid in sandbox.ATTENDEE_UIDS:
        if not sandbox.private_tmp(root, uid).is_dir():
            continue
        for pid in sorted(in_groups(uid)):
            try:
                proc = psutil.Process(pid)
                if proc.uids().real == uid:
                    found.setdefault(uid, []).append(proc)
            except psutil.Error:  # ended meanwhile
                continue
    return found


def stop_left_by(state: Path | str, say: Callable[[str], None] = print) -> list[str]:
    """Stop what a hub on ``state`` left running (module docstring): the labs first (every process SIGTERM, SIGKILL
    after :data:`GRACE_S` s; then the sandbox, unless a process the lab did not make is left in its groups), then the
    hub's own processes, then its wall (:func:`labkit.hub.firewall.table_name`: a hub killed with SIGKILL never removed
    it) unless a lab's sandbox was kept. Says (``say``) and returns one line per lab or process stopped; nothing when
    nothing was left. Call it only with the state folder's lock held (:func:`labkit.hub.run.lock_state`).

    Raises:
        labkit.core.errors.LabkitError: an attendee's sandbox could not be removed (``ip``'s message).
    """
    labs, hub = lab_processes(state), hub_processes(state)
    if not labs and not hub:
        return []
    hub_lines = [f"  stopped the old hub's {command_of(p)} (pid {p.pid})" for p in hub]
    lines = [f"A hub on {state} ended without stopping what it ran (killed, or it crashed): stopping it now "
             "(attendees keep their files; their next sign-in starts a fresh lab)."]
    kept = False
    for uid, found in sorted(labs.items()):
        procs.terminate(found, GRACE_S, GRACE_S)
        left = in_groups(uid)
        if not left:
            sandbox.release(uid)
        kept = kept or bool(left)
        lines.append(f"  stopped {_user(uid)}'s lab: {len(found)} processes"
                     + ("" if not left else f"; its sandbox kept: {len(left)} processes of another uid in its groups"))
    procs.terminate(hub, GRACE_S, GRACE_S)
    lines += hub_lines
    table = firewall.table_name(state)
    if not kept and firewall.exists(table):  # no lab's namespace is left for it to wall in
        firewall.remove_table(table)
        lines.append(f"  removed the wall it left (nftables table inet {table}): the new hub makes it again at its "
                     "first sign-in")
    for line in lines:
        say(line)
    return lines


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def command_of(proc: psutil.Process) -> str:
    """Which of :data:`HUB_COMMANDS` a process :func:`hub_processes` found runs ("jupyterhub",
    "configurable-http-proxy"...), read from its command line now; "" if none (or it ended)."""
    try:
        line = " ".join(proc.cmdline())
    except psutil.Error:
        return ""
    return next((command for command in HUB_COMMANDS if command in line), "").removeprefix("bin/")
