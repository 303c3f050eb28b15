"""The systemd backend's contract (issue 64), run as root inside the rehearsal guest (bench/guest.py runs it from the
shared checkout): each attendee's lab the transient unit the hub would run, made by the product's own functions
(:func:`labkit.hub.unit.lab_properties`, :func:`labkit.hub.unit.run_command`, the namespace and info folder of
:func:`labkit.hub.sandbox.prepare`, the stop of :func:`labkit.hub.sandbox.release`), and the attacker's attempts as
small processes in it, with light limits (:data:`MEMORY_MIB`, :data:`TASKS`, :data:`TMP_MIB`).

Prints one JSON object: per property ``{"pass": bool, "reading": what was observed}``. Where systemd documents each
property: :mod:`labkit.hub.unit`'s docstring; systemd-run(1) for the result line ("Finished with result: ...").
Standard library and the checkout's ``labkit.hub.unit`` and ``labkit.hub.sandbox`` only (the guest has Debian's
python3 and nothing else; both import nothing beyond it and ``labkit.core``). Every command has a deadline.
"""

import json
import pwd
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from labkit.hub import sandbox, unit  # noqa: E402 (the checkout's, put on the path above)

#: Two attendees, with uids of the lab's range (sandbox.ATTENDEE_UIDS): each gets the hub's namespace and address.
USERS = {"ann": sandbox.ATTENDEE_UIDS[0], "bob": sandbox.ATTENDEE_UIDS[1]}
PORT = 8123  # ann's lab listens here in its own namespace
#: The hub's state folder's stand-in: the attendees' info folders under it (sandbox.private_root).
TMP_ROOT = sandbox.private_root("/var/lib/labkit-contract")
MEMORY_MIB, TASKS, TMP_MIB = 64, 32, 16
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def sh(*argv: str, timeout: float = 120, env: dict = None) -> subprocess.CompletedProcess:
    """Run a command in the guest (not in a unit); raises subprocess.TimeoutExpired after ``timeout`` s."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)


def lab_argv(user: str, memory_mib: int = MEMORY_MIB, ipc: bool = True, wait: bool = True) -> list:
    """The hub's command prefix for ``user``'s lab (:func:`labkit.hub.unit.run_command` with
    :func:`labkit.hub.unit.lab_properties`); ``ipc=False`` leaves out PrivateIPC (the control of the shared-memory
    check), ``wait=False`` starts the unit and returns (a lab left running while another is tried)."""
    uid, home = USERS[user], f"/home/{user}"
    properties = unit.lab_properties(uid, home, sandbox.netns(uid), str(sandbox.info_folder(TMP_ROOT, uid)),
                                     memory_mib, TASKS, TMP_MIB)
    if not ipc:
        properties.remove("PrivateIPC=yes")
    argv = unit.run_command(uid, pwd.getpwnam(user).pw_gid, properties, ("HOME",), home)
    return argv if wait else [a for a in argv if a not in ("--wait", "--pipe")]


def in_lab(user: str, script: str, timeout: float = 180, **options) -> subprocess.CompletedProcess:
    """Run ``sh -c script`` as ``user``'s lab unit and wait for it (stdout and stderr piped back; systemd-run's own
    stderr says the unit's result)."""
    return sh(*lab_argv(user, **options), "/bin/sh", "-c", script, timeout=timeout,
              env={"HOME": f"/home/{user}", "PATH": PATH})


def result(done: subprocess.CompletedProcess) -> str:
    """The unit's result from systemd-run's 'Finished with result: X' line ('' when absent)."""
    for line in done.stderr.splitlines():
        if "Finished with result:" in line:
            return line.split(":", 1)[1].strip()
    return ""


FILL = "python3 -c \"b = b'x' * ({} << 20); print('survived')\""
OOM_KILLS = "grep -w oom_kill /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.events"


def memory() -> dict:
    """Memory past MemoryMax (64 MiB) loses the process that took it to the OOM killer, inside the unit, and the lab
    goes on (OOMPolicy=continue: its shell runs on, memory.events counts the kill); 16 MiB within it runs."""
    over = in_lab("ann", FILL.format(200) + "; echo \"rc=$?\"; echo lab-goes-on; " + OOM_KILLS)
    under = in_lab("ann", FILL.format(16))
    reading = {"200MiB": {"result": result(over), "out": over.stdout.split(), "rc": over.returncode},
               "16MiB": {"result": result(under), "out": under.stdout.strip(), "rc": under.returncode}}
    out = over.stdout.split()
    return {"pass": "survived" not in out and "rc=137" in out and "lab-goes-on" in out and out[-2:] == ["oom_kill", "1"]
            and "survived" in under.stdout, "reading": reading}


