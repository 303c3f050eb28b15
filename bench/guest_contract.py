"""The systemd backend's contract (issue 64), first light check, run as root inside the rehearsal guest (bench/guest.py
runs it from the shared checkout): each attendee's lab a real transient unit made with ``systemd-run``, its limits
and sandboxing as unit properties (:func:`lab_properties`), and the attacker's attempts as small processes in it.

Prints one JSON object: per property ``{"pass": bool, "reading": what was observed}``. The properties and where
systemd documents them: systemd.resource-control(5) (MemoryMax, MemorySwapMax, TasksMax), systemd.exec(5)
(PrivateTmp, PrivateIPC, PrivateDevices, ProtectSystem, ProtectHome, BindPaths, NoNewPrivileges, NetworkNamespacePath,
TemporaryFileSystem), systemd-run(1) (``--wait``, ``--pipe``: the result line "Finished with result: ...").
Standard library only (the guest has Debian's python3 and nothing else). Every command has a deadline.
"""

import json
import subprocess
import time

USERS = ("ann", "bob")
PORT = 8123  # ann's lab listens here on its own loopback


#: The lab's temporary folders: a tmpfs of its own each, size-limited and charged to the unit's memory. Not
#: PrivateTmp=yes: on systemd 252 it is a folder of the root disk (/tmp/systemd-private-*), no size limit, and it wins
#: over a TemporaryFileSystem= of /tmp (measured: 32 MiB written with both set); without mode=1777 the tmpfs is
#: root's 0755 and the attendee cannot write it.
TMP = "TemporaryFileSystem=/tmp:size=16M,mode=1777 /var/tmp:size=16M,mode=1777"


