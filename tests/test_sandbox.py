"""Each attendee's sandbox and the hub's wall (labkit/hub/sandbox.py, labkit/hub/firewall.py), without a hub: two
attendees' namespaces made as the spawner makes them, real processes run in them as the attendees' uids, and the
wall's nftables tables of two hubs at once.

The namespace tests need root, ``ip`` and nftables (skipped otherwise, saying why); they use the two highest attendee
uids (no Unix user needed: ``setpriv`` takes a bare uid), their own tables and a private temporary root under
pytest's, and remove all of it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from labkit.broker.ports import free_port
from labkit.core.errors import LabkitError
from labkit.hub import firewall, sandbox
from tests.probes import CONNECT, skip_unless_sandbox_can_run

#: A Python every user may run (the test venv's lives under /root, mode 0700).
SYSTEM_PYTHON = "/usr/bin/python3"


def test_each_attendee_uid_has_an_address_of_its_own_and_no_other_uid_has_one():
    addresses = [sandbox.address(uid) for uid in sandbox.ATTENDEE_UIDS]
    assert len(set(addresses)) == len(addresses) and sandbox.GATEWAY not in addresses
    assert sandbox.address(sandbox.ATTENDEE_UIDS.start) == "10.127.1.2"
    for uid in (0, 1000, sandbox.ATTENDEE_UIDS.stop):
        with pytest.raises(LabkitError, match="not an attendee's uid.*labkit.hub.users remove"):
            sandbox.address(uid)


@pytest.fixture
def two_attendees(tmp_path):
    """Attendees A and B (the two highest uids) with sandboxes as the spawner makes them, under two hubs' walls;
    ``{"a", "b", "tmp_root", "tables"}``. Everything removed after."""
    skip_unless_sandbox_can_run("network namespaces, cgroups and nftables tables")
    a, b = sandbox.ATTENDEE_UIDS.stop - 1, sandbox.ATTENDEE_UIDS.stop - 2
    tmp_root = tmp_path / "private"
    tables = [f"{firewall.TABLE_PREFIX}t{secrets.token_hex(4)}" for _ in range(2)]
    sandbox.ensure_gateway()
    limits = sandbox.Limits(memory_mib=512, tasks=256)
    try:
        for table in tables:  # two hubs on one machine: both tables apply to every packet
            firewall.wall(table, sandbox.GATEWAY)
        for uid in (a, b):
            sandbox.prepare(uid, limits, tmp_root)
        yield {"a": a, "b": b, "tmp_root": tmp_root, "tables": tables}
    finally:
        for uid in (a, b):
            sandbox.release(uid)
        for table in tables:
            firewall.remove_table(table)


def _in(attendees: dict, uid: int, script: str, *args: str, tmp_mib: int = sandbox.TMP_MIB,
        **popen) -> subprocess.CompletedProcess:
    """Run ``script`` with the system's Python as ``uid`` in a lab of its own (its /tmp ``tmp_mib`` MiB), as the
    spawner starts a lab."""
    return subprocess.run([*sandbox.enter_command(uid, uid, attendees["tmp_root"], tmp_mib), SYSTEM_PYTHON, "-c",
                           script, *args], preexec_fn=lambda: sandbox.join_cgroups(uid), capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"}, **popen)


def test_an_attendee_reaches_the_hubs_ports_on_the_gateway_and_nothing_of_another(two_attendees):
    a, b = two_attendees["a"], two_attendees["b"]
    hub_port = free_port(ports=firewall.HUB_PORTS)
    other_port = free_port(ports=range(20000, firewall.HUB_PORTS.start))
    with socket.create_server((sandbox.GATEWAY, hub_port)), socket.create_server((sandbox.GATEWAY, other_port)):
        # B listens on its own address and loopback, in its namespace, for as long as A tries
        listener = subprocess.Popen([*sandbox.enter_command(b, b, two_attendees["tmp_root"]), SYSTEM_PYTHON, "-c",
                                     "import socket, sys, time\n"
                                     f"s1 = socket.create_server(('{sandbox.address(b)}', 0))\n"
                                     "s2 = socket.create_server(('127.0.0.1', s1.getsockname()[1]))\n"
                                     "print(s1.getsockname()[1], flush=True); time.sleep(60)"],
                                    stdout=subprocess.PIPE, text=True, env={"PATH": "/usr/bin:/bin", "HOME": "/"})
        try:
            b_port = listener.stdout.readline().strip()
            tried = _in(two_attendees, a, CONNECT, f"{sandbox.GATEWAY}:{hub_port}", f"{sandbox.GATEWAY}:{other_port}",
                        f"{sandbox.address(b)}:{b_port}", f"127.0.0.1:{b_port}")
            assert tried.stdout.split() == ["connected", "unreachable", "unreachable", "refused"], tried
            # B's own client reaches B's listeners (the checks above are not vacuous), and the machine (the hub's
            # proxy) reaches B's address
            mine = _in(two_attendees, b, CONNECT, f"{sandbox.address(b)}:{b_port}", f"127.0.0.1:{b_port}")
            assert mine.stdout.split() == ["connected", "connected"], mine
            socket.create_connection((sandbox.address(b), int(b_port)), timeout=10).close()
        finally:
            listener.kill()
            listener.wait(10)


def test_an_attendee_runs_as_its_uid_in_its_cgroups_with_a_private_tmp(two_attendees):
    a = two_attendees["a"]
    marker = Path("/tmp") / f"labkit-host-{secrets.token_hex(4)}"
    marker.write_text("the machine's /tmp")
    try:
        seen = _in(two_attendees, a, "import json, os, sys; open('/tmp/mine', 'w').write('x');"
                   "print(json.dumps([os.getuid(), os.getgid(), os.getgroups(), os.path.exists(sys.argv[1]),"
                   " sorted(os.listdir('/tmp')), open('/proc/self/cgroup').read()]))", str(marker))
    finally:
        marker.unlink()
    uid, gid, groups, sees_host, listing, cgroups = json.loads(seen.stdout)
    assert (uid, gid, groups, sees_host, listing) == (a, a, [], False, ["mine"]), seen.stdout
    in_groups = {line.split(":")[1] for line in cgroups.splitlines() if line.endswith(f"/labkit/{a}")}
    assert {"memory", "pids"} <= in_groups and any("cpu" in c.split(",") for c in in_groups), cgroups
    assert (sandbox.private_tmp(two_attendees["tmp_root"], a) / "info" / "memory.json").exists()


def test_removing_an_attendee_removes_its_files_in_private_and_shared_writable_folders(two_attendees):
    """What a process of the attendee's uid left in the machine's shared folders (one started outside their lab, as an
    older labkit's were) goes with them; another uid's stays."""
    a, b = two_attendees["a"], two_attendees["b"]
    left = {uid: Path("/run/lock") / f"labkit-test-{uid}" for uid in (a, b)}
    for uid, path in left.items():
        subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "touch", str(path)],
                       check=True, timeout=30)
    try:
        sandbox.release(a)
        assert not sandbox.exists(a) and not any(group.exists() for group in sandbox.cgroups(a))
        removed = sandbox.remove_files(a, two_attendees["tmp_root"])
        assert sorted(removed) == sorted([str(sandbox.private_tmp(two_attendees["tmp_root"], a)), str(left[a])])
        assert left[b].exists()  # B's is B's
    finally:
        for path in left.values():
            path.unlink(missing_ok=True)


def test_a_lab_s_veth_adds_no_address_to_the_machine(two_attendees, tmp_path):
    """Making and removing a sandbox changes no address of the machine (``ip monitor address``): a browser on the
    machine (another test's Chromium) takes an address change for a network change and fails its loads
    (ERR_NETWORK_CHANGED, met in make test while the hub test made its labs)."""
    uid = sandbox.ATTENDEE_UIDS.stop - 3
    monitor = subprocess.Popen(["ip", "-o", "monitor", "address"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # listening
        sandbox.prepare(uid, sandbox.Limits(memory_mib=512, tasks=256), two_attendees["tmp_root"])
        subprocess.run(["ip", "link", "set", f"lkh{uid}", "down"], check=True, timeout=30)  # up and down again
        subprocess.run(["ip", "link", "set", f"lkh{uid}", "up"], check=True, timeout=30)
        time.sleep(2.0)  # an IPv6 link-local address would have come by now
    finally:
        sandbox.release(uid)
        time.sleep(1.0)
        monitor.terminate()
    seen = [line for line in monitor.communicate(timeout=30)[0].splitlines() if f"lkh{uid}" in line]
    assert not seen, seen


def test_a_file_that_goes_while_the_shared_folders_are_listed_is_skipped_not_an_error(monkeypatch):
    """Another user's scratch folder (Spark's ``/tmp/blockmgr-*``, met in make test) can go between the listing of
    ``/tmp`` and the stat of its entry: :func:`sandbox.owned_by` skips it and still finds the uid's own files."""
    kept, gone = (Path("/tmp") / f"labkit-{name}-{secrets.token_hex(4)}" for name in ("kept", "gone"))
    kept.write_text("x")
    gone.write_text("x")
    listing = Path.iterdir

    def listed_then_one_goes(self):
        entries = list(listing(self))
        gone.unlink(missing_ok=True)  # after the listing, before each entry's stat
        yield from entries

    monkeypatch.setattr(Path, "iterdir", listed_then_one_goes)
    try:
        found = sandbox.owned_by(os.getuid())
    finally:
        kept.unlink()
        gone.unlink(missing_ok=True)
    assert kept in found and gone not in found


# --- the lab's own IPC, temporary folders, /proc and cgroups (issue 63: the sandbox's contract) ----------------------

#: Run in a lab: one 64 MiB SysV shared memory segment and one message queue (``ipcmk``, util-linux), their ids.
MAKE_SEGMENTS = """
import subprocess
made = subprocess.run(["ipcmk", "-M", str(64 * 2**20), "-Q"], capture_output=True, text=True, check=True).stdout
print(" ".join(line.split(":")[1].strip() for line in made.splitlines()))
"""

#: Run in a lab: try to attach shared memory segment ``argv[1]`` and open queue ``argv[2]`` by id; the SysV objects of
#: ``argv[3]``'s uid this lab sees (``/proc/sysvipc``).
ATTACH = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
attached = libc.shmat(int(sys.argv[1]), None, 0) not in (None, ctypes.c_void_p(-1).value)
class Buffer(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 8)]
stat = libc.msgctl(int(sys.argv[2]), 2, ctypes.byref((ctypes.c_char * 256)()))  # IPC_STAT
seen = [line for kind in ("shm", "msg") for line in open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
        if line.split()[7] == sys.argv[3]]