def observed() -> dict:
    """What the hub reads of a running lab: its memory (:func:`labkit.hub.sandbox.memory_of` of its group, usage and
    MemoryMax, what the live view shows), the OOM killer's count (:func:`labkit.hub.sandbox.oom_kills`, what the
    spawner logs), the info file the lab's notebook reads (:func:`labkit.hub.sandbox.write_info`); then the stop
    (:func:`labkit.hub.sandbox.release`: ``systemctl stop``, the unit, its group and every process of it gone, one
    in a session of its own as the broker's included)."""
    uid = USERS["ann"]
    sh(*lab_argv("ann", wait=False), "/bin/sh", "-c", "setsid sleep 300 & " + FILL.format(200) + "; exec sleep 300",
       env={"HOME": "/home/ann", "PATH": PATH})
    deadline, kills = time.monotonic() + 90, 0
    while kills < 1 and time.monotonic() < deadline:
        time.sleep(1)
        kills = sandbox.oom_kills(uid)
    group = sandbox.cgroups(uid)[0]
    memory = sandbox.memory_of(group)
    sandbox.write_info(uid, TMP_ROOT)
    info = sandbox.info_folder(TMP_ROOT, uid) / "memory.json"
    written = json.loads(info.read_text()) if info.exists() else None
    active = sh("systemctl", "is-active", unit.unit_name(uid)).stdout.strip()
    sandbox.release(uid)
    after = sh("systemctl", "is-active", unit.unit_name(uid)).stdout.strip()
    left = sh("pgrep", "-u", str(uid)).stdout.split()  # a process of its own session (as the broker) included
    sandbox.prepare(uid, sandbox.Limits(MEMORY_MIB, TASKS, tmp_mib=TMP_MIB), TMP_ROOT)  # the namespace, for the rest
    reading = {"group": str(group), "memory_of": memory, "oom_kills": kills, "info": written,
               "active_before_stop": active, "after_stop": after, "group_after_stop": group.exists(),
               "processes_of_the_uid_after_stop": left}
    return {"pass": kills == 1 and memory is not None and memory[1] == MEMORY_MIB << 20 and 0 < memory[0]
            and written == {"limit_mib": MEMORY_MIB, "oom_kills": 1} and active == "active"
            and after in ("inactive", "unknown") and not group.exists() and not left, "reading": reading}


FORKS = """
import json, os, time
children, error = [], None
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        error = e.strerror
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children.append(pid)
path = open('/proc/self/cgroup').read().strip().split('::')[-1]
read = lambda name: open('/sys/fs/cgroup' + path + '/' + name).read().strip()
print(json.dumps({'children': len(children), 'error': error, 'pids.max': read('pids.max'),
                  'pids.current': read('pids.current'), 'pids.events': read('pids.events')}))
for pid in children:
    os.kill(pid, 9)
"""


def fork_bomb() -> dict:
    """A fork bomb stops at TasksMax (32): forks fail with EAGAIN once the unit holds 32 tasks."""
    done = sh(*lab_argv("ann"), "python3", "-c", FORKS, timeout=240, env={"HOME": "/home/ann", "PATH": PATH})
    try:
        reading = json.loads(done.stdout.strip().splitlines()[0])
    except (ValueError, IndexError):
        return {"pass": False, "reading": {"out": done.stdout, "err": done.stderr[-800:]}}
    return {"pass": reading["children"] == TASKS - 1 and reading["pids.max"] == str(TASKS)
            and reading["error"] is not None, "reading": reading}