def sh(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a command in the guest (not in a unit); raises subprocess.TimeoutExpired after ``timeout`` s."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def lab_properties(user: str, memory: str = "64M", tasks: int = 32, ipc: bool = True) -> list:
    """systemd-run's arguments for ``user``'s lab: the unit properties issue 64 lists (``ipc=False`` leaves out
    PrivateIPC, as the control of the shared-memory check)."""
    props = [f"MemoryMax={memory}", "MemorySwapMax=0", f"TasksMax={tasks}", "CPUWeight=100", TMP,
             "PrivateDevices=yes", "ProtectSystem=strict", "ProtectHome=tmpfs", f"BindPaths=/home/{user}",
             "NoNewPrivileges=yes", f"NetworkNamespacePath=/run/netns/lab-{user}"] + (["PrivateIPC=yes"] if ipc else [])
    return [f"--uid={user}", f"--gid={user}", "--setenv=HOME=/home/" + user] + [a for p in props for a in ("-p", p)]


def in_lab(user: str, script: str, timeout: float = 180, **limits) -> subprocess.CompletedProcess:
    """Run ``sh -c script`` as a transient unit of ``user``'s lab and wait for it (stdout and stderr piped back;
    systemd-run's own stderr says the unit's result)."""
    return sh("systemd-run", "--wait", "--pipe", "--collect", *lab_properties(user, **limits),
              "/bin/sh", "-c", script, timeout=timeout)


def result(done: subprocess.CompletedProcess) -> str:
    """The unit's result from systemd-run's 'Finished with result: X' line ('' when absent)."""
    for line in done.stderr.splitlines():
        if "Finished with result:" in line:
            return line.split(":", 1)[1].strip()
    return ""


def memory() -> dict:
    """Memory past MemoryMax=64M is OOM-killed inside the unit; 16 MiB within it runs."""
    fill = "python3 -c \"b = b'x' * ({} << 20); print('survived')\""
    over, under = in_lab("ann", fill.format(200)), in_lab("ann", fill.format(16))
    reading = {"200MiB": {"result": result(over), "out": over.stdout.strip(), "rc": over.returncode},
               "16MiB": {"result": result(under), "out": under.stdout.strip(), "rc": under.returncode}}
    return {"pass": result(over) == "oom-kill" and "survived" not in over.stdout and "survived" in under.stdout,
            "reading": reading}


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
    """A fork bomb stops at TasksMax=32: forks fail with EAGAIN once the unit holds 32 tasks."""
    done = sh("systemd-run", "--wait", "--pipe", "--collect", *lab_properties("ann"), "python3", "-c", FORKS,
              timeout=240)
    try:
        reading = json.loads(done.stdout.strip().splitlines()[0])
    except (ValueError, IndexError):
        return {"pass": False, "reading": {"out": done.stdout, "err": done.stderr[-800:]}}
    return {"pass": reading["children"] == 31 and reading["pids.max"] == "32" and reading["error"] is not None,
            "reading": reading}


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


NEIGHBOUR = ("ls -A /tmp; echo --; ls -A /home; echo --; cat /home/ann/ann-file 2>&1; echo --;"
             " touch /usr/mark 2>&1; echo --; grep NoNewPrivs /proc/self/status; echo --; ls /dev | tr '\\n' ' ';"
             " echo; echo --; ip -o link | cut -d: -f2 | tr -d ' ' | tr '\\n' ' '; echo; echo --;"
             " python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), timeout=3); print('reached')\""
             " 2>&1 | tail -1; echo --; echo bob > $HOME/bob-file && cat $HOME/bob-file" % PORT)


def neighbour() -> dict:
    """While ann's lab runs (its /tmp mark, a file in its home, a port on its loopback), bob's lab sees none of them;
    bob's lab also cannot write /usr, has NoNewPrivs, no disk in /dev, only lo, its own home writable."""
    sh("systemctl", "stop", "lab-ann-server")
    sh("systemd-run", "--unit=lab-ann-server", "--collect", *lab_properties("ann"), "/bin/sh", "-c",
       f"echo ann > /tmp/ann-mark; echo ann > $HOME/ann-file; exec python3 -m http.server -b 127.0.0.1 {PORT}")
    deadline, up = time.monotonic() + 90, False
    probe = f"import socket; socket.create_connection(('127.0.0.1', {PORT}), timeout=3)"
    while not up and time.monotonic() < deadline:
        up = sh("ip", "netns", "exec", "lab-ann", "python3", "-c", probe, timeout=30).returncode == 0
        time.sleep(0.5)
    try:
        parts = [p.strip() for p in in_lab("bob", NEIGHBOUR).stdout.split("--")]
    finally:
        sh("systemctl", "stop", "lab-ann-server")
    names = ["tmp", "home", "ann_file", "write_usr", "no_new_privs", "dev", "links", "ann_port", "own_home"]
    reading = dict(zip(names, parts), ann_port_up_in_its_namespace=up)
    checks = {"tmp_private": "ann-mark" not in reading["tmp"],
              "home_only_own": reading["home"] == "bob",
              "ann_file_hidden": "No such file" in reading["ann_file"],
              "protect_system": "Read-only file system" in reading["write_usr"],
              "no_new_privs": reading["no_new_privs"].endswith("1"),
              "private_devices": "vda" not in reading["dev"],
              "own_network_namespace": reading["links"] == "lo",
              "neighbour_port_unreachable": up and "reached" != reading["ann_port"],
              "own_home_writable": reading["own_home"] == "bob"}
    return {"pass": all(checks.values()), "checks": checks, "reading": reading}


def tmp_folders() -> dict:
    """A lab's /tmp is a 16 MiB tmpfs of its own: 32 MiB written stop at 16 (ENOSPC), charged to the unit's memory
    (memory.stat shmem); the control, PrivateTmp=yes, is a folder of the root disk."""
    fill = ("df -T /tmp | tail -1 | tr -s ' ' | cut -d' ' -f2,3; head -c 32M /dev/zero > /tmp/fill 2>/dev/null;"
            " du -m /tmp/fill | cut -f1; grep -w shmem /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.stat")
    lines = in_lab("ann", fill).stdout.split("\n")
    control = sh("systemd-run", "--wait", "--pipe", "--collect", "--uid=ann", "-p", "PrivateTmp=yes", "/bin/sh", "-c",
                 "df -T /tmp | tail -1 | tr -s ' ' | cut -d' ' -f2,3").stdout.strip()
    reading = {"df_type_kib": lines[0], "written_mib": lines[1] if len(lines) > 1 else "",
               "memory_stat": lines[2] if len(lines) > 2 else "", "control_PrivateTmp_df": control}
    return {"pass": lines[0] == "tmpfs 16384" and reading["written_mib"] == "16"
            and reading["memory_stat"] == f"shmem {16 << 20}", "reading": reading}


def memory_view() -> dict:
    """What a process (and a JVM, if the guest has one) reads as its memory limit inside a MemoryMax=512M unit: the
    unit's own cgroup's memory.max, and the JVM's default heap a quarter of it (MaxRAMPercentage=25, the JDK's
    default), not of the guest's memory."""
    script = ("cat /proc/self/cgroup; echo --; cat /sys/fs/cgroup/memory.max 2>&1; echo --;"
              " cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.max 2>&1; echo --;"
              " command -v java >/dev/null && java -XX:+PrintFlagsFinal -version 2>/dev/null | grep -w MaxHeapSize")
    parts = [p.strip() for p in in_lab("ann", script, memory="512M", timeout=300).stdout.split("--")]
    reading = dict(zip(["cgroup", "sys_fs_cgroup_memory.max", "own_cgroup_memory.max", "java_MaxHeapSize"], parts))
    heap = reading.get("java_MaxHeapSize", "").split()
    java_sees_limit = not heap or heap[3] == str(512 << 20 >> 2)  # no JDK in the image: nothing to check
    return {"pass": reading.get("own_cgroup_memory.max") == str(512 << 20) and java_sees_limit, "reading": reading}


def main() -> None:
    """Set up two attendees with a network namespace each, run every check, print the JSON."""
    for user in USERS:
        if sh("id", user).returncode != 0:
            sh("useradd", "-m", "-s", "/bin/sh", user)
        if sh("ip", "netns", "add", f"lab-{user}").returncode == 0:
            sh("ip", "-n", f"lab-{user}", "link", "set", "lo", "up")
    report = {"systemd": sh("systemctl", "--version").stdout.splitlines()[0]}
    for check in (memory, fork_bomb, shared_memory, neighbour, tmp_folders, memory_view):
        start = time.monotonic()
        try:
            report[check.__name__] = check()
        except subprocess.TimeoutExpired as expired:
            report[check.__name__] = {"pass": False, "reading": f"timed out: {expired}"}
        report[check.__name__]["seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
