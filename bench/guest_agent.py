"""The command agent inside the rehearsal guest (bench/guest.py): copied into the image at build time and started by a
systemd unit, it reads one JSON request per line from the virtio-serial port ``/dev/virtio-ports/labkit`` and writes
one JSON reply per line.

A request is ``{"argv": [...], "timeout": seconds}``: the command runs with :func:`subprocess.run` (no shell unless
the argv says so), its stdin empty; the reply is ``{"rc": exit status, "out": stdout, "err": stderr, "wall": seconds}``
(``rc`` is -9 with ``"timeout": true`` when the deadline passed and the command was killed). On start it writes
``{"hello": uptime seconds}``, which is how the host knows the guest is usable.

Standard library only: it runs on Debian's python3 in a guest that has nothing else.
"""

import json
import subprocess
import time

PORT = "/dev/virtio-ports/labkit"


def _run(request: dict) -> dict:
    start = time.monotonic()
    try:
        done = subprocess.run(request["argv"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=request.get("timeout", 60))
        reply = {"rc": done.returncode, "out": done.stdout.decode(errors="replace"),
                 "err": done.stderr.decode(errors="replace")}
    except subprocess.TimeoutExpired as expired:
        reply = {"rc": -9, "timeout": True, "out": (expired.stdout or b"").decode(errors="replace"),
                 "err": (expired.stderr or b"").decode(errors="replace")}
    except OSError as error:  # no such program, not executable
        reply = {"rc": 127, "out": "", "err": f"{type(error).__name__}: {error}"}
    reply["wall"] = round(time.monotonic() - start, 3)
    return reply


def _send(port, reply: dict) -> None:
    """Write ``reply`` as one JSON line, all of it: a write to the port may take only part (measured: a reply of
    more than 32 KiB arrived cut at 32768 bytes, and the host's next read joined it to the next reply)."""
    data = memoryview((json.dumps(reply) + "\n").encode())
    while data:
        data = data[port.write(data):]


def main() -> None:
    """Serve requests until the port closes (the guest powers off)."""
    with open(PORT, "r+b", buffering=0) as port:
        uptime = float(open("/proc/uptime").read().split()[0])
        _send(port, {"hello": uptime})
        pending = b""
        while True:
            chunk = port.read(65536)
            if not chunk:
                time.sleep(0.1)  # the host is not connected: a virtio port reads empty until it is
                continue
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                _send(port, _run(json.loads(line)))


if __name__ == "__main__":
    main()