def shared_memory() -> dict:
    """A SysV segment made in a PrivateIPC unit is not in the machine's namespace and gone for the next unit of the
    same uid; the control (no PrivateIPC) leaves it in the machine's namespace."""
    made = in_lab("ann", "ipcmk -M 65536 && ipcs -m | grep -c '^0x'")
    host = sh("ipcs", "-m").stdout
    after = in_lab("ann", "ipcs -m | grep -c '^0x' || true")
    control = in_lab("ann", "ipcmk -M 65536", ipc=False)
    host_control = sh("ipcs", "-m").stdout
    leaked = [line.split()[1] for line in host_control.splitlines() if line.startswith("0x") and "ann" in line]
    for shmid in leaked:
        sh("ipcrm", "-m", shmid)
    reading = {"in_unit": made.stdout.strip(), "machine_during_or_after": host.count("ann"),
               "next_unit": after.stdout.strip(), "control_without_PrivateIPC_left_in_machine": len(leaked),
               "control_out": control.stdout.strip()}
    return {"pass": made.stdout.strip().endswith("1") and reading["machine_during_or_after"] == 0
            and reading["next_unit"] == "0" and len(leaked) == 1, "reading": reading}


REACH = ("python3 -c \"import socket; socket.create_connection(('%s', %d), timeout=3); print('reached')\""
         " 2>&1 | tail -1")
UIDS_SEEN = ("python3 -c \"import os; print(sorted({os.stat('/proc/' + p).st_uid for p in os.listdir('/proc')"
             " if p.isdigit()}))\"")
NEIGHBOUR = "; echo --; ".join([
    "ls -A /tmp", "ls -A /home", "cat /home/ann/ann-file 2>&1", "touch /usr/mark 2>&1",
    "grep NoNewPrivs /proc/self/status", "ls /dev | tr '\\n' ' '",
    "ip -o link | cut -d: -f2 | cut -d@ -f1 | tr -d ' ' | tr '\\n' ' '", REACH % ("127.0.0.1", PORT),
    REACH % (sandbox.address(USERS["ann"]), PORT), UIDS_SEEN, "touch /run/labkit/x 2>&1",
    "echo bob > $HOME/bob-file && cat $HOME/bob-file"])


def neighbour() -> dict:
    """While ann's lab runs (its /tmp mark, a file in its home, a port in its namespace), bob's lab sees none of them,
    nor reaches ann's port on its own loopback or at ann's address, nor sees another uid's process in /proc; bob's
    lab also cannot write /usr or its info folder, has NoNewPrivs, no disk in /dev, only lo and its veth end, its own
    home writable."""
    ann, bob = USERS["ann"], USERS["bob"]
    unit.stop(ann)
    sh(*lab_argv("ann", wait=False), "/bin/sh", "-c",
       f"echo ann > /tmp/ann-mark; echo ann > $HOME/ann-file; exec python3 -m http.server -b 0.0.0.0 {PORT}",
       env={"HOME": "/home/ann", "PATH": PATH})
    deadline, up = time.monotonic() + 90, False
    probe = f"import socket; socket.create_connection(('127.0.0.1', {PORT}), timeout=3)"
    while not up and time.monotonic() < deadline:
        up = sh("ip", "netns", "exec", sandbox.netns(ann), "python3", "-c", probe, timeout=30).returncode == 0
        time.sleep(0.5)
    try:
        parts = [p.strip() for p in in_lab("bob", NEIGHBOUR).stdout.split("--")]
    finally:
        unit.stop(ann)
    names = ["tmp", "home", "ann_file", "write_usr", "no_new_privs", "dev", "links", "ann_port_on_loopback",
             "ann_port_at_its_address", "uids_in_proc", "write_info", "own_home"]
    reading = dict(zip(names, parts), ann_port_up_in_its_namespace=up)
    checks = {"tmp_private": "ann-mark" not in reading["tmp"],
              "home_only_own": reading["home"] == "bob",
              "ann_file_hidden": "No such file" in reading["ann_file"],
              "protect_system": "Read-only file system" in reading["write_usr"],
              "no_new_privs": reading["no_new_privs"].endswith("1"),
              "private_devices": "vda" not in reading["dev"],
              "own_network_namespace": reading["links"].split() == ["lo", f"lkn{bob}"],
              "neighbour_port_unreachable": up and reading["ann_port_on_loopback"] != "reached"
              and reading["ann_port_at_its_address"] != "reached",
              "processes_unseen": reading["uids_in_proc"] == f"[{bob}]",
              "info_read_only": "Read-only file system" in reading["write_info"],
              "own_home_writable": reading["own_home"] == "bob"}
    return {"pass": all(checks.values()), "checks": checks, "reading": reading}


