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
* each attendee's lab: the processes of the attendee uids (:data:`labkit.hub.sandbox.ATTENDEE_UIDS`) whose
  environment names this state folder (:data:`STATE_ENV`, which the hub's spawner gives every lab:
  :mod:`labkit.hub.config`); then the attendee's sandbox (namespace, cgroups) once no process of theirs is left.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Callable

import psutil

from labkit import procs
from labkit.hub import sandbox

#: The environment variable naming the state folder of the hub that started a lab (every process of the lab has it).
STATE_ENV = "LABKIT_HUB_STATE"
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


def lab_processes(state: Path | str) -> dict[int, list[psutil.Process]]:
    """``{uid: processes}``: the attendees' processes started by a hub on ``state`` (their environment's
    :data:`STATE_ENV`)."""
    where = str(Path(state).resolve())
    found: dict[int, list[psutil.Process]] = {}
    for proc in psutil.process_iter(["uids"]):
        uid = proc.info["uids"].real if proc.info["uids"] else -1
        if uid not in sandbox.ATTENDEE_UIDS:
            continue
        try:
            if proc.environ().get(STATE_ENV) == where:
                found.setdefault(uid, []).append(proc)
        except psutil.Error:  # ended meanwhile
            continue
    return found


def stop_left_by(state: Path | str, say: Callable[[str], None] = print) -> list[str]:
    """Stop what a hub on ``state`` left running (module docstring): the labs first (every process SIGTERM, SIGKILL
    after :data:`GRACE_S` s; then the sandbox, unless a process of the uid started by something else is left), then
    the hub's own processes. Says (``say``) and returns one line per lab or process stopped; nothing when nothing was
    left. Call it only with the state folder's lock held (:func:`labkit.hub.run.lock_state`).

    Raises:
        labkit.errors.LabkitError: an attendee's sandbox could not be removed (``ip``'s message).
    """
    labs, hub = lab_processes(state), hub_processes(state)
    if not labs and not hub:
        return []
    hub_lines = [f"  stopped the old hub's {command_of(p)} (pid {p.pid})" for p in hub]
    lines = [f"A hub on {state} ended without stopping what it ran (killed, or it crashed): stopping it now "
             "(attendees keep their files; their next sign-in starts a fresh lab)."]
    for uid, found in sorted(labs.items()):
        procs.terminate(found, GRACE_S, GRACE_S)
        left = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
        if not left:
            sandbox.release(uid)
        lines.append(f"  stopped {_user(uid)}'s lab: {len(found)} processes"
                     + ("" if not left else f"; its sandbox kept: {len(left)} other processes of the uid run"))
    procs.terminate(hub, GRACE_S, GRACE_S)
    lines += hub_lines
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
