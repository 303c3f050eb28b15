"""Each attendee's lab alone (issues 49, 63): a network namespace, cgroups, an IPC namespace, temporary folders and a
``/proc`` of its own.

Everything an attendee's lab starts (JupyterLab, kernels, the broker, participants, Spark, a second broker) inherits
what :func:`enter_command` gives its first process, so nothing of one attendee's lab listens where another's can
connect **or bind**, and one attendee's runaway cell cannot take the machine.

**The sandbox's contract.** Each line is a property a backend keeps (today's: ``ip netns``, cgroup v1 and a mount and
IPC namespace per lab made by :func:`prepare` and :func:`enter_command`; on systemd with cgroup v2, each lab a
transient unit, :mod:`labkit.hub.unit`, which says how it keeps each; :func:`labkit.hub.unit.choose` picks by what the
machine has), and the test that tries to break it as an attendee would:

* *Network alone*: a network namespace whose only reachable address is :data:`GATEWAY`
  (``test_an_attendee_reaches_the_hubs_ports_on_the_gateway_and_nothing_of_another``).
* *Limits*: memory (:attr:`Limits.memory_mib`), equal CPU shares, tasks (:attr:`Limits.tasks`)
  (``test_an_attendee_runs_as_its_uid_in_its_cgroups_with_a_private_tmp``).
* *IPC alone*: SysV shared memory, semaphores and message queues of a lab are seen by no other and die with the lab's
  last process (``test_sysv_shared_memory_and_queues_of_a_lab_die_with_it_and_never_reach_the_next``).
* *Temporary folders in the lab's memory*: ``/tmp`` (``/var/tmp`` the same folder), ``/dev/shm`` and ``/run/lock`` are
  the lab's own, size-limited (:attr:`Limits.tmp_mib`, :data:`RUN_LOCK_MIB`: past it ENOSPC), charged to its memory
  group, never to a disk, and gone with the lab
  (``test_a_lab_s_temporary_folders_are_size_limited_tmpfs_charged_to_its_memory_group``).
* *Nothing handed over*: a new lab of a uid gets no folder, file or segment of an earlier lab of that uid, however
  that one ended or its user was removed (``test_a_new_lab_of_a_uid_gets_nothing_of_the_last_one_even_after_userdel``).
* *Its limit visible*: the lab's own memory group is where the JVM reads it, so a JVM's default heap is a quarter of
  the lab's limit, not of the machine's memory (``test_a_jvm_in_a_lab_sizes_its_heap_from_the_lab_s_memory_limit``).
* *Processes unseen*: another user's processes (other attendees', the hub's) are not in the lab's ``/proc``; its own
  are, whole (``test_an_attendee_cannot_see_another_s_processes_in_proc_and_sees_its_own``).
* *The machine's pids*: the room's labs at their task limit fit ``kernel.pid_max`` (:func:`pid_room`, said by
  ``make hub``: ``test_pid_room_says_how_many_labs_fit_pid_max_and_the_fix``).

Today's backend:

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
  threads; a fork bomb stops there). On cgroup v2 under systemd (a unified hierarchy) the lab is a unit instead
  (:mod:`labkit.hub.unit`): :func:`prepare` then makes the namespace and the info folder only, :func:`cgroups` is the
  unit's one group, and :func:`memory_of` and :func:`oom_kills` read its cgroup v2 files.
* **A mount and an IPC namespace** (``ip netns exec`` makes the mount namespace, ``unshare --ipc``, util-linux, the
  IPC one; both end with the lab's last process, and everything in them with it). In the mount namespace: ``/tmp``
  (and ``/var/tmp``, the same folder) and ``/dev/shm``, each a tmpfs of :attr:`Limits.tmp_mib`, and ``/run/lock`` one
  of :data:`RUN_LOCK_MIB`: a tmpfs page is charged to the memory group of the process that writes it (cgroup v1
  as v2: the kernel's ``shmem`` charge, ``memory.stat``'s ``shmem``), so a full ``/tmp`` costs the lab its own memory,
  never the machine's disk. ``/proc`` mounted again with ``hidepid=invisible`` (Linux 5.8 or later; per mount). The
  hierarchies the JVM reads (cpuset, cpu, cpuacct, memory, pids: OpenJDK's ``CgroupSubsystemFactory`` wants all of
  them) at ``/sys/fs/cgroup/<name>``, read-only, each bound at the lab's own group (its root is the process's path,
  which OpenJDK's ``CgroupV1Controller`` reads as a container's): ``ip netns exec`` mounts a fresh sysfs with an empty
  ``/sys/fs/cgroup``, where a JVM saw no limit and sized its heap from the machine's memory. ``/run/labkit`` is their
  ``info`` folder, root's: what the hub observed of their memory group (:func:`write_info`), which their notebook
  reports (:mod:`labkit.hub.memory_notice`); :func:`prepare` makes it afresh, the only folder of the lab's under the
  hub's state.

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

import psutil

from labkit.core.errors import LabkitError
from labkit.core.jsonfile import write_json
from labkit.hub import unit

#: The uids of the lab's attendees (:func:`labkit.hub.users.create` takes the lowest free one), one network address
#: each (:func:`address`): 100 accounts of the lab on one machine, all hubs together (a removed attendee frees its uid).
ATTENDEE_UIDS = range(50000, 50100)
#: The machine's address in every attendee's network (on its loopback): the hub's API and the live view.
GATEWAY = "10.127.0.1"
#: The cgroup v1 controllers each attendee has a group of.
CONTROLLERS = unit.V1_CONTROLLERS
#: Where the cgroup v1 hierarchies are mounted, one folder per controller.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The lab's folder in each controller's hierarchy: one group per attendee's uid under it.
CGROUP_PARENT = "labkit"
#: Where an attendee's lab finds what the hub observed of it (their ``info`` folder, bound there, read-only to them).
INFO_MOUNT = Path("/run/labkit")
#: Seconds any ``ip`` call may take.
IP_TIMEOUT_S = 30
#: The size of each of a lab's ``/tmp`` and ``/dev/shm`` (tmpfs, MiB), unless the instructor sets one (``--tmp``): the
#: JVMs' perf data, Spark's scratch and JupyterLab's files take a few MiB; the pages written count toward the lab's
#: memory limit (the module docstring), so this bounds what a full ``/tmp`` takes of it.
TMP_MIB = 512
#: The size of a lab's ``/run/lock`` (tmpfs, MiB): lock files are empty.
RUN_LOCK_MIB = unit.RUN_LOCK_MIB
#: The cgroup v1 hierarchies a JVM reads (OpenJDK's ``CgroupSubsystemFactory`` takes a v1 machine's limits only when it
#: finds all of cpuset, cpu, cpuacct and memory in ``/proc/self/mountinfo``; pids it reads when there).
JVM_CONTROLLERS = ("cpuset", "cpu", "cpuacct", "memory", "pids")
#: Tasks (processes and threads) ``kernel.pid_max`` keeps for the machine beyond the room's labs: the hub, its proxy,
#: the system's services.
PID_HEADROOM = 4096


@dataclass(frozen=True)
class Limits:
    """What one attendee's lab may use: ``memory_mib`` (MiB, ``memory.limit_in_bytes``), ``tasks`` (processes and
    threads, ``pids.max``), ``cpu_shares`` (``cpu.shares``, 1024 for everyone: equal shares) and ``tmp_mib`` (MiB,
    the size of each of its ``/tmp`` and ``/dev/shm``; written pages count toward ``memory_mib``)."""

    memory_mib: int
    tasks: int
    cpu_shares: int = 1024
    tmp_mib: int = TMP_MIB


def address(uid: int) -> str:
    """The address of attendee ``uid``'s lab in their namespace (10.127.1.2 for the first uid, one each).

    Raises:
        LabkitError: ``uid`` is not an attendee's (:data:`ATTENDEE_UIDS`).
    """
    if uid not in ATTENDEE_UIDS:
        raise LabkitError(f"uid {uid} is not an attendee's uid ({ATTENDEE_UIDS.start}-{ATTENDEE_UIDS.stop - 1}): "
                          "remove that user (python -m labkit.hub.users remove NAME) and sign in again.")
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
    """Attendee ``uid``'s group in each of :data:`CONTROLLERS` (cgroup v1), or, on systemd with cgroup v2, their lab
    unit's one group (:func:`labkit.hub.unit.cgroup`), the memory group first either way.

    Raises:
        LabkitError: the machine has neither backend (:func:`labkit.hub.unit.chosen`).
    """
    if unit.chosen() == unit.SYSTEMD:
        return [unit.cgroup(uid)]
    return [CGROUP_ROOT / controller / CGROUP_PARENT / str(uid) for controller in CONTROLLERS]


def private_root(state: Path | str) -> Path:
    """The folder of the attendees' private temporary folders of the hub whose state folder is ``state``."""
    return Path(state) / "tmp"