def tmp_folders() -> dict:
    """A lab's /tmp, /var/tmp and /dev/shm are tmpfs of TMP_MIB (16) each, /run/lock of 1 MiB: 32 MiB written to /tmp
    stop at 16 (ENOSPC), charged to the unit's memory (memory.stat shmem); the control, PrivateTmp=yes, is a folder of
    the root disk."""
    df = "df -T {} | tail -1 | tr -s ' ' | cut -d' ' -f2,3"
    fill = "; echo --; ".join([df.format("/tmp"), df.format("/var/tmp"), df.format("/dev/shm"), df.format("/run/lock"),
                              "head -c 32M /dev/zero > /tmp/fill 2>/dev/null; du -m /tmp/fill | cut -f1",
                              "grep -w shmem /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.stat"])
    parts = [p.strip() for p in in_lab("ann", fill).stdout.split("--")]
    control = sh("systemd-run", "--wait", "--pipe", "--collect", "--uid=ann", "-p", "PrivateTmp=yes", "/bin/sh", "-c",
                 df.format("/tmp")).stdout.strip()
    reading = dict(zip(["tmp", "var_tmp", "dev_shm", "run_lock", "written_mib", "memory_stat"], parts),
                   control_PrivateTmp_df=control)
    size = f"tmpfs {TMP_MIB << 10}"
    return {"pass": [reading.get(k) for k in ("tmp", "var_tmp", "dev_shm", "run_lock")] == [size] * 3 + ["tmpfs 1024"]
            and reading.get("written_mib") == str(TMP_MIB) and reading.get("memory_stat") == f"shmem {TMP_MIB << 20}",
            "reading": reading}


def memory_view() -> dict:
    """What a process (and a JVM, if the guest has one) reads as its memory limit inside a MemoryMax=512M unit: the
    unit's own cgroup's memory.max, and the JVM's default heap a quarter of it (MaxRAMPercentage=25, the JDK's
    default), not of the guest's memory."""
    script = ("cat /proc/self/cgroup; echo --; cat /sys/fs/cgroup/memory.max 2>&1; echo --;"
              " cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.max 2>&1; echo --;"
              " command -v java >/dev/null && java -XX:+PrintFlagsFinal -version 2>/dev/null | grep -w MaxHeapSize")
    parts = [p.strip() for p in in_lab("ann", script, memory_mib=512, timeout=300).stdout.split("--")]
    reading = dict(zip(["cgroup", "sys_fs_cgroup_memory.max", "own_cgroup_memory.max", "java_MaxHeapSize"], parts))
    heap = reading.get("java_MaxHeapSize", "").split()
    java_sees_limit = not heap or heap[3] == str(512 << 20 >> 2)  # no JDK in the image: nothing to check
    return {"pass": reading.get("own_cgroup_memory.max") == str(512 << 20) and java_sees_limit, "reading": reading}


def backend() -> dict:
    """The hub's choice here (:func:`labkit.hub.unit.survey`: systemd on cgroup v2, nothing missing) and its check
    (:func:`labkit.hub.sandbox.check`: passes)."""
    chosen, lacking, line = unit.survey()
    try:
        sandbox.check()
        checked = "passed"
    except Exception as error:  # noqa: BLE001 (its message is the reading)
        checked = f"{type(error).__name__}: {error}"
    return {"pass": chosen == unit.SYSTEMD and not lacking and checked == "passed",
            "reading": {"survey": line, "check": checked}}


def main() -> None:
    """Set up two attendees with the hub's namespace and info folder each (:func:`labkit.hub.sandbox.prepare`), run
    every check, release both, print the JSON."""
    sandbox.ensure_gateway()
    for user, uid in USERS.items():
        if sh("id", user).returncode != 0:
            sh("useradd", "-m", "-u", str(uid), "-U", "-s", "/bin/sh", user)
        sandbox.prepare(uid, sandbox.Limits(MEMORY_MIB, TASKS, tmp_mib=TMP_MIB), TMP_ROOT)
    report = {"systemd": sh("systemctl", "--version").stdout.splitlines()[0]}
    try:
        for check in (backend, memory, observed, fork_bomb, shared_memory, neighbour, tmp_folders, memory_view):
            start = time.monotonic()
            try:
                report[check.__name__] = check()
            except Exception as error:  # noqa: BLE001 (a timeout, a LabkitError: the check's reading)
                report[check.__name__] = {"pass": False, "reading": f"{type(error).__name__}: {error}"}
            report[check.__name__]["seconds"] = round(time.monotonic() - start, 1)
    finally:
        for uid in USERS.values():
            sandbox.release(uid)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