print(attached, stat == 0, len(seen))
"""


def _sysv_of(uid: int) -> list[tuple[str, str]]:
    """The machine's SysV shared memory segments and message queues owned by ``uid`` (``/proc/sysvipc``, the
    machine's IPC namespace): ``(kind, id)`` pairs."""
    found = []
    for kind in ("shm", "msg"):
        for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[7] == str(uid):  # uid is the eighth column in both
                found.append((kind, fields[1]))
    return found


def test_sysv_shared_memory_and_queues_of_a_lab_die_with_it_and_never_reach_the_next(two_attendees):
    a = two_attendees["a"]
    try:
        made = _in(two_attendees, a, MAKE_SEGMENTS)
        assert made.returncode == 0, made.stderr
        shm_id, msg_id = made.stdout.split()
        machine = _sysv_of(a)  # the lab's only process has ended: its segment and queue with it
        sandbox.release(a)
        sandbox.prepare(a, sandbox.Limits(memory_mib=512, tasks=256), two_attendees["tmp_root"])
        tried = _in(two_attendees, a, ATTACH, shm_id, msg_id, str(a))
        assert (machine, tried.stdout.split()) == ([], ["False", "False", "0"]), tried.stderr
    finally:  # the code before the lab's IPC namespace left them in the machine's
        for kind, ident in _sysv_of(a):
            subprocess.run(["ipcrm", "-m" if kind == "shm" else "-q", ident], timeout=30)