def private_tmp(tmp_root: Path | str, uid: int) -> Path:
    """Attendee ``uid``'s folder under ``tmp_root`` (the hub's state): its ``info`` folder (the lab's temporary folders
    are tmpfs of the lab's own, :func:`enter_command`; an older labkit kept ``tmp`` and ``shm`` here)."""
    return Path(tmp_root) / str(uid)


def info_folder(tmp_root: Path | str, uid: int) -> Path:
    """Attendee ``uid``'s ``info`` folder under ``tmp_root`` (root's): what the hub observed of their lab, which the
    lab sees read-only at :data:`INFO_MOUNT` (:func:`write_info`)."""
    return private_tmp(tmp_root, uid) / "info"


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
    """Check that attendees can be kept apart here: a backend (:func:`labkit.hub.unit.chosen`) and nothing it needs
    missing (:func:`labkit.hub.unit.missing`: on systemd with cgroup v2, systemd 248 or later, the memory, cpu and pids
    controllers, ``systemd-run``; else ``setpriv`` and ``unshare``; ``ip`` and ``sysctl`` on both), IP forwarding
    off, and on cgroup v1 its :data:`CONTROLLERS` writable.

    Raises:
        LabkitError: one is not (the message names the fix).
    """
    backend = unit.chosen()
    if (lacking := unit.missing(backend)):
        raise LabkitError(f"The hub keeps each attendee's lab apart here with {backend}, and this machine lacks: "
                          f"{'; '.join(lacking)}.")
    if _sysctl("-n", "net.ipv4.ip_forward").strip() != "0":
        raise LabkitError("IP forwarding is on (net.ipv4.ip_forward=1), so one attendee's network could reach "
                          "another's: sysctl -w net.ipv4.ip_forward=0, or run the hub on a machine that does not "
                          "route.")
    for controller in () if backend == unit.SYSTEMD else CONTROLLERS:
        folder = CGROUP_ROOT / controller
        if not (folder / "cgroup.procs").exists() or not os.access(folder, os.W_OK):
            raise LabkitError(f"The hub limits each attendee with cgroup v1's {controller} controller, and "
                              f"{folder} is not a writable cgroup v1 hierarchy (run the hub as root, or on a machine "
                              "with systemd on cgroup v2).")


