"""Each attendee's lab alone (issue 49): a network namespace, cgroups and temporary folders of its own.

Everything an attendee's lab starts (JupyterLab, kernels, the broker, participants, Spark, a second broker) inherits
what :func:`enter_command` gives its first process, so nothing of one attendee's lab listens where another's can
connect **or bind**, and one attendee's runaway cell cannot take the machine:

* **A network namespace** ``labkit-<uid>`` (``ip netns``, iproute2): its own loopback, where the lab's broker and
  kernels listen, and one end of a veth pair (``lkn<uid>``, address :func:`address`); the other end (``lkh<uid>``)
  stays in the machine's namespace, with a route to that address alone. The namespace's only route leads to
  :data:`GATEWAY`, an address of the machine's loopback where the hub's API and the live view listen (reached with
  the hub's tokens, as before); the hub's proxy reaches the attendee's JupyterLab at :func:`address`. With IP
  forwarding off (``net.ipv4.ip_forward=0``, checked by :func:`check`) no packet crosses from one namespace to
  another; the hub's nftables table (:func:`labkit.hub.firewall.wall`) refuses at once anything else an attendee's
  namespace sends: a second wall.
* **cgroups** (cgroup v1's ``memory``, ``cpu`` and ``pids`` controllers, ``/sys/fs/cgroup/<controller>/labkit/<uid>``):
  ``memory.limit_in_bytes`` (an attendee past it loses a process of their own to the kernel's OOM killer, inside
  their group), ``cpu.shares`` (1024 each: equal shares of a busy machine) and ``pids.max`` (tasks: processes and
  threads; a fork bomb stops there). cgroup v2 (a unified hierarchy, what systemd machines mount) is not supported:
  :func:`check` says so; jupyterhub-systemdspawner's ``systemd-run --scope`` is the way there, untested here.
* **Private temporary folders**: ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are bind mounts, in the mount namespace
  ``ip netns exec`` makes for the lab, of the attendee's folders under the hub's state (:func:`private_tmp`), so the
  JVM's perf data, Spark's scratch and the broker's temporary folders are theirs, and :func:`remove_files` removes
  every one of them with the attendee. ``/run/labkit`` is their ``info`` folder, root's: what the hub observed of
  their memory group (:func:`write_info`), which their notebook reports (:mod:`labkit.hub.memory_notice`).

The processes then run as the attendee (``setpriv --reuid --regid --clear-groups --no-new-privs``, util-linux: a
set-uid program cannot give them root back). Every call here runs as root, in the hub.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import LabkitError
from labkit.jsonfile import write_json

#: The uids of the lab's attendees (:func:`labkit.hub.users.create` takes the lowest free one), one network address
#: each (:func:`address`): 100 accounts of the lab on one machine, all hubs together (a removed attendee frees its uid).
ATTENDEE_UIDS = range(50000, 50100)
#: The machine's address in every attendee's network (on its loopback): the hub's API and the live view.
GATEWAY = "10.127.0.1"
#: The cgroup v1 controllers each attendee has a group of.
CONTROLLERS = ("memory", "cpu", "pids")
#: Where the cgroup v1 hierarchies are mounted, one folder per controller.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The lab's folder in each controller's hierarchy: one group per attendee's uid under it.
CGROUP_PARENT = "labkit"
#: Where an attendee's lab finds what the hub observed of it (their ``info`` folder, bound there, read-only to them).
INFO_MOUNT = Path("/run/labkit")
#: Seconds any ``ip`` call may take.
IP_TIMEOUT_S = 30


@dataclass(frozen=True)
class Limits:
    """What one attendee's lab may use: ``memory_mib`` (MiB, ``memory.limit_in_bytes``), ``tasks`` (processes and
    threads, ``pids.max``) and ``cpu_shares`` (``cpu.shares``, 1024 for everyone: equal shares)."""

    memory_mib: int
    tasks: int
    cpu_shares: int = 1024


def address(uid: int) -> str:
    """The address of attendee ``uid``'s lab in their namespace (10.127.1.2 for the first uid, one each).

    Raises:
        LabkitError: ``uid`` is not an attendee's (:data:`ATTENDEE_UIDS`).
    """
    if uid not in ATTENDEE_UIDS:
        raise LabkitError(f"uid {uid} is not an attendee's uid ({ATTENDEE_UIDS.start}-{ATTENDEE_UIDS.stop - 1}): "
                          "remove that user (userdel -r) and sign in again.")
    n = uid - ATTENDEE_UIDS.start
    return f"10.127.{1 + n // 250}.{2 + n % 250}"


def netns(uid: int) -> str:
    """The name of attendee ``uid``'s network namespace."""
    return f"labkit-{uid}"


def exists(uid: int) -> bool:
    """Whether attendee ``uid``'s network namespace is there (``ip netns list``).

    Raises:
        LabkitError: as :func:`_ip`.
    """
    return netns(uid) in _ip("netns", "list").split()


def cgroups(uid: int) -> list[Path]:
    """Attendee ``uid``'s group in each of :data:`CONTROLLERS`."""
    return [CGROUP_ROOT / controller / CGROUP_PARENT / str(uid) for controller in CONTROLLERS]


