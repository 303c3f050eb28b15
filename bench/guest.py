"""A stock Debian server booted on this machine, to rehearse the room's systemd backend on (issue 64, first step).

Builds a minimal Debian image once from Debian's packages only (``mmdebstrap --variant=apt`` with :data:`PACKAGES`),
makes it an ext4 image with ``mkfs.ext4 -d`` and caches it, with the guest's kernel and initrd, under
``~/.cache/labkit/guest/<suite>-<key>/``, the key a hash of what it was built from (:func:`cache_key`: suite, mirror,
packages, the agent's source, :data:`RECIPE`). It boots the image under ``qemu-system-x86_64 -accel tcg -smp 1``
(this machine's KVM is a nested PVM hypervisor: ``-enable-kvm`` with a stock kernel stalls after "Probing EDD" and
``-cpu host`` fails on MSR 0x10a), its disk a throw-away snapshot of the image (``snapshot=on``: the cached image is
never written), the checkout shared read-only over 9p (``mount_tag=labkit``, mounted at ``/mnt/labkit``), and runs
commands in it through ``bench/guest_agent.py`` on a virtio-serial port: each command's output and exit status come
back (:meth:`Guest.run`). The kernel's console goes to a file (``console.log`` in the run's folder), never to a tty
a unit writes to (measured: a unit writing to ttyS0, where the getty runs, hung Python at start).

Then, per suite: the guest's boot time to the agent's hello, Python's speed in the guest against here (the same
3-million-step loop, Debian's python3 on both sides), reading the checkout over 9p, and
``bench/guest_contract.py`` (the systemd backend's contract as transient units). Figures, per step with its wall
seconds, into ``--json`` (default ``bench/results/guest.json``).

Run as root (mmdebstrap writes a root file system; the contract needs root in the guest only):
``.venv/bin/python bench/guest.py [--suite bookworm trixie] [--jdk]``. Needs ``mmdebstrap``, ``qemu-system-x86``
and ``e2fsprogs`` (``apt-get install mmdebstrap qemu-system-x86 e2fsprogs``); a missing one is an error naming that
line. Every step has a deadline; the guest is always stopped at the end (power-off, then SIGKILL after
:data:`STOP_S`), and the run deletes only the folders it made (its run folder and a failed build's root).
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
AGENT = Path(__file__).with_name("guest_agent.py")
CACHE = Path.home() / ".cache" / "labkit" / "guest"
MIRROR = "http://deb.debian.org/debian"
SUITES = ("bookworm", "trixie")  # Debian 12 and 13
#: What the rehearsal needs beyond mmdebstrap's apt variant (Essential packages and apt): systemd as init, Debian's
#: stock kernel, udev (the /dev/virtio-ports names), dbus (systemd-run --wait follows its unit over D-Bus: without
#: it "Failed to connect to bus"), python3 (the agent), the sandbox's tools.
PACKAGES = ("systemd", "systemd-sysv", "udev", "linux-image-amd64", "python3", "util-linux", "iproute2", "nftables",
            "procps", "passwd", "dbus")
JDK = "default-jre-headless"  # OpenJDK 17 on bookworm, 21 on trixie
#: What a real ``make hub`` needs beyond :data:`PACKAGES` when the shared install and the proxy's npm install come from
#: this machine (``bench/guest_hub.py``): ``make``, Node.js for configurable-http-proxy, and ``sudo`` and ``openssl``,
#: which the run-sheet's commands use and a stock server has.
HUB = ("make", "nodejs", "sudo", "openssl")
#: The build recipe's version: bumped when what the build does to the root changes (part of the cache key).
RECIPE = 3
#: MiB free on the guest's root file system. The image file is sparse: free space costs this machine no disk. With 1
#: GiB free, the run-sheet's apt-get install (git, make, python3-venv, npm, a JDK, Maven: bench/guest_hub.py
#: --literal) ended "No space left on device" at its 177th package; the lab's venv alone is about 1.4 GB.
FREE_MIB = 8192
INSTALL = "apt-get install mmdebstrap qemu-system-x86 e2fsprogs"
BUILD_S, BOOT_S, STOP_S = 900, 300, 60
#: The same fixed loop here and in the guest: the ratio is how slow TCG runs Python.
LOOP = ("import time\nt = time.perf_counter()\ns = 0\nfor i in range(3_000_000):\n    s += i\n"
        "print(time.perf_counter() - t)")
UNIT = """[Unit]
Description=labkit rehearsal agent (bench/guest_agent.py)
Wants=dev-virtio\\x2dports-labkit.device
After=dev-virtio\\x2dports-labkit.device