def ensure_gateway() -> None:
    """Give the machine's loopback :data:`GATEWAY` (/32) if it has not got it: where the hub's API and live view
    listen for the attendees' namespaces. Left in place when the hub stops (another hub may use it).

    Raises:
        LabkitError: as :func:`_ip`.
    """
    shown = json.loads(_ip("-j", "-4", "addr", "show", "dev", "lo") or "[]")
    if not any(a.get("local") == GATEWAY for link in shown for a in link.get("addr_info", [])):
        _ip("addr", "add", f"{GATEWAY}/32", "dev", "lo")


def prepare(uid: int, limits: Limits, tmp_root: Path | str) -> str:
    """Make attendee ``uid``'s namespace afresh (an old one, from a lab that ended, is replaced), their cgroups with
    ``limits`` (cgroup v1; on systemd the lab's unit has them, :func:`labkit.hub.unit.lab_properties`), and their
    folder under ``tmp_root`` afresh (whatever an earlier lab of ``uid`` left there, e.g. after ``userdel``, removed:
    nothing is handed over; the lab's temporary folders are made at its start, :func:`enter_command` or the unit);
    return their lab's address.

    Raises:
        LabkitError: an ``ip`` call failed, or ``uid`` is not an attendee's.
        OSError: a cgroup or folder could not be written.
    """
    lab = address(uid)
    release(uid)
    name, host, inner = netns(uid), host_end(uid), f"lkn{uid}"
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
    if unit.chosen() == unit.CGROUP_V1:
        memory, cpu, pids = cgroups(uid)
        for group in (memory, cpu, pids):
            group.mkdir(parents=True, exist_ok=True)
        (memory / "memory.limit_in_bytes").write_text(str(limits.memory_mib * 2**20))
        (cpu / "cpu.shares").write_text(str(limits.cpu_shares))
        (pids / "pids.max").write_text(str(limits.tasks))
    folder = private_tmp(tmp_root, uid)
    if folder.exists():  # an earlier lab's (its user removed without the lab's removal): never handed over
        shutil.rmtree(folder)
    info_folder(tmp_root, uid).mkdir(mode=0o755, parents=True)  # root's: what the hub observed
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
    memory = memory_of(cgroups(uid)[0])
    folder = info_folder(tmp_root, uid)
    if memory is None or not folder.is_dir():
        return
    write_json(folder / "memory.json", {"limit_mib": memory[1] // 2**20, "oom_kills": oom_kills(uid)})


def join_cgroups(uid: int) -> None:
    """Move the calling process into attendee ``uid``'s groups (what their lab's first process does before it
    execs, as root: its children inherit them).

    Raises:
        OSError: a group is missing (:func:`prepare` makes them).
    """
    for group in cgroups(uid):
        (group / "cgroup.procs").write_text("0")  # 0: the writing process


def _hierarchies(uid: int) -> list[str]:
    """For each cgroup v1 hierarchy of :data:`JVM_CONTROLLERS` mounted here: its folder's name, its mount options
    (``/proc/self/mounts``) and the group a process of attendee ``uid``'s lab is in (``/labkit/<uid>`` where
    :func:`join_cgroups` moves it, else the calling process's own, which the lab inherits), three words each."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        own[frozenset(names.split(","))] = path
    words = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, where, kind, options, *_ = line.split()
        names = frozenset(options.split(",")) & set(JVM_CONTROLLERS)
        if kind == "cgroup" and names and Path(where).parent == CGROUP_ROOT:
            path = f"/{CGROUP_PARENT}/{uid}" if names & set(CONTROLLERS) else own.get(names, "/")
            words += [Path(where).name, options, path]
    return words


#: :func:`enter_command`'s script, run as root in the lab's new mount and IPC namespaces; its arguments: the lab's
#: folder, uid, gid, the sizes of /tmp and /run/lock (MiB), then three words per cgroup hierarchy (:func:`_hierarchies`)
#: up to ``--``, then the command. The info folder is bound first: the lab's folder may be under /tmp (a test's).
ENTER_SCRIPT = r'''set -e
folder=$1 uid=$2 gid=$3 tmp=$4 lock=$5
shift 5
mount -t proc -o nosuid,nodev,noexec,hidepid=invisible proc /proc
mount --bind "$folder/info" /run/labkit
mount -t tmpfs -o "nosuid,nodev,size=${tmp}m,mode=1777" tmpfs /tmp
mount --bind /tmp /var/tmp
mount -t tmpfs -o "nosuid,nodev,size=${tmp}m,mode=1777" tmpfs /dev/shm
mkdir -p /run/lock
mount -t tmpfs -o "nosuid,nodev,noexec,size=${lock}m,mode=1777" tmpfs /run/lock
mount -t tmpfs -o size=64k,mode=755 cgroup /sys/fs/cgroup
while [ "$1" != -- ]; do
  mkdir /sys/fs/cgroup/$1 /sys/fs/cgroup/.all
  mount -t cgroup -o "$2" cgroup /sys/fs/cgroup/.all
  mount --bind "/sys/fs/cgroup/.all$3" /sys/fs/cgroup/$1
  mount -o remount,bind,ro /sys/fs/cgroup/$1
  umount /sys/fs/cgroup/.all
  rmdir /sys/fs/cgroup/.all
  shift 3
done
shift
mount -o remount,ro /sys/fs/cgroup
cd "$HOME"
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs -- "$@"
'''


def enter_command(uid: int, gid: int, tmp_root: Path | str, tmp_mib: int = TMP_MIB) -> list[str]:
    """The command prefix that runs the rest of a command line in attendee ``uid``'s lab (the module docstring's
    contract): their network namespace (``ip netns exec``, whose new mount namespace holds the rest), a new IPC
    namespace (``unshare --ipc``), tmpfs ``/tmp`` (``/var/tmp``) and ``/dev/shm`` of ``tmp_mib`` MiB each and
    ``/run/lock`` of :data:`RUN_LOCK_MIB`, ``/proc`` with ``hidepid=invisible``, their cgroups where a JVM reads them,
    in ``$HOME``, as ``uid``:``gid`` with no supplementary groups and no new privileges. Run it as root, after
    :func:`prepare` and :func:`join_cgroups`; a mount that fails stops the command before it runs (``set -e``). Each
    run is a lab of its own in the namespace: its own ``/tmp``, ``/dev/shm`` and IPC, not those of a lab already there.

    Raises:
        OSError: ``/proc/self/cgroup`` or ``/proc/self/mounts`` could not be read.
    """
    return [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec", netns(uid),
            shutil.which("unshare") or "/usr/bin/unshare", "--ipc", "--", "sh", "-c", ENTER_SCRIPT, "sh",
            str(private_tmp(tmp_root, uid)), str(uid), str(gid), str(tmp_mib), str(RUN_LOCK_MIB),
            *_hierarchies(uid), "--"]


def pid_room(tasks: int, labs: int = len(ATTENDEE_UIDS)) -> str:
    """What ``kernel.pid_max`` holds of ``labs`` labs at ``tasks`` tasks each, beyond :data:`PID_HEADROOM` for the
    machine: "" when all fit, else a warning naming how many fit and the fix (raise ``kernel.pid_max``, or lower
    ``--tasks``). A lab at its task limit takes that many pids (``pids.max`` counts tasks, each with a pid of the
    machine's one pid namespace); past ``pid_max`` no process of anyone, the hub's included, can fork.

    Raises:
        OSError: ``/proc/sys/kernel/pid_max`` could not be read.
    """
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    needed = labs * tasks + PID_HEADROOM
    if needed <= pid_max:
        return ""
    fit = max(0, (pid_max - PID_HEADROOM) // tasks)
    return (f"kernel.pid_max is {pid_max}: {fit} labs at {tasks} tasks each fit beside {PID_HEADROOM} for the machine; "
            f"more, each at its limit, leave no pid for anyone, the hub included. For {labs} labs, raise it "
            f"(sysctl -w kernel.pid_max={needed}) or lower --tasks to {max(1, (pid_max - PID_HEADROOM) // labs)}.")


def memory_of(group: Path | str) -> tuple[int, int] | None:
    """``(usage, limit)`` in bytes of the memory group ``group``: a cgroup v1 one (a folder under
    ``/sys/fs/cgroup/memory``: its ``memory.usage_in_bytes`` and ``memory.limit_in_bytes``) or a cgroup v2 one (a
    lab unit's, :func:`labkit.hub.unit.cgroup`: its ``memory.current`` and ``memory.max``), the kernel's own
    accounting of the group's pages (page cache and tmpfs included, as the OOM killer counts them); ``None`` without
    the group (the attendee's lab is not running) or without a limit (v2's ``max``)."""
    for usage, limit in (("memory.usage_in_bytes", "memory.limit_in_bytes"), ("memory.current", "memory.max")):
        try:
            return int((Path(group) / usage).read_text()), int((Path(group) / limit).read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
    return None


def oom_kills(uid: int) -> int:
    """How many of attendee ``uid``'s processes the OOM killer ended in their memory group (``oom_kill`` of cgroup
    v1's ``memory.oom_control`` or of the lab unit's cgroup v2 ``memory.events``), 0 without a group."""
    for name in ("memory.oom_control", "memory.events"):
        control = cgroups(uid)[0] / name
        if control.exists():
            fields = dict(line.split() for line in control.read_text().splitlines() if line.strip())
            return int(fields.get("oom_kill", 0))
    return 0


def host_end(uid: int) -> str:
    """The name of the machine's end of attendee ``uid``'s veth pair (``lkh<uid>``)."""
    return f"lkh{uid}"


def release(uid: int) -> None:
    """Remove attendee ``uid``'s veth pair, namespace and empty cgroups, if there (on systemd: their lab's unit stopped,
    :func:`labkit.hub.unit.stop`, which removes its group). Call it once their processes ended
    (:func:`labkit.hub.users.end_processes`). The pair is deleted first, by its machine's end: deleting one end removes
    both at once, while ``ip netns delete`` only drops a reference and the kernel dismantles the namespace, and the
    veth with it, later (``cleanup_net``, a work queue): measured on one CPU, a lab made again right after met
    "RTNETLINK answers: File exists" for ``lkh<uid>``.

    Raises:
        LabkitError: the namespace could not be removed, or the unit not stopped.
        OSError: a group still holds a process (EBUSY).
    """
    systemd = unit.chosen() == unit.SYSTEMD
    if systemd:
        unit.stop(uid)
    if host_end(uid) in psutil.net_if_stats():
        _ip("link", "delete", host_end(uid))
    if exists(uid):
        _ip("netns", "delete", netns(uid))
    for group in () if systemd else cgroups(uid):
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
    """Remove attendee ``uid``'s folder under ``tmp_root`` and every file or folder of ``uid`` in
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