def private_root(state: Path | str) -> Path:
    """The folder of the attendees' private temporary folders of the hub whose state folder is ``state``."""
    return Path(state) / "tmp"


def private_tmp(tmp_root: Path | str, uid: int) -> Path:
    """Attendee ``uid``'s temporary folders' parent under ``tmp_root`` (the hub's state): ``tmp`` and ``shm`` in it."""
    return Path(tmp_root) / str(uid)


def _ip(*args: str) -> str:
    """Run ``ip ARGS`` and return its stdout.

    Raises:
        LabkitError: ``ip`` failed (its message and the command quoted).
    """
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if done.returncode != 0:
        raise LabkitError(f"ip {' '.join(args)} failed: {done.stderr.strip()} (the hub needs root)")
    return done.stdout


def _sysctl(*args: str) -> str:
    """Run ``sysctl ARGS`` (procps) and return its stdout.

    Raises:
        LabkitError: it failed (its message quoted).
    """
    done = subprocess.run(["sysctl", "-q", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if done.returncode != 0:
        raise LabkitError(f"sysctl {' '.join(args)} failed: {done.stderr.strip()} (the hub needs root)")
    return done.stdout


def check() -> None:
    """Check that attendees can be kept apart here: ``ip`` (iproute2) and ``setpriv`` (util-linux) present, IP
    forwarding off, and cgroup v1's :data:`CONTROLLERS` mounted and writable.

    Raises:
        LabkitError: one is not (the message names the fix).
    """
    for tool, package in (("ip", "iproute2"), ("setpriv", "util-linux"), ("sysctl", "procps")):
        if not shutil.which(tool):
            raise LabkitError(f"The hub keeps each attendee's lab apart with `{tool}`, which is missing: "
                              f"apt-get install {package}.")
    if _sysctl("-n", "net.ipv4.ip_forward").strip() != "0":
        raise LabkitError("IP forwarding is on (net.ipv4.ip_forward=1), so one attendee's network could reach "
                          "another's: sysctl -w net.ipv4.ip_forward=0, or run the hub on a machine that does not "
                          "route.")
    for controller in CONTROLLERS:
        folder = CGROUP_ROOT / controller
        if not (folder / "cgroup.procs").exists() or not os.access(folder, os.W_OK):
            raise LabkitError(f"The hub limits each attendee with cgroup v1's {controller} controller, and "
                              f"{folder} is not a writable cgroup v1 hierarchy (cgroup v2 is not supported: boot "
                              "with systemd.unified_cgroup_hierarchy=0, or run the hub where cgroup v1 is mounted).")


def ensure_gateway() -> None:
    """Give the machine's loopback :data:`GATEWAY` (/32) if it has not got it: where the hub's API and live view
    listen for the attendees' namespaces. Left in place when the hub stops (another hub may use it).

    Raises:
        LabkitError: as :func:`_ip`.
    """
    shown = json.loads(_ip("-j", "-4", "addr", "show", "dev", "lo") or "[]")
    if not any(a.get("local") == GATEWAY for link in shown for a in link.get("addr_info", [])):
        _ip("addr", "add", f"{GATEWAY}/32", "dev", "lo")


def prepare(uid: int, gid: int, limits: Limits, tmp_root: Path | str) -> str:
    """Make attendee ``uid``'s namespace afresh (an old one, from a lab that ended, is replaced), their cgroups with
    ``limits``, and their temporary folders (owned by ``uid``:``gid``, mode 0700); return their lab's address.

    Raises:
        LabkitError: an ``ip`` call failed, or ``uid`` is not an attendee's.
        OSError: a cgroup or folder could not be written.
    """
    lab = address(uid)
    release(uid)
    name, host, inner = netns(uid), f"lkh{uid}", f"lkn{uid}"
    _ip("netns", "add", name)
    _ip("link", "add", host, "type", "veth", "peer", "name", inner, "netns", name)
    # no IPv6 on the machine's end: no link-local address comes and goes with each lab, which a browser on this machine
    # (a test's Chromium) takes for a network change and fails its loads with ERR_NETWORK_CHANGED
    _sysctl(f"net.ipv6.conf.{host}.disable_ipv6=1")
    _ip("-n", name, "link", "set", "lo", "up")
    _ip("-n", name, "addr", "add", f"{lab}/32", "dev", inner)
    _ip("-n", name, "link", "set", inner, "up")
    _ip("-n", name, "route", "add", f"{GATEWAY}/32", "dev", inner)
    _ip("link", "set", host, "up")
    _ip("route", "add", f"{lab}/32", "dev", host, "src", GATEWAY)
    memory, cpu, pids = cgroups(uid)
    for group in (memory, cpu, pids):
        group.mkdir(parents=True, exist_ok=True)
    (memory / "memory.limit_in_bytes").write_text(str(limits.memory_mib * 2**20))
    (cpu / "cpu.shares").write_text(str(limits.cpu_shares))
    (pids / "pids.max").write_text(str(limits.tasks))
    for sub in ("tmp", "shm"):
        folder = private_tmp(tmp_root, uid) / sub
        folder.mkdir(parents=True, exist_ok=True)
        os.chown(folder, uid, gid)
        folder.chmod(0o700)
    (private_tmp(tmp_root, uid) / "info").mkdir(mode=0o755, exist_ok=True)  # root's: what the hub observed
    INFO_MOUNT.mkdir(mode=0o755, exist_ok=True)  # where the lab sees it (labkit.hub.memory_notice.INFO)
    write_info(uid, tmp_root)
    return lab


def write_info(uid: int, tmp_root: Path | str) -> None:
    """Write what the hub observes of attendee ``uid``'s memory group (``{"limit_mib", "oom_kills"}``) where their lab
    reads it (:mod:`labkit.hub.memory_notice`), replacing the file whole (a temporary file of its own per call: the hub
    polls from several threads at once); nothing if they have no group.

    Raises:
        OSError: the folder could not be written.
    """
    limit = cgroups(uid)[0] / "memory.limit_in_bytes"
    folder = private_tmp(tmp_root, uid) / "info"
    if not limit.exists() or not folder.is_dir():
        return
    write_json(folder / "memory.json", {"limit_mib": int(limit.read_text()) // 2**20, "oom_kills": oom_kills(uid)})


def join_cgroups(uid: int) -> None:
    """Move the calling process into attendee ``uid``'s groups (what their lab's first process does before it
    execs, as root: its children inherit them).

    Raises:
        OSError: a group is missing (:func:`prepare` makes them).
    """
    for group in cgroups(uid):
        (group / "cgroup.procs").write_text("0")  # 0: the writing process


def enter_command(uid: int, gid: int, tmp_root: Path | str) -> list[str]:
    """The command prefix that runs the rest of a command line in attendee ``uid``'s namespace, with their private
    ``/tmp``, ``/var/tmp`` and ``/dev/shm``, in ``$HOME``, as ``uid``:``gid`` with no supplementary groups and no new
    privileges. Run it as root, after :func:`prepare` and :func:`join_cgroups`."""
    script = ('mount --bind "$1/tmp" /var/tmp && mount --bind "$1/shm" /dev/shm && mount --bind "$1/info" /run/labkit '
              '&& mount --bind "$1/tmp" /tmp && uid=$2 gid=$3 && shift 3 && cd "$HOME" '
              '&& exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs -- "$@"')
    return [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec", netns(uid), "sh", "-c", script, "sh", str(private_tmp(tmp_root, uid)), str(uid),
            str(gid)]


def oom_kills(uid: int) -> int:
    """How many of attendee ``uid``'s processes the OOM killer ended in their memory group (``memory.oom_control``'s
    ``oom_kill``), 0 without a group."""
    control = cgroups(uid)[0] / "memory.oom_control"
    if not control.exists():
        return 0
    fields = dict(line.split() for line in control.read_text().splitlines() if line.strip())
    return int(fields.get("oom_kill", 0))


def release(uid: int) -> None:
    """Remove attendee ``uid``'s namespace (its veth pair goes with it) and their empty cgroups, if there. Call it once
    their processes ended (:func:`labkit.hub.users.end_processes`).

    Raises:
        LabkitError: the namespace could not be removed.
        OSError: a group still holds a process (EBUSY).
    """
    if exists(uid):
        _ip("netns", "delete", netns(uid))
    for group in cgroups(uid):
        if group.exists():
            group.rmdir()


#: Where an attendee could write outside their home and their private folders: the machine's world-writable folders
#: a process of theirs sees (``/run/lock``; ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are private in their namespace, but
#: a process started outside it, e.g. by an older labkit, saw the machine's).
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def owned_by(uid: int) -> list[Path]:
    """The files and folders of ``uid`` at the top of :data:`SHARED_WRITABLE`, links not followed. An entry that goes
    while it is listed (another user's scratch folder, e.g. Spark's ``blockmgr-*`` in ``/tmp``) is skipped: what is
    not there belongs to nobody.

    Raises:
        PermissionError: a folder of :data:`SHARED_WRITABLE` cannot be listed (run as root, as the hub does).
    """
    found = []
    for top in map(Path, SHARED_WRITABLE):
        if not top.is_dir():
            continue
        for entry in top.iterdir():
            try:
                if entry.lstat().st_uid == uid:
                    found.append(entry)
            except FileNotFoundError:
                continue
    return found


def remove_files(uid: int, tmp_root: Path | str) -> list[str]:
    """Remove attendee ``uid``'s private temporary folders and every file or folder of ``uid`` in
    :data:`SHARED_WRITABLE` (:func:`owned_by`), so a later attendee given the same uid inherits nothing. Returns
    the paths removed.

    Raises:
        OSError: a path could not be removed.
    """
    removed = []
    private = private_tmp(tmp_root, uid)
    if private.exists():
        shutil.rmtree(private)
        removed.append(str(private))
    for entry in owned_by(uid):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(str(entry))
    return removed