[Service]
ExecStart=/usr/bin/python3 /usr/local/sbin/labkit-agent
Restart=on-failure
StandardOutput=file:/var/log/labkit-agent.log
StandardError=file:/var/log/labkit-agent.log

[Install]
WantedBy=multi-user.target
"""
MOUNT = """[Unit]
Description=the labkit checkout, shared read-only by the host over 9p

[Mount]
What=labkit
Where=/mnt/labkit
Type=9p
Options=trans=virtio,version=9p2000.L,ro,msize=262144

[Install]
WantedBy=multi-user.target
"""


class GuestError(Exception):
    """A step of the rehearsal failed; the message names the step and, where there is one, the fix."""


def cache_key(suite: str, packages: tuple, mirror: str = MIRROR, agent: bytes = b"") -> str:
    """12 hex digits of the SHA-256 of what an image is built from: suite, mirror, the sorted package set, the agent's
    source and :data:`RECIPE`. Raises GuestError for a suite other than :data:`SUITES`."""
    if suite not in SUITES:
        raise GuestError(f"unknown suite {suite!r}: one of {', '.join(SUITES)}")
    what = json.dumps([suite, mirror, sorted(set(packages)), hashlib.sha256(agent).hexdigest(), RECIPE])
    return hashlib.sha256(what.encode()).hexdigest()[:12]


def missing_tools() -> list:
    """The programs the rehearsal needs that are not on PATH."""
    return [tool for tool in ("mmdebstrap", "qemu-system-x86_64", "mkfs.ext4") if shutil.which(tool) is None]


def _run(argv: list, timeout: float, what: str, **kwargs) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        raise GuestError(f"{what}: no end after {timeout:.0f} s ({' '.join(map(str, argv[:3]))} ...)") from None
    if done.returncode != 0:
        raise GuestError(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout)[-1500:]}")
    return done


def build(suite: str, jdk: bool = False, hub: bool = False) -> tuple:
    """The image of ``suite`` (built now, or from the cache), with :data:`JDK` if ``jdk`` and :data:`HUB` if ``hub``:
    returns (its folder, figures of the build or None when cached). The folder holds rootfs.ext4, vmlinuz, initrd.img
    and manifest.json (the packages and versions).
    Raises GuestError when mmdebstrap or mkfs.ext4 fails or overruns :data:`BUILD_S`."""
    packages = PACKAGES + ((JDK,) if jdk else ()) + (HUB if hub else ())
    image = CACHE / f"{suite}-{cache_key(suite, packages, agent=AGENT.read_bytes())}"
    if (image / "manifest.json").exists():
        return image, None
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{suite}-", dir=CACHE))  # ours: removed whatever happens
    try:
        root, started = work / "root", time.monotonic()
        _run(["mmdebstrap", "--variant=apt", "--include=" + ",".join(packages), suite, str(root), MIRROR],
             BUILD_S, f"mmdebstrap {suite}")
        debootstrap_s = time.monotonic() - started
        (root / "usr/local/sbin/labkit-agent").write_bytes(AGENT.read_bytes())
        units = root / "etc/systemd/system"
        (units / "labkit-agent.service").write_text(UNIT)
        (units / "mnt-labkit.mount").write_text(MOUNT)
        (root / "mnt/labkit").mkdir(parents=True, exist_ok=True)
        for unit in ("labkit-agent.service", "mnt-labkit.mount"):
            wants = units / "multi-user.target.wants"
            wants.mkdir(exist_ok=True)
            (wants / unit).symlink_to(f"/etc/systemd/system/{unit}")
        (root / "etc/hostname").write_text(f"labkit-{suite}\n")
        # as Debian's installer writes it (netcfg): the host name resolves, which JupyterHub's check of its proxy
        # needs when the hub listens on 0.0.0.0 (it connects to socket.gethostname(); without this line the guest's
        # make hub ended "Server at labkit-bookworm:8000 didn't respond in 10 seconds")
        (root / "etc/hosts").write_text(f"127.0.0.1\tlocalhost\n127.0.1.1\tlabkit-{suite}\n\n"
                                        "::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\n"
                                        "ff02::2\tip6-allrouters\n")
        versions = _run(["chroot", str(root), "dpkg-query", "-W", "-f", "${Package} ${Version}\\n"], 60, "dpkg-query")
        kernel = sorted((root / "boot").glob("vmlinuz-*"))[-1]
        shutil.copy(kernel, work / "vmlinuz")
        shutil.copy(root / "boot" / kernel.name.replace("vmlinuz", "initrd.img"), work / "initrd.img")
        root_bytes = int(_run(["du", "-sb", str(root)], 120, "du").stdout.split()[0])
        size_mib = root_bytes // 2**20 + FREE_MIB
        started_mkfs = time.monotonic()
        _run(["mkfs.ext4", "-q", "-F", "-L", "root", "-d", str(root), str(work / "rootfs.ext4"), f"{size_mib}M"],
             BUILD_S, "mkfs.ext4 -d")
        figures = {"mmdebstrap_s": round(debootstrap_s, 1), "mkfs_s": round(time.monotonic() - started_mkfs, 1),
                   "root_mib": round(root_bytes / 2**20), "image_mib": size_mib,
                   "image_allocated_mib": round(os.stat(work / "rootfs.ext4").st_blocks * 512 / 2**20),
                   "packages": len(versions.stdout.splitlines()), "kernel": kernel.name, "jdk": jdk, "hub": hub}
        shutil.rmtree(root)
        (work / "manifest.json").write_text(json.dumps({"suite": suite, "mirror": MIRROR, "include": packages,
                                                        "build": figures, "dpkg": versions.stdout.splitlines()}))
        work.rename(image)
        return image, figures
    finally:
        if work.exists():
            shutil.rmtree(work)


class Guest:
    """The image booted under TCG, its agent connected. Use as a context manager: on exit it is powered off and,
    after :data:`STOP_S`, killed; its run folder (snapshot, socket, console log kept in ``console_tail``) removed."""

    def __init__(self, image: Path, memory_mib: int = 1536, shares: dict = None, forward: tuple = None) -> None:
        """Boot ``image`` with ``memory_mib`` MiB. ``shares``: more folders of this machine shared read-only over 9p,
        ``{mount tag: path}`` (the guest mounts them itself, :meth:`mount_share`). ``forward``: ``(host port, guest
        port)``: QEMU's user networking instead of no network, that host port of 127.0.0.1 forwarded to the guest's
        port (the guest's address set by :meth:`network_up`); the guest then reaches what this machine reaches."""
        self.run_dir = Path(tempfile.mkdtemp(prefix="labkit-guest-"))
        self.console = self.run_dir / "console.log"
        sock_path = self.run_dir / "agent.sock"
        argv = ["qemu-system-x86_64", "-accel", "tcg", "-smp", "1", "-m", str(memory_mib), "-display", "none",
                "-no-reboot", "-monitor", "none", "-serial", f"file:{self.console}",
                "-nic", f"user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:{forward[0]}-:{forward[1]}" if forward
                else "none",
                "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
                "-append", "console=ttyS0 root=/dev/vda rw",
                "-drive", f"file={image / 'rootfs.ext4'},format=raw,if=virtio,snapshot=on",
                "-device", "virtio-serial-pci",
                "-chardev", f"socket,id=agent,path={sock_path},server=on,wait=on",
                "-device", "virtserialport,chardev=agent,name=labkit",
                "-virtfs", f"local,path={CHECKOUT},mount_tag=labkit,security_model=none,readonly=on"]
        for tag, path in (shares or {}).items():
            argv += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,readonly=on"]
        self.started = time.monotonic()
        self.qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.run_dir / "qemu.err", "w"),
                                     env={**os.environ, "TMPDIR": str(self.run_dir)})  # the snapshot's file
        try:
            self.sock = self._connect(sock_path)
            self.hello = self._read(BOOT_S, "the guest's boot to its agent")
            self.boot_s = time.monotonic() - self.started
        except BaseException:
            self.close()
            raise

    def _connect(self, path: Path) -> socket.socket:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.qemu.poll() is not None:
                raise GuestError(f"qemu exited ({self.qemu.returncode}): {(self.run_dir / 'qemu.err').read_text()}")
            try:
                sock = socket.socket(socket.AF_UNIX)
                sock.connect(str(path))
                self.buffer = b""
                return sock
            except OSError:
                sock.close()
                time.sleep(0.1)
        raise GuestError("qemu's agent socket did not appear in 30 s")

    def _read(self, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or self.qemu.poll() is not None:
                state = "running" if self.qemu.poll() is None else f"exited {self.qemu.returncode}"
                raise GuestError(f"{what}: no answer in {timeout:.0f} s (qemu {state}); console's end: "
                                 f"{self.console_tail()}")
            self.sock.settimeout(min(left, 5))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise GuestError(f"{what}: the agent's channel closed; console's end: {self.console_tail()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, argv: list, timeout: float = 120) -> dict:
        """Run ``argv`` in the guest as root: returns the agent's reply (rc, out, err, wall s in the guest). The
        agent kills the command after ``timeout`` s; raises GuestError when no reply comes 30 s after that."""
        self.sock.sendall((json.dumps({"argv": argv, "timeout": timeout}) + "\n").encode())
        return self._read(timeout + 30, f"{' '.join(argv)[:80]}")

    def check(self, argv: list, timeout: float = 120) -> str:
        """:meth:`run`, and its stdout; raises GuestError naming the command when it exits non-zero."""
        reply = self.run(argv, timeout)
        if reply["rc"] != 0:
            raise GuestError(f"in the guest, {' '.join(argv)[:200]} exited {reply['rc']}: "
                             f"{(reply['err'] or reply['out'])[-1500:]}")
        return reply["out"]

    def mount_share(self, tag: str, where: str) -> None:
        """Mount the share ``tag`` (``shares`` of the constructor) at ``where`` in the guest, read-only, and an
        overlay on it (its writes on the guest's disk, in ``/var/lib/labkit-overlay/<tag>``, gone with the guest's
        snapshot): the guest writes where a server would, this machine's folder is never written."""
        upper = f"/var/lib/labkit-overlay/{tag}"
        self.check(["sh", "-c", f"mkdir -p /mnt/{tag} {upper}/upper {upper}/work {where} && "
                    f"mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 {tag} /mnt/{tag} && "
                    f"chmod 755 {upper}/upper && mount -t overlay overlay -o lowerdir=/mnt/{tag},"
                    f"upperdir={upper}/upper,workdir={upper}/work {where}"], 120)

    def network_up(self) -> str:
        """Give the guest's one network card QEMU's user networking's address (10.0.2.15/24, gateway 10.0.2.2, DNS
        10.0.2.3: QEMU's built-in ones); returns the card's name. The image has no DHCP client."""
        links = json.loads(self.check(["ip", "-j", "link"], 60))
        card = next(link["ifname"] for link in links if link["ifname"] != "lo")
        self.check(["sh", "-c", f"ip link set {card} up && ip addr add 10.0.2.15/24 dev {card} && "
                    "ip route add default via 10.0.2.2 && echo 'nameserver 10.0.2.3' > /etc/resolv.conf"], 60)
        return card

    def console_tail(self, chars: int = 1500) -> str:
        """The end of the guest's serial console (kernel and systemd messages)."""
        try:
            return self.console.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> float:
        """Power the guest off (SIGKILL after :data:`STOP_S`), remove the run folder; returns the stop's seconds."""
        started = time.monotonic()
        connected = getattr(self, "sock", None) is not None
        if self.qemu.poll() is None and connected:
            try:
                self.sock.sendall((json.dumps({"argv": ["systemctl", "poweroff"], "timeout": 10}) + "\n").encode())
            except OSError:
                pass
        try:
            self.qemu.wait(STOP_S if connected else 0.1)  # unconnected, qemu waits for its socket: nothing to stop
        except subprocess.TimeoutExpired:
            self.qemu.kill()
            self.qemu.wait(10)
        if getattr(self, "sock", None) is not None:
            self.sock.close()
        self.last_console = self.console_tail(4000)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        return time.monotonic() - started

    def __enter__(self) -> "Guest":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def python_loop_here() -> float:
    """Seconds of :data:`LOOP` on this machine's Debian python3 (the guest's interpreter is Debian's too)."""
    return float(_run(["/usr/bin/python3", "-c", LOOP], 120, "the loop here").stdout)


def rehearse(suite: str, jdk: bool) -> dict:
    """One suite: build (or cache), boot, the loop, 9p, the contract, stop. Returns its figures; raises GuestError."""
    figures = {"suite": suite}
    started = time.monotonic()
    image, built = build(suite, jdk)
    figures["build"] = built or {"cached": True, **json.loads((image / "manifest.json").read_text())["build"]}
    figures["build_wall_s"] = round(time.monotonic() - started, 1)
    guest = Guest(image)
    try:
        figures["boot_to_agent_s"] = round(guest.boot_s, 1)
        figures["guest_uptime_at_hello_s"] = guest.hello["hello"]
        steps = {
            "facts": ["sh", "-c", "uname -r; systemctl --version | head -1; stat -fc %T /sys/fs/cgroup;"
                      " cat /sys/fs/cgroup/cgroup.controllers; nproc; free -m | sed -n 2p"],
            "python_loop": ["python3", "-c", LOOP],
            "read_checkout_9p": ["sh", "-c", "cd /mnt/labkit && tar cf - --exclude=./.venv --exclude=./.git . | wc -c"],
            "contract": ["python3", "/mnt/labkit/bench/guest_contract.py"],
        }
        figures["steps"] = {}
        for name, argv in steps.items():
            step_started = time.monotonic()
            reply = guest.run(argv, timeout=1200 if name == "contract" else 300)
            figures["steps"][name] = {"wall_s": round(time.monotonic() - step_started, 1), "rc": reply["rc"]}
            if reply["rc"] != 0:
                figures["steps"][name]["err"] = reply["err"][-1500:]
            if name == "contract" and reply["rc"] == 0:
                figures["contract"] = json.loads(reply["out"])
            elif name != "contract":
                figures["steps"][name]["out"] = reply["out"].strip()
        contract = figures.get("contract", {})
        figures["contract_passed"] = bool(contract) and all(
            check["pass"] for check in contract.values() if isinstance(check, dict))
        here = python_loop_here()
        there = float(figures["steps"]["python_loop"]["out"])
        figures["python_loop_s"] = {"here": round(here, 2), "guest": round(there, 2), "ratio": round(there / here, 1)}
    finally:
        figures["stop_s"] = round(guest.close(), 1)
        figures["qemu_exit"] = guest.qemu.returncode
    return figures


def main(argv: list = None) -> int:
    """Parse the arguments, check the tools, rehearse each suite in turn (one guest at a time), write the JSON.
    Returns 1 when a step failed or a property of the contract did not hold, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", nargs="+", choices=SUITES, default=["bookworm"])
    parser.add_argument("--jdk", action="store_true", help=f"add {JDK} to the image (the JVM's view of its limit)")
    parser.add_argument("--json", type=Path, default=CHECKOUT / "bench" / "results" / "guest.json")
    args = parser.parse_args(argv)
    if missing_tools():
        parser.error(f"missing {', '.join(missing_tools())}: {INSTALL}")
    if os.geteuid() != 0:
        parser.error("run as root: mmdebstrap builds a root file system owned by root")
    results = {"machine_cpus": os.cpu_count(), "suites": {}}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally-blocks stop the guest
    failed = False
    for suite in args.suite:
        try:
            results["suites"][suite] = rehearse(suite, args.jdk)
            failed |= not results["suites"][suite]["contract_passed"]
        except GuestError as error:
            results["suites"][suite] = {"error": str(error)}
            failed = True
        print(json.dumps(results["suites"][suite], indent=1))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
