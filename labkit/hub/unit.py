"""The sandbox's second backend (issue 64): on a machine run by systemd on cgroup v2 (every stock server rented today:
Debian 12 and 13, Ubuntu 24.04), each attendee's lab is a transient systemd unit, its limits and sandboxing unit
properties (:func:`lab_properties`), started with ``systemd-run`` (:func:`run_command`) and stopped with ``systemctl
stop`` (:func:`stop`). It keeps every line of the contract in :mod:`labkit.hub.sandbox`'s docstring, as today's
backend (``ip netns``, cgroup v1) does where there is no systemd; :func:`choose` picks one by what the machine has.

The properties and where systemd documents them: systemd.resource-control(5) (``MemoryMax``, ``MemorySwapMax``,
``CPUWeight``, ``TasksMax``), systemd.exec(5) (``TemporaryFileSystem``, ``PrivateIPC`` (systemd 248),
``PrivateDevices``, ``ProtectSystem``, ``ProtectHome``, ``BindPaths``, ``BindReadOnlyPaths``, ``ProtectProc``
(systemd 247), ``ProtectControlGroups``, ``NoNewPrivileges``, ``NetworkNamespacePath`` (systemd 242)),
systemd.kill(5) (``TimeoutStopSec``: SIGTERM to every process of the unit, SIGKILL after it), systemd-run(1)
(``--wait``, ``--pipe``, ``--collect``, ``--setenv=NAME``: the value from systemd-run's own environment). The contract,
line by line:

* *Network alone*: ``NetworkNamespacePath=/run/netns/labkit-<uid>``, the namespace and veth pair
  :func:`labkit.hub.sandbox.prepare` makes (the design of the first backend, unchanged).
* *Limits*: ``MemoryMax`` and ``MemorySwapMax=0`` (past it the kernel's OOM killer ends a process of the unit, and
  with ``OOMPolicy=continue``, systemd.service(5), the lab goes on: systemd's default, ``stop``, would end the whole
  lab for one cell's excess, where the first backend loses only that process),
  ``CPUWeight=100`` for every lab (equal shares of a busy machine), ``TasksMax`` (a fork bomb stops there).
* *IPC alone*: ``PrivateIPC=yes``: the unit's own IPC namespace, gone with its last process.
* *Temporary folders in the lab's memory*: ``TemporaryFileSystem=`` for ``/tmp``, ``/var/tmp``, ``/dev/shm`` and
  ``/run/lock``, each a size-limited tmpfs of the unit's mount namespace (mode 1777), whose pages are charged to the
  unit's memory (``memory.stat``'s ``shmem``). Not ``PrivateTmp=yes``: on systemd 252 it is a folder of the root disk
  (``/tmp/systemd-private-*``), with no size limit, and it wins over a ``TemporaryFileSystem=`` of ``/tmp`` (measured
  in the Debian 12 guest, ``bench/guest_contract.py``). ``/var/tmp`` is a tmpfs of its own here (the first backend
  binds it to ``/tmp``).
* *Nothing handed over*: the unit's mount and IPC namespaces end with it; ``--collect`` unloads a failed unit, so
  the next lab of the uid starts a fresh one of the same name.
* *Its limit visible*: no cgroup namespace: the unit's limit is in its own group's folder
  (:func:`cgroup`), named by ``/proc/self/cgroup``, where the JVM reads it (measured in the guest: in a
  ``MemoryMax=512M`` unit, ``MaxHeapSize`` 128 MiB); ``ProtectControlGroups=yes`` leaves it readable, never writable.
* *Processes unseen*: ``ProtectProc=invisible`` (``/proc`` with ``hidepid=invisible``, Linux 5.8 or later).
* Besides: ``ProtectSystem=strict`` (the machine's files read-only), ``ProtectHome=tmpfs`` with the attendee's home
  bound back (no other home is seen), ``PrivateDevices=yes`` (no disk, no device but the pseudo ones),
  ``NoNewPrivileges=yes``, the hub's info folder bound read-only at ``/run/labkit``
  (:mod:`labkit.hub.memory_notice`).

Why ``systemd-run --wait --pipe`` and not jupyterhub-systemdspawner 1.0.2 (PyPI, what The Littlest JupyterHub runs):
that package is a ``Spawner`` of its own, not a ``LocalProcessSpawner``, so the lab's spawner
(:class:`labkit.hub.spawner.LabSpawner`: the ``lab-<name>`` users made at first sign-in, the wall, the namespace, the
info file, the stop that ends every process) would be written twice; it has no network namespace (its server listens
on the machine's network, which the room's design refuses) and no size-limited temporary folders but through extra
properties; and it writes each user's environment to a file and polls ``systemctl is-active``, where
``systemd-run --wait`` is a child of the hub whose life is the unit's (``LocalProcessSpawner.poll`` works unchanged),
the lab's output going to the hub's log as before (``--pipe``). With ``--setenv=NAME`` the values (the hub's API
token among them) travel in the environment, never on a command line another user could read.

Standard library and :mod:`labkit.core.errors` only: ``bench/guest_contract.py`` imports this module in a stock Debian
guest with nothing but Debian's python3, so the guest checks the properties the hub runs.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

from labkit.core.errors import LabkitError

#: The backends :func:`choose` names.
SYSTEMD, CGROUP_V1 = "systemd on cgroup v2", "cgroup v1"
#: The slice every lab's unit runs in: ``systemctl status labkit.slice`` shows the room's labs.
SLICE = "labkit.slice"
#: systemd's ``CPUWeight`` of every lab (its default): equal shares, as the first backend's ``cpu.shares`` of 1024.
CPU_WEIGHT = 100
#: The oldest systemd with every property of :func:`lab_properties` (``PrivateIPC=``: 248; Debian 12 has 252, Ubuntu
#: 22.04 249, Debian 11 247).
MIN_SYSTEMD = 248
#: The cgroup v2 controllers a lab's unit needs (memory, CPU weight, tasks), listed in the root's
#: ``cgroup.controllers``.
CONTROLLERS = ("memory", "cpu", "pids")
#: The cgroup v1 controllers the first backend needs (:data:`labkit.hub.sandbox.CONTROLLERS`).
V1_CONTROLLERS = ("memory", "cpu", "pids")
#: Seconds a ``systemctl`` call may take beyond the unit's own stop timeout.
SYSTEMCTL_S = 30
#: The size of a lab's ``/run/lock`` (tmpfs, MiB): lock files are empty.
RUN_LOCK_MIB = 1


def choose(root: Path | str = "/") -> str:
    """The backend the hub runs on the machine whose root is ``root``: :data:`SYSTEMD` when systemd is the init
    (``/run/systemd/system`` is a folder, sd_booted(3)) and ``/sys/fs/cgroup`` is the unified hierarchy (cgroup2fs,
    whose root alone has a ``cgroup.controllers`` file), else :data:`CGROUP_V1` when cgroup v1's memory, cpu and pids
    hierarchies are mounted (``/sys/fs/cgroup/<controller>/cgroup.procs``; a systemd of the hybrid layout included).

    Raises:
        LabkitError: neither (the message says what is missing and names the machines that have one).
    """
    root = Path(root)
    cgroup = root / "sys/fs/cgroup"
    systemd = (root / "run/systemd/system").is_dir()
    if systemd and (cgroup / "cgroup.controllers").is_file():
        return SYSTEMD
    if all((cgroup / name / "cgroup.procs").is_file() for name in V1_CONTROLLERS):
        return CGROUP_V1
    raise LabkitError("The hub cannot keep attendees apart here: " + (
        "systemd runs, but /sys/fs/cgroup is neither cgroup v2 nor cgroup v1's memory, cpu and pids" if systemd else
        "no systemd (no /run/systemd/system) and no cgroup v1 memory, cpu and pids hierarchies under /sys/fs/cgroup")
        + ". Run it on a stock Debian 12/13 or Ubuntu 24.04 server (systemd on cgroup v2).")


@functools.cache
def chosen() -> str:
    """:func:`choose` for this machine, looked at once per process (the hub's machine does not change under it).

    Raises:
        LabkitError: as :func:`choose`.
    """
    return choose("/")


def unit_name(uid: int) -> str:
    """The name of attendee ``uid``'s lab unit: ``labkit-lab-<uid>.service``."""
    return f"labkit-lab-{uid}.service"


def cgroup(uid: int, root: Path | str = "/") -> Path:
    """Attendee ``uid``'s unit's group in the cgroup v2 hierarchy (in :data:`SLICE`): its ``memory.current``,
    ``memory.max``, ``memory.events``, ``pids.max`` and ``cgroup.procs``. There while the unit runs."""
    return Path(root) / "sys/fs/cgroup" / SLICE / unit_name(uid)


def lab_properties(uid: int, home: str, netns: str, info: str, memory_mib: int, tasks: int, tmp_mib: int,
                   stop_s: float = 10.0) -> list[str]:
    """The unit properties of attendee ``uid``'s lab (the module docstring's contract), each a ``Key=value`` for
    ``systemd-run --property``: ``memory_mib`` MiB of memory and no swap, ``tasks`` tasks, equal CPU weight,
    ``/tmp``, ``/var/tmp`` and ``/dev/shm`` tmpfs of ``tmp_mib`` MiB each and ``/run/lock`` of :data:`RUN_LOCK_MIB`,
    the network namespace ``netns`` (under ``/run/netns``, as ``ip netns`` names it), ``home`` bound back under a
    tmpfs ``/home``, the folder ``info`` read-only at ``/run/labkit``, ``stop_s`` seconds from SIGTERM to SIGKILL on
    stop. A pure function: nothing is read or run."""
    folders = " ".join(f"{where}:size={size}M,mode=1777,nosuid,nodev{more}" for where, size, more in
                       (("/tmp", tmp_mib, ""), ("/var/tmp", tmp_mib, ""), ("/dev/shm", tmp_mib, ""),
                        ("/run/lock", RUN_LOCK_MIB, ",noexec")))
    return [f"MemoryMax={memory_mib}M", "MemorySwapMax=0", "OOMPolicy=continue", f"CPUWeight={CPU_WEIGHT}",
            f"TasksMax={tasks}",
            f"TemporaryFileSystem={folders}", "PrivateIPC=yes", "PrivateDevices=yes", "ProtectSystem=strict",
            "ProtectHome=tmpfs", f"BindPaths={home}", f"BindReadOnlyPaths={info}:/run/labkit",
            "ProtectProc=invisible", "ProtectControlGroups=yes", "NoNewPrivileges=yes",
            f"NetworkNamespacePath=/run/netns/{netns}", f"TimeoutStopSec={stop_s:g}s"]


def run_command(uid: int, gid: int, properties: list[str], env_names: list[str] | tuple[str, ...] = (),
                home: str = "") -> list[str]:
    """The command prefix that runs the rest of a command line as attendee ``uid``:``gid``'s lab unit
    (:func:`unit_name`, in :data:`SLICE`) with ``properties`` (:func:`lab_properties`), in ``home`` (if given), and
    waits for it: ``systemd-run --wait --pipe --collect``, so the prefix's process lives as long as the unit, its
    output is the unit's and its exit status the unit's main process's. Each of ``env_names`` is passed as
    ``--setenv=NAME``: its value taken from the environment systemd-run is started with (a unit gets no other).
    Run it as root. A pure function: nothing is read or run."""
    return ([shutil.which("systemd-run") or "/usr/bin/systemd-run", "--wait", "--pipe", "--collect",
             f"--unit={unit_name(uid)}", f"--slice={SLICE}", f"--uid={uid}", f"--gid={gid}"]
            + ([f"--working-directory={home}"] if home else [])
            + [f"--property={p}" for p in properties] + [f"--setenv={name}" for name in env_names] + ["--"])


def _systemctl(*args: str, timeout: float = SYSTEMCTL_S) -> subprocess.CompletedProcess:
    """Run ``systemctl ARGS`` with a deadline of ``timeout`` s (output captured).

    Raises:
        LabkitError: it did not end in time.
    """
    try:
        return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LabkitError(f"systemctl {' '.join(args)} did not end in {timeout:g} s") from None


def stop(uid: int, stop_s: float = 10.0) -> None:
    """Stop attendee ``uid``'s lab unit and wait for it (``systemctl stop``: SIGTERM to each of its processes, SIGKILL
    to those left after its ``TimeoutStopSec``); nothing if it is not running (``systemctl`` then says the unit is not
    loaded). ``stop_s`` is that timeout, the deadline being ``stop_s`` + :data:`SYSTEMCTL_S`.

    Raises:
        LabkitError: the stop failed or overran (systemctl's message).
    """
    done = _systemctl("stop", unit_name(uid), timeout=stop_s + SYSTEMCTL_S)
    if done.returncode not in (0, 5):  # 5: not loaded (LSB "program is not installed"), i.e. not running
        raise LabkitError(f"systemctl stop {unit_name(uid)} failed: {done.stderr.strip()}")


def systemd_version() -> int:
    """The running systemd's version (the number ``systemctl --version`` starts with); 0 without ``systemctl``.

    Raises:
        LabkitError: systemctl overran its deadline.
    """
    if not shutil.which("systemctl"):
        return 0
    found = re.match(r"systemd (\d+)", _systemctl("--version").stdout)
    return int(found.group(1)) if found else 0


def missing(backend: str, root: Path | str = "/", version: int | None = None) -> list[str]:
    """What the machine whose root is ``root`` lacks for ``backend``, each with its fix; empty when nothing is
    missing. :data:`SYSTEMD`: systemd :data:`MIN_SYSTEMD` or later (``version``, default :func:`systemd_version`),
    the :data:`CONTROLLERS` in the cgroup v2 root's ``cgroup.controllers``, D-Bus's system bus (``systemd-run
    --wait`` follows its unit over it: without it "Failed to connect to bus", found in the rehearsal guest),
    ``systemd-run`` and ``ip``;
    :data:`CGROUP_V1`: ``ip``, ``setpriv`` and ``unshare``. Both: ``sysctl``.

    Raises:
        LabkitError: as :func:`systemd_version`.
    """
    tools = {"ip": "iproute2", "sysctl": "procps"}
    lacking = []
    if backend == SYSTEMD:
        tools["systemd-run"] = "systemd"
        version = systemd_version() if version is None else version
        if version < MIN_SYSTEMD:
            lacking.append(f"systemd {MIN_SYSTEMD} or later (this is {version or 'unknown'}: PrivateIPC= came in "
                           f"248; Debian 12, 13 and Ubuntu 24.04 have it)")
        listed = (Path(root) / "sys/fs/cgroup/cgroup.controllers")
        present = listed.read_text().split() if listed.is_file() else []
        lacking += [f"the cgroup v2 {name} controller (not in {listed})" for name in CONTROLLERS
                    if name not in present]
        if not (Path(root) / "run/dbus/system_bus_socket").exists():
            lacking.append("D-Bus's system bus, for systemd-run --wait (apt-get install dbus)")
    else:
        tools.update(setpriv="util-linux", unshare="util-linux")
    lacking += [f"`{tool}` (apt-get install {package})" for tool, package in tools.items() if not shutil.which(tool)]
    return lacking


def survey(root: Path | str = "/", version: int | None = None) -> tuple[str, list[str], str]:
    """Which backend ``make hub`` runs on the machine whose root is ``root``, what it lacks there (:func:`missing`) and
    both in one line: ``(backend, lacking, line)``, ``backend`` "" when none can run (the line then says why and what
    to rent).

    Raises:
        LabkitError: as :func:`systemd_version`.
    """
    try:
        backend = choose(root)
    except LabkitError as exc:
        return "", [], str(exc)
    how = ("each attendee's lab a transient systemd unit" if backend == SYSTEMD
           else "each attendee's lab in cgroup v1 groups and an `ip netns` namespace")
    lacking = missing(backend, root, version)
    return backend, lacking, f"{backend}: {how}" + (f"; missing: {'; '.join(lacking)}" if lacking else "")