#: Run in a lab: write 8 MiB into /tmp, say so and wait for a line; then fill /tmp, /dev/shm and /run/lock past their
#: sizes and print each one's errno name (or "fits"), leave a mark in /run/lock and wait for a line.
FILL = """
import errno, os, sys
chunk = b"x" * 2**20
with open("/tmp/first", "wb") as out:
    for _ in range(8):
        out.write(chunk)
print("written", flush=True)
sys.stdin.readline()
for folder, mib in (("/tmp", 32), ("/dev/shm", 32), ("/run/lock", 4)):
    try:
        with open(f"{folder}/fill", "wb") as out:
            for _ in range(mib):
                out.write(chunk)
                out.flush()
        print("fits", end=" ")
    except OSError as exc:
        print(errno.errorcode[exc.errno], end=" ")
    os.remove(f"{folder}/fill")
open("/run/lock/labkit-test-mark", "w").close()
print(sorted(os.listdir("/run/lock")), flush=True)
sys.stdin.readline()
"""


def _shmem_bytes(uid: int) -> int:
    """The shared memory (tmpfs) pages charged to attendee ``uid``'s memory group (``memory.stat``'s ``shmem``)."""
    stat = (sandbox.cgroups(uid)[0] / "memory.stat").read_text().split()
    return int(stat[stat.index("shmem") + 1])


