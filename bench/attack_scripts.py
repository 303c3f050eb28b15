"""The scripts the misbehaving attendee of the room rehearsal runs in their own lab (bench/attacks.py runs them as
their uid, in their namespace and groups): each is Python source for ``python -c``; those that last end when a line
comes on their standard input and print their result as one JSON line then (:data:`STOP`).
"""

#: Every lasting script ends when a line comes on its standard input and prints its result as one JSON line then.
STOP = """
import json, select, sys, threading
stop = threading.Event()
def _wait_for_stop():
    sys.stdin.readline()
    stop.set()
threading.Thread(target=_wait_for_stop, daemon=True).start()
def done(result):
    print(json.dumps(result), flush=True)
"""

#: The hub's lock files (``argv[1:]``): opened read-only and ``flock``-ed without waiting, every second until stopped
#: (issue 63 #1: a kernel that held the accounts lock stopped every sign-in); the outcomes counted.
LOCKS = STOP + """
import collections, fcntl
seen = {path: collections.Counter() for path in sys.argv[1:]}
print("started", flush=True)
while not stop.is_set():
    for path in sys.argv[1:]:
        try:
            handle = open(path, "rb")
        except OSError as exc:
            seen[path][type(exc).__name__] += 1
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen[path]["HELD"] += 1
        except OSError:
            seen[path]["busy"] += 1
        finally:
            handle.close()
    stop.wait(1.0)
done({path: dict(counts) for path, counts in seen.items()})
"""

#: A 512 MiB SysV shared memory segment (attached, 64 MiB of it written: real pages) and a message queue with a message,
#: made with util-linux's ipcmk and kept until stopped (issue 63 #2: they outlived the lab, charged to no group).
SYSV = STOP + """
import ctypes, subprocess
made = subprocess.run(["ipcmk", "-M", str(512 * 2**20), "-Q"], capture_output=True, text=True, check=True).stdout
shm_id, msg_id = (int(line.split(":")[1]) for line in made.splitlines())
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
address = libc.shmat(shm_id, None, 0)
written = 0
if address not in (None, ctypes.c_void_p(-1).value):
    try:
        for offset in range(0, 64 * 2**20, 4096):  # 64 MiB of it written: the rest of the group is the hog's
            ctypes.memset(address + offset, 1, 1)
            written += 4096
    except Exception:
        pass
class Message(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]
sent = libc.msgsnd(msg_id, ctypes.byref(Message(1, b"left for the next attendee")), 64, 0) == 0
print("started", flush=True)
stop.wait(100000)
done({"shm_id": shm_id, "msg_id": msg_id, "written_mib": written // 2**20, "message_sent": sent})
"""

#: A fake broker on a port of the lab's loopback, named in the lab's broker state file (what the live view probes as
#: root, labkit.hub.observed): it answers each connection, in turn, with a length of 2 GiB and nothing more, or with a
#: length of 1000 and a byte every 0.2 s (issue 63 #3). For each connection: its kind and how long the prober kept
#: it open (s).
FAKE_BROKER = STOP + """
import os, socket, struct, time
server = socket.create_server(("127.0.0.1", 0))
server.settimeout(0.5)
port = server.getsockname()[1]
folder = os.path.join(os.environ["HOME"], "labkit", "lab")
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, "broker.json.new"), "w") as out:
    json.dump({"bootstrap": f"127.0.0.1:{port}", "pid": os.getpid()}, out)
os.replace(os.path.join(folder, "broker.json.new"), os.path.join(folder, "broker.json"))
held = []
def answer(conn, kind):
    started = time.monotonic()
    conn.settimeout(15)
    try:
        conn.recv(65536)
        if kind == "2 GiB":
            conn.sendall(struct.pack(">i", 2**31 - 1) + b"\\0" * 65536)
            conn.recv(1)  # until the prober closes (b"") or 15 s
        else:
            conn.sendall(struct.pack(">i", 1000))
            for _ in range(1000):
                if stop.wait(0.2):
                    break
                conn.sendall(b"\\0")
    except OSError:
        pass
    held.append({"kind": kind, "held_s": round(time.monotonic() - started, 2)})
    conn.close()
print(port, flush=True)
n = 0
while not stop.is_set():
    try:
        conn, _ = server.accept()
    except OSError:
        continue
    try:
        threading.Thread(target=answer, args=(conn, "2 GiB" if n % 2 == 0 else "trickle"), daemon=True).start()
    except RuntimeError:  # no thread to be had (the fork bomb holds the lab's tasks): this one goes unanswered
        conn.close()
    n += 1
time.sleep(1)
done({"port": port, "connections": n, "held": held})
"""