def _size_under(folder: Path) -> int:
    """Bytes of the files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_a_lab_s_temporary_folders_are_size_limited_tmpfs_charged_to_its_memory_group(two_attendees):
    a, b = two_attendees["a"], two_attendees["b"]
    before = _shmem_bytes(a)
    lab = subprocess.Popen([*sandbox.enter_command(a, a, two_attendees["tmp_root"], 16), SYSTEM_PYTHON, "-c", FILL],
                           preexec_fn=lambda: sandbox.join_cgroups(a), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    try:
        assert lab.stdout.readline().strip() == "written", lab.stderr.read()
        charged = _shmem_bytes(a) - before
        on_disk = _size_under(two_attendees["tmp_root"])
        lab.stdin.write("go\n")
        lab.stdin.flush()
        out = lab.stdout.readline()  # the lab still runs, its mark in its /run/lock
        other = _in(two_attendees, b, "import os; print(os.listdir('/run/lock'))")
        on_machine = Path("/run/lock/labkit-test-mark").exists()
    finally:
        lab.kill()
        lab.wait(30)
        Path("/run/lock/labkit-test-mark").unlink(missing_ok=True)  # where the code before the lab's tmpfs left it
    assert charged >= 8 * 2**20 and on_disk < 2**20, (charged, on_disk)
    assert out.split(maxsplit=3)[:3] == ["ENOSPC", "ENOSPC", "ENOSPC"] and "labkit-test-mark" in out, out
    assert other.stdout.strip() == "[]" and not on_machine, other.stdout


def test_a_new_lab_of_a_uid_gets_nothing_of_the_last_one_even_after_userdel(two_attendees):
    """``userdel -r`` removes the home only: the lab's folder under the hub's state stays (an older labkit kept the
    attendee's /tmp and /dev/shm there, reused by the next lab of that uid)."""
    a, tmp_root = two_attendees["a"], two_attendees["tmp_root"]
    _in(two_attendees, a, "open('/tmp/secret', 'w').write('x'); open('/dev/shm/secret', 'w').write('x')")
    old = sandbox.private_tmp(tmp_root, a) / "tmp"  # what an older labkit's lab left under the state
    old.mkdir(exist_ok=True)
    (old / "old-secret").write_text("x")
    sandbox.release(a)  # the lab stopped; its user removed by userdel -r, not by labkit.hub.users.remove
    sandbox.prepare(a, sandbox.Limits(memory_mib=512, tasks=256), tmp_root)
    seen = _in(two_attendees, a, "import os; print(os.listdir('/tmp') + os.listdir('/dev/shm'))")
    assert (seen.stdout.strip(), sorted(os.listdir(sandbox.private_tmp(tmp_root, a)))) == ("[]", ["info"]), seen


def test_a_lab_made_again_right_after_it_ended_never_meets_its_old_veth(two_attendees):
    """A Stop then Start in the hub: twenty labs of one uid made one right after the other, each replacing the last
    (``prepare`` releases first). ``ip netns delete`` alone left the old veth to the kernel's later clean-up: on one
    CPU, 14 of 30 such remakes failed with "RTNETLINK answers: File exists"."""
    a = two_attendees["a"]
    for _ in range(20):
        sandbox.prepare(a, sandbox.Limits(memory_mib=512, tasks=256), two_attendees["tmp_root"])
    assert sandbox.exists(a) and sandbox.host_end(a) in psutil.net_if_stats()
    assert _in(two_attendees, a, "print('ran')").stdout.strip() == "ran"


def test_a_jvm_in_a_lab_sizes_its_heap_from_the_lab_s_memory_limit(two_attendees):
    uid = sandbox.ATTENDEE_UIDS.stop - 3
    sandbox.prepare(uid, sandbox.Limits(memory_mib=1024, tasks=256), two_attendees["tmp_root"])
    try:
        flags = subprocess.run([*sandbox.enter_command(uid, uid, two_attendees["tmp_root"]), "java",
                                "-XX:+PrintFlagsFinal", "-version"], preexec_fn=lambda: sandbox.join_cgroups(uid),
                               capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    finally:
        sandbox.release(uid)
    heap = [int(line.split()[3]) for line in flags.stdout.splitlines() if line.split()[1:2] == ["MaxHeapSize"]]
    assert heap and heap[0] <= 1024 * 2**20 // 4, (heap, flags.stderr)  # MaxRAMPercentage's default: 25


def test_an_attendee_cannot_see_another_s_processes_in_proc_and_sees_its_own(two_attendees):
    a, b = two_attendees["a"], two_attendees["b"]
    python = Path("/opt/labkit/venv/bin/python")  # the hub's venv (psutil), as a lab's kernels run
    if not python.exists():
        pytest.skip("the hub's venv (psutil) is not installed here: make hub installs it")
    other = subprocess.Popen([*sandbox.enter_command(b, b, two_attendees["tmp_root"]), "sleep", "60"],
                             preexec_fn=lambda: sandbox.join_cgroups(b), env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    try:
        deadline = time.monotonic() + 30
        while not (sleeper := [p for p in _children(other.pid) if p[1] == "sleep"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        seen = subprocess.run([*sandbox.enter_command(a, a, two_attendees["tmp_root"]), str(python), "-c",
                               "import os, subprocess, sys, psutil\n"
                               "child = subprocess.Popen(['sleep', '30'])\n"
                               "mine = {p.pid: p.cmdline() for p in psutil.process_iter()}\n"
                               "print(sorted(mine) == sorted([os.getpid(), child.pid]), mine[child.pid],"
                               " os.path.exists(f'/proc/{sys.argv[1]}'), os.path.exists('/proc/1'))\n"
                               "child.kill()", str(sleeper[0][0])],
                              preexec_fn=lambda: sandbox.join_cgroups(a), capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    finally:
        other.kill()
        other.wait(30)
    assert seen.stdout.strip() == "True ['sleep', '30'] False False", seen.stdout + seen.stderr


def _children(pid: int) -> list[tuple[int, str]]:
    """``pid`` and its descendants as the machine sees them: ``(pid, name)``."""
    listed = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(pid), "-p", str(pid)], capture_output=True,
                            text=True, timeout=30).stdout.split()
    found = [(int(p), name) for p, name in zip(listed[::2], listed[1::2])]
    return found + [d for p, _ in found if p != pid for d in _children(p)]


def test_pid_room_says_how_many_labs_fit_pid_max_and_the_fix():
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    fit = (pid_max - sandbox.PID_HEADROOM) // 4096
    assert sandbox.pid_room(4096, labs=max(fit, 0)) == ""
    warning = sandbox.pid_room(4096, labs=fit + 1)
    assert f"kernel.pid_max is {pid_max}: {fit} labs at 4096 tasks each fit" in warning
    assert f"sysctl -w kernel.pid_max={(fit + 1) * 4096 + sandbox.PID_HEADROOM}" in warning and "--tasks" in warning