#: /tmp, /dev/shm and /run/lock filled until the system refuses (issue 63 #9: 2 GiB into a /tmp on the hub's disk, 1 GiB
#: into the machine's /run/lock), kept until stopped: MiB written into each and the errno that stopped it.
FILL = STOP + """
import errno, os
chunk = b"x" * 2**20
found = {}
for folder in ("/tmp", "/dev/shm", "/run/lock"):
    written, why = 0, None
    try:
        with open(f"{folder}/filled-by-an-attendee", "wb") as out:
            while written < 8192:
                out.write(chunk)
                out.flush()
                written += 1
    except OSError as exc:
        why = errno.errorcode.get(exc.errno, str(exc.errno))
    found[folder] = {"mib": written, "errno": why}
print("started", flush=True)
stop.wait(100000)
done(found)
"""

#: A process that drops the hub's variable and leaves its session (issue 63 #7), as ``env -u LABKIT_HUB_STATE setsid
#: sleep 100000 &`` in a terminal does; its pid.
ESCAPE = """
import subprocess
sleeper = subprocess.Popen(["env", "-u", "LABKIT_HUB_STATE", "setsid", "sleep", "100000"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(sleeper.pid)
"""

#: Kill this lab's own JupyterLab server (``jupyterhub-singleuser``, the attendee's own process) with SIGKILL, as
#: ``kill -9`` from their terminal would; its pids.
KILL_OWN_SERVER = """
import os, signal
pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())
        and b"jupyterhub-singleuser" in open(f"/proc/{p}/cmdline", "rb").read()]
for pid in pids:
    os.kill(pid, signal.SIGKILL)
print(*pids)
"""

#: Connect to every ``host:port`` of the JSON list ``argv[1]`` (non-blocking, 300 at a time, 3 s each): the ports that
#: connected, and how many were refused, unreachable (ENETUNREACH, EHOSTUNREACH: the wall) or timed out.
SCAN = """
import collections, errno, json, selectors, socket, sys, time
targets = json.loads(sys.argv[1])
connected, counts = [], collections.Counter()
for start in range(0, len(targets), 300):
    watch, pending = selectors.DefaultSelector(), {}
    for target in targets[start:start + 300]:
        host, port = target.rsplit(":", 1)
        sock = socket.socket()
        sock.setblocking(False)
        code = sock.connect_ex((host, int(port)))
        if code in (0, errno.EINPROGRESS):
            watch.register(sock, selectors.EVENT_WRITE, target)
            pending[sock] = target
        else:
            counts[errno.errorcode.get(code, str(code))] += 1
            sock.close()
    deadline = time.monotonic() + 3
    while pending and time.monotonic() < deadline:
        for key, _ in watch.select(max(0.0, deadline - time.monotonic())):
            code = key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == 0:
                connected.append(key.data)
            else:
                counts[errno.errorcode.get(code, str(code))] += 1
            watch.unregister(key.fileobj)
            key.fileobj.close()
            del pending[key.fileobj]
    counts["timed out"] += len(pending)
    for sock in pending:
        sock.close()
print(json.dumps({"connected": connected, "counts": dict(counts)}))
"""

#: What ``/proc`` shows this lab of other users' processes: the uids of every pid it lists, and for each pid of
#: ``argv[1:]`` (another attendee's, the hub's) whether its cmdline and environ could be read.
PROC = """
import json, os, sys
uids = {}
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            uid = next(int(line.split()[1]) for line in open(f"/proc/{entry}/status") if line.startswith("Uid:"))
        except OSError:
            continue
        uids[uid] = uids.get(uid, 0) + 1
read = {}
for pid in sys.argv[1:]:
    for part in ("cmdline", "environ"):
        try:
            open(f"/proc/{pid}/{part}", "rb").read()
            read[f"{pid}/{part}"] = "read"
        except OSError as exc:
            read[f"{pid}/{part}"] = type(exc).__name__
print(json.dumps({"uids_listed": {str(k): v for k, v in uids.items()}, "others": read}))
"""

#: Start ``sleep`` processes until the system refuses one, hold them ``argv[1]`` s, end them: how many ran, the errno.
FORK_BOMB = """
import os, sys, time
pids, errno = [], 0
try:
    while len(pids) < 100000:
        pids.append(os.posix_spawn("/bin/sleep", ["sleep", "300"], {}))
except OSError as exc:
    errno = exc.errno
print(len(pids), errno, flush=True)
time.sleep(float(sys.argv[1]))
for pid in pids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
"""

#: The memory hog (64 MiB at a time until the OOM killer ends it, again and again) and a CPU burn on every core.
MISCHIEF = """
import multiprocessing, subprocess, sys, time
def burn():
    while True:
        pass
for _ in range(multiprocessing.cpu_count()):
    multiprocessing.Process(target=burn, daemon=True).start()
print("started", flush=True)
hog = "chunks = []\\nwhile True:\\n    c = bytearray(64 * 2**20); c[::4096] = b'x' * len(c[::4096]); chunks.append(c)"
while True:
    try:
        subprocess.run([sys.executable, "-c", hog])
    except OSError:  # no task to be had while the fork bomb holds the lab's
        pass
    time.sleep(1)
"""
