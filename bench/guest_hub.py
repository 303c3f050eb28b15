"""A real ``make hub`` in the stock Debian 12 guest, one attendee signed in from this machine (issue 64, last step).

The guest is ``bench/guest.py``'s image with :data:`bench.guest.HUB` (``make``, ``nodejs``, ``sudo``, ``openssl``)
booted under TCG with QEMU's user networking, this machine's 127.0.0.1:<free port> forwarded to the guest's port
:data:`HUB_PORT`. What a first ``make hub`` would install (pip, npm, the shared cache's JVM work) comes from this
machine, whose Debian 12 has the guest's ``/usr/bin/python3.11`` (the shared venv was made by it):

* the checkout: a copy of the files git lists (tracked and untracked, not ignored), the proxy's npm install
  (``.hub/proxy``) and ``.venv`` a link to the shared venv (``make hub`` runs ``.venv/bin/python -m labkit.hub``; the
  checkout's own venv here is not Debian's Python), shared over 9p at :data:`GUEST_CHECKOUT`;
* the shared install (``/opt/labkit``: venv, copy of labkit, cache), copied under its set-up lock after
  :func:`labkit.hub.install.install_shared` ran from that checkout's copy (nothing to do when the shared copy already
  holds the same files; else the copy and the cache's refill, under ``/tmp/heavy.lock``), shared over 9p at the same
  path: its stamp then matches and the guest's ``make hub`` installs nothing.

Each share is read-only with an overlay on it in the guest (:meth:`bench.guest.Guest.mount_share`). Then, timed: the
run-sheet's ``make doctor`` (its ``hub backend`` line), ``sudo LABKIT_HUB_PASSWORD=... LABKIT_HUB_ADMIN_PASSWORD=...
make hub ARGS="--ip 0.0.0.0 --port 8000"`` in the background until it prints "The hub is ready"; one attendee's first
sign-in from this machine through the forwarded port in headless Chromium (``labkit_dev.drive.sign_in``) until their
JupyterLab's file browser lists ``00_tour.ipynb`` (a screenshot); their lab's unit read with ``systemctl show`` and its
cgroup and namespace, checked against :func:`labkit.hub.unit.lab_properties` of the hub's limits; Ctrl-C (SIGINT to
``make hub``'s process group, as a terminal sends it) and ``make hub-end ROOM=<the room>``.

``--literal``: afterwards, a fresh guest with nothing from this machine but the checkout's files, the run-sheet's
first section as a new instructor types it, each command with its deadline (:data:`LITERAL_S`), until one fails or
the time is up: the JSON says where it stopped.

Run as root: ``.venv/bin/python bench/guest_hub.py [--literal]``; figures into ``bench/results/guest-hub.json``,
the screenshot into ``bench/results/guest-hub.png``. Every step has a deadline; the guest is always stopped.
"""

import argparse
import filecmp
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.guest import CHECKOUT, GuestError, Guest, build  # noqa: E402
from labkit.broker.ports import free_port  # noqa: E402
from labkit.hub import install, rootlock, sandbox, unit  # noqa: E402
from labkit.hub.config import MEMORY_MIB, TASKS  # noqa: E402
from labkit_dev import drive  # noqa: E402

GUEST_CHECKOUT = "/srv/labkit"
HUB_PORT = 8000
PREFIX = install.DEFAULT_PREFIX
#: Seconds: the hub's start until "The hub is ready", the attendee's sign-in until their file browser, each stop.
READY_S, LAB_S, STOP_S = 1200, 1200, 300
#: Seconds the literal run-sheet may take in all.
LITERAL_S = 1500
ATTENDEE = "ada"
GUEST_LOG = "/var/log/make-hub.log"
RESULTS = CHECKOUT / "bench" / "results"


def git_files(repo: Path) -> list:
    """The files git lists in ``repo`` (tracked and untracked, not ignored) that exist."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True, timeout=60).stdout.decode()
    return [name for name in out.split("\0") if name and (repo / name).is_file()]


def stage_checkout(target: Path) -> None:
    """The guest's checkout in ``target``: the files git lists, ``.hub/proxy`` (the proxy's npm install), ``.venv`` a
    link to the shared venv. Raises GuestError when this checkout has no proxy installed (``make hub`` once here)."""
    install.copy_files(CHECKOUT, target, git_files(CHECKOUT))
    proxy = CHECKOUT / ".hub" / "proxy"
    if not install.proxy_command().exists():
        raise GuestError(f"no proxy installed in {proxy}: run make hub here once")
    (target / ".hub").mkdir(mode=0o700)
    shutil.copytree(proxy, target / ".hub" / "proxy", symlinks=True)
    (target / ".venv").symlink_to(PREFIX / "venv")


def shared_files(root: Path) -> set:
    """What the shared install's copy holds of the checkout ``root``: its files under labkit/, jvm/ and notebooks/
    (caches left out) and pyproject.toml, relative to ``root``."""
    return {str(p.relative_to(root)) for d in install.COPIED for p in (root / d).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts} | {"pyproject.toml"}


def differing(checkout: Path) -> list:
    """The files of ``checkout``'s :func:`shared_files` that the shared install's copy (``<prefix>/src``) lacks, has
    more or holds otherwise: none, and its stamp matches and a ``make hub`` from ``checkout`` copies and refills
    nothing."""
    ours, theirs = shared_files(checkout), shared_files(PREFIX / "src")
    return sorted((ours ^ theirs) | {f for f in ours & theirs
                                     if not filecmp.cmp(checkout / f, PREFIX / "src" / f, shallow=False)})


def stage_prefix(checkout: Path, target: Path, refresh: bool) -> dict:
    """The shared install as ``checkout`` needs it, copied into ``target`` under its set-up lock (the venv as hard
    links, the rest copied). Where ``checkout`` differs from the shared copy: with ``refresh``, this machine's set-up
    (:func:`labkit.hub.install.install_shared` run from ``checkout``, under ``/tmp/heavy.lock``: the copy and the
    cache's JVM work) first; without, ``checkout``'s labkit, jvm/, notebooks/ and pyproject.toml are replaced by the
    shared copy's (the guest then runs the labkit that this machine's last ``make hub`` installed, and another
    engineer's hub running from ``/opt/labkit`` is left alone). Returns the figures (the files that differed,
    seconds)."""
    started = time.monotonic()
    figures = {"differing": differing(checkout), "refreshed": False}
    if figures["differing"] and refresh:
        subprocess.run(["flock", "/tmp/heavy.lock", str(install.venv_python(PREFIX)), "-c",
                        "from labkit.hub import install; install.install_shared()"], cwd=checkout, check=True,
                       timeout=3600,
                       env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
        figures["refreshed"] = True
    with rootlock.held(install.setup_lock(PREFIX), install.LOCK_WAIT_S, f"The set-up's lock of {PREFIX}"):
        if differing(checkout):
            if refresh:
                raise GuestError(f"{PREFIX}/src changed under the stage: run again")
            for name in (*install.COPIED, "pyproject.toml"):
                (shutil.rmtree if (checkout / name).is_dir() else Path.unlink)(checkout / name)
            install.copy_files(PREFIX / "src", checkout, sorted(shared_files(PREFIX / "src")))
            figures["labkit_from"] = (f"{PREFIX}/src, copied {time.ctime((PREFIX / 'src').stat().st_mtime)} by this "
                                      "machine's last make hub")
        target.mkdir(mode=0o755)
        subprocess.run(["cp", "-al", str(PREFIX / "venv"), str(target / "venv")], check=True, timeout=600)
        subprocess.run(["cp", "-a", str(PREFIX / "src"), str(PREFIX / "cache"), str(PREFIX / ".installed.json"),
                        str(target)], check=True, timeout=600)
    figures["seconds"] = round(time.monotonic() - started, 1)
    return figures


def timed(steps: dict, name: str, action, *args, **kwargs):
    """Run ``action(*args, **kwargs)``, record its wall seconds as ``steps[name]``; returns its result."""
    print(f"{time.strftime('%H:%M:%S')} {name}", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        return action(*args, **kwargs)
    finally:
        steps[name] = round(time.monotonic() - started, 1)


def wait_for_line(guest: Guest, pattern: str, timeout_s: float, process: str = "") -> str:
    """Poll ``make hub``'s output in the guest every 5 s until a line matches ``pattern``; returns the output.
    Raises GuestError after ``timeout_s`` s, or when ``process`` (a pid) has ended first (the output's end quoted)."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = guest.run(["tail", "-c", "16000", GUEST_LOG], 60)["out"]  # a reply's size bounded
        if re.search(pattern, out, re.M):
            return out
        ended = process and guest.run(["kill", "-0", process], 30)["rc"] != 0
        if ended or time.monotonic() > deadline:
            raise GuestError(f"make hub {'ended' if ended else f'did not say {pattern!r} in {timeout_s:g} s'}:\n"
                             f"{out[-3000:]}")
        time.sleep(5)


#: How ``systemctl show`` prints each property :func:`labkit.hub.unit.lab_properties` sets (the name it shows it
#: under, and how its value reads there).
def shown(key: str, value: str) -> tuple:
    """The name and value ``systemctl show`` gives the unit property ``key=value``."""
    if key in ("MemoryMax", "MemorySwapMax"):
        number = int(value[:-1]) << 20 if value.endswith("M") else int(value)
        return key, str(number)
    if key == "TimeoutStopSec":
        return "TimeoutStopUSec", value
    return key, value


def check_unit(guest: Guest, uid: int, home: str) -> dict:
    """Attendee ``uid``'s lab unit as systemd runs it (``systemctl show``), its cgroup files and its main process's
    network namespace, against :func:`labkit.hub.unit.lab_properties` with the hub's default limits."""
    name = unit.unit_name(uid)
    wanted = dict(shown(*p.split("=", 1)) for p in unit.lab_properties(
        uid, home, sandbox.netns(uid), "<info>", MEMORY_MIB, TASKS, sandbox.TMP_MIB))
    paths = {k: wanted.pop(k) for k in ("BindPaths", "BindReadOnlyPaths", "TemporaryFileSystem")}
    keys = [*wanted, *paths, "MainPID", "ActiveState", "Slice", "User", "ControlGroup"]
    out = guest.check(["systemctl", "show", name, *[f"--property={k}" for k in keys]], 60)
    got = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    group = f"/sys/fs/cgroup{got.get('ControlGroup', '')}"
    files = guest.check(["sh", "-c", f"cd {group} && grep -H . memory.max memory.swap.max pids.max cpu.weight"], 60)
    netns = guest.run(["ip", "netns", "identify", got.get("MainPID", "0")], 60)["out"].strip()
    checks = {key: {"wanted": value, "shown": got.get(key), "pass": got.get(key) == value}
              for key, value in wanted.items()}
    checks["BindPaths"] = {"wanted": home, "shown": got.get("BindPaths"),
                           "pass": got.get("BindPaths", "").split(":")[0] == home}
    checks["BindReadOnlyPaths"] = {"wanted": "<the hub's info folder>:/run/labkit",
                                   "shown": got.get("BindReadOnlyPaths"),
                                   "pass": ":/run/labkit" in got.get("BindReadOnlyPaths", "")}
    tmp = paths["TemporaryFileSystem"]
    checks["TemporaryFileSystem"] = {"wanted": tmp, "shown": got.get("TemporaryFileSystem"),
                                     "pass": all(f.split(":")[0] in got.get("TemporaryFileSystem", "")
                                                 for f in tmp.split())}
    cgroup = dict(line.split(":", 1) for line in files.split())
    checks["cgroup files"] = {"shown": cgroup, "pass": cgroup == {
        "memory.max": str(MEMORY_MIB << 20), "memory.swap.max": "0", "pids.max": str(TASKS),
        "cpu.weight": str(unit.CPU_WEIGHT)}}
    checks["network namespace of MainPID"] = {"wanted": sandbox.netns(uid), "shown": netns,
                                              "pass": netns == sandbox.netns(uid)}
    return {"unit": name, "state": got.get("ActiveState"), "slice": got.get("Slice"), "user": got.get("User"),
            "checks": checks, "pass": all(c["pass"] for c in checks.values())}


def sign_in(url: str, code: str, screenshot: Path, steps: dict) -> dict:
    """One attendee's first sign-in at ``url`` (workshop ``code``) in headless Chromium, until their file browser
    lists notebook 00; a screenshot of it to ``screenshot``. Returns what the page showed."""
    from labkit_dev.browser import chromium

    with chromium() as page:
        page.set_default_timeout(LAB_S * 1000)
        own = secrets.token_urlsafe(12)
        timed(steps, "login_page_and_submit", drive.sign_in, page, url, ATTENDEE, own, code=code)
        started = time.monotonic()
        try:
            page.wait_for_selector(drive.FILE_BROWSER, timeout=LAB_S * 1000)
        finally:
            steps["submit_to_file_browser"] = round(time.monotonic() - started, 1)
            page.screenshot(path=str(screenshot))
        return {"url": page.url, "title": page.title(), "lab": page.url.startswith(f"{url}user/{ATTENDEE}/lab")}


def hub_run(suite: str, screenshot: Path, refresh: bool = False) -> dict:
    """Stage, boot, make doctor, make hub, the attendee, their unit, Ctrl-C, make hub-end; returns the figures."""
    figures, steps = {"suite": suite}, {}
    figures["steps"] = steps
    image, built = timed(steps, "image", build, suite, hub=True)
    figures["image"] = built or {"cached": True, **json.loads((image / "manifest.json").read_text())["build"]}
    stage = Path(tempfile.mkdtemp(prefix="labkit-guest-hub-", dir="/var/tmp"))
    guest = None
    try:
        stage.chmod(0o755)
        timed(steps, "stage_checkout", stage_checkout, stage / "checkout")
        figures["stage_prefix"] = timed(steps, "stage_prefix", stage_prefix, stage / "checkout", stage / "opt",
                                        refresh)
        port = free_port()
        guest = timed(steps, "boot_to_agent", Guest, image, 3072,
                      {"hubsrc": stage / "checkout", "hubopt": stage / "opt"}, (port, HUB_PORT))
        timed(steps, "network_and_mounts", lambda: (guest.network_up(), guest.mount_share("hubopt", str(PREFIX))))
        timed(steps, "checkout_to_disk", guest.check, [  # on the guest's disk, as a clone is (no 9p per file)
            "sh", "-c", f"mkdir -p /mnt/hubsrc && mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 "
            f"hubsrc /mnt/hubsrc && cp -a /mnt/hubsrc {GUEST_CHECKOUT} && touch {GUEST_CHECKOUT}/.venv/.installed"],
            600)
        proxy = f"{GUEST_CHECKOUT}/.hub/proxy/node_modules/configurable-http-proxy/lib/configproxy.js"
        for start in ("node_loads_proxy_first", "node_loads_proxy_second"):  # JupyterHub waits 10 s for its proxy
            timed(steps, start, guest.check, ["node", "-e", f"import('{proxy}')"], 300)
        doctor = timed(steps, "make_doctor", guest.run, ["make", "-C", GUEST_CHECKOUT, "doctor"], 900)
        figures["make_doctor"] = {"rc": doctor["rc"], "hub_backend": [line for line in doctor["out"].splitlines()
                                                                     if "hub backend" in line],
                                  "out_tail": doctor["out"][-2500:], "err_tail": doctor["err"][-1500:]}
        code, admin = secrets.token_urlsafe(9), secrets.token_urlsafe(32)
        # as from a terminal: a session of its own, SIGINT not ignored (a non-interactive shell's background job
        # starts with SIGINT ignored, POSIX's "asynchronous lists")
        pid = guest.check(["sh", "-c", f"cd {GUEST_CHECKOUT} && python3 -c 'import os, signal, sys; "
                           "signal.signal(signal.SIGINT, signal.SIG_DFL); os.setsid(); os.execvp(sys.argv[1], "
                           f"sys.argv[1:])' sudo LABKIT_HUB_PASSWORD='{code}' LABKIT_HUB_ADMIN_PASSWORD='{admin}' "
                           f"make hub ARGS='--ip 0.0.0.0 --port {HUB_PORT}' > {GUEST_LOG} 2>&1 < /dev/null & "
                           "echo $!"], 60).strip()
        out = timed(steps, "make_hub_to_ready", wait_for_line, guest, r"^The hub is ready", READY_S, pid)
        first = guest.check(["head", "-n", "12", GUEST_LOG], 60)
        figures["make_hub_lines"] = first.splitlines()
        figures["make_hub_ready_line"] = re.search(r"^The hub is ready.*", out, re.M).group(0)
        room = re.search(r"^New room (\S+):", first, re.M).group(1)
        url = f"http://127.0.0.1:{port}/"
        try:
            figures["attendee"] = sign_in(url, code, screenshot, steps)
        except Exception as error:  # the page's state is in the screenshot; the hub's log says the rest
            figures["attendee"] = {"error": str(error)[:2000]}
        log = guest.run(["sh", "-c", f"grep -a {ATTENDEE} {GUEST_LOG} | tail -n 30 | cut -c1-400"], 60)["out"]
        figures["hub_log_attendee"] = log.splitlines()
        user = guest.run(["getent", "passwd", f"lab-{ATTENDEE}"], 60)["out"].split(":")
        if len(user) > 5:
            figures["unit"] = timed(steps, "systemctl_show", check_unit, guest, int(user[2]), user[5])
        # Ctrl-C in make hub's terminal: SIGINT to the terminal's foreground process group, which under Debian's
        # sudo (Defaults use_pty) is make's in the terminal sudo made (measured: a SIGINT to sudo's own group left
        # the hub running for 300 s)
        group = guest.check(["ps", "-o", "pgid=", "-C", "make"], 30).split()[0]
        guest.check(["kill", "-INT", f"-{group}"], 30)
        print(f"{time.strftime('%H:%M:%S')} ctrl_c_to_exit", file=sys.stderr, flush=True)
        started = time.monotonic()
        while guest.run(["kill", "-0", pid], 30)["rc"] == 0 and time.monotonic() - started < STOP_S:
            time.sleep(2)
        steps["ctrl_c_to_exit"] = round(time.monotonic() - started, 1)
        figures["after_ctrl_c"] = guest.run(["tail", "-n", "8", GUEST_LOG], 60)["out"].splitlines()
        end = timed(steps, "make_hub_end", guest.run, ["make", "-C", GUEST_CHECKOUT, "hub-end", f"ROOM={room}"],
                    STOP_S)
        figures["make_hub_end"] = {"rc": end["rc"], "out": end["out"].splitlines()[-12:], "err": end["err"][-800:]}
        left = guest.run(["sh", "-c", f"getent passwd lab-{ATTENDEE}; systemctl list-units --no-legend "
                          "'labkit-lab-*'"], 60)["out"]
        figures["left_after_hub_end"] = left.strip()
    except (GuestError, subprocess.SubprocessError, OSError, AttributeError) as error:  # AttributeError: no room line
        figures["error"] = str(error)[-3000:]
    finally:
        if guest is not None:
            try:
                figures["hub_log_tail"] = guest.run(["sh", "-c", f"tail -n 40 {GUEST_LOG} | cut -c1-400"],
                                                    60)["out"].splitlines()
            except GuestError as error:
                figures["hub_log_tail"] = [f"(not read: {error})"[:1000]]
            steps["stop_guest"] = round(guest.close(), 1)
            figures["qemu_exit"] = guest.qemu.returncode
        shutil.rmtree(stage, ignore_errors=True)
    return figures


#: What a new instructor runs on a stock server, in the run-sheet's order (docs/instructor.md, "A room on one server"):
#: the packages first, then ``make doctor``, then ``make hub``. Each ``(name, shell command, seconds)``; the checkout
#: is a copy of this one's files at ``/root/labkit`` (for ``git clone``: GitHub is not reached from here).
LITERAL = (
    ("make_doctor_on_the_stock_server", "cd /root/labkit && make doctor", 600),
    ("apt_get_install", "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
     "make python3-venv npm default-jdk-headless maven", 1500),
    ("make_doctor", "cd /root/labkit && make doctor", 3600),
    ("make_hub", "cd /root/labkit && sudo LABKIT_HUB_PASSWORD=$CODE LABKIT_HUB_ADMIN_PASSWORD=$ADMIN timeout 1500 "
     "make hub ARGS='--ip 0.0.0.0 --port 8000'", 1600),
)


def literal(suite: str) -> dict:
    """The run-sheet's first section as a new instructor types it (:data:`LITERAL`) in a fresh guest of the stock
    image (no package of :data:`bench.guest.HUB`), with QEMU's user networking (Debian's archive, PyPI, npm's
    registry and Maven Central as this machine reaches them), until a command fails where the run-sheet says it
    should not, or :data:`LITERAL_S` seconds are spent. Returns each command's seconds, exit status and output's end."""
    figures = {"suite": suite, "commands": {}}
    image, _ = build(suite)
    stage = Path(tempfile.mkdtemp(prefix="labkit-guest-literal-", dir="/var/tmp"))
    guest, started = None, time.monotonic()
    try:
        install.copy_files(CHECKOUT, stage / "labkit", git_files(CHECKOUT))
        guest = Guest(image, 3072, {"plain": stage / "labkit"}, (free_port(), HUB_PORT))
        figures["boot_to_agent_s"] = round(guest.boot_s, 1)
        guest.network_up()
        guest.check(["sh", "-c", "mkdir -p /mnt/plain && mount -t 9p -o trans=virtio,version=9p2000.L,ro "
                     "plain /mnt/plain && cp -a /mnt/plain /root/labkit"], 300)
        env = f"CODE={secrets.token_urlsafe(9)} ADMIN={secrets.token_urlsafe(32)}; export CODE ADMIN; "
        for name, command, timeout in LITERAL:
            left = LITERAL_S - (time.monotonic() - started)
            if left < 60:
                figures["stopped"] = f"before {name}: the {LITERAL_S} s for the run-sheet were spent"
                break
            step_started = time.monotonic()
            reply = guest.run(["sh", "-c", env + command + " 2>&1"], min(timeout, left))
            figures["commands"][name] = {"command": command, "rc": reply["rc"], "timeout": reply.get("timeout", False),
                                         "wall_s": round(time.monotonic() - step_started, 1),
                                         "out_tail": reply["out"][-2500:].splitlines()}
            if reply.get("timeout"):
                figures["stopped"] = f"{name}: no end within {min(timeout, left):.0f} s"
                break
            if reply["rc"] != 0 and name != "make_doctor_on_the_stock_server":
                figures["stopped"] = f"{name}: exit {reply['rc']}"
                break
    except (GuestError, subprocess.SubprocessError, OSError) as error:
        figures["error"] = str(error)[-3000:]
    finally:
        if guest is not None:
            figures["stop_guest_s"] = round(guest.close(), 1)
        shutil.rmtree(stage, ignore_errors=True)
    figures["wall_s"] = round(time.monotonic() - started, 1)
    return figures


def main(argv: list = None) -> int:
    """Parse the arguments, run :func:`hub_run` (and :func:`literal` with ``--literal``), write the JSON. Returns 1
    when a step failed or the unit's properties did not hold."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="bookworm")
    parser.add_argument("--literal", action="store_true", help="then the run-sheet's commands in a fresh guest")
    parser.add_argument("--refresh", action="store_true", help="refresh /opt/labkit here from the checkout first "
                        "(under /tmp/heavy.lock) where it differs, instead of running the labkit it holds")
    parser.add_argument("--json", type=Path, default=RESULTS / "guest-hub.json")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root (the stage copies root's shared install; the guest's make hub runs as root)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally-blocks stop the guest
    results = {"machine_cpus": os.cpu_count(), "load_at_start": os.getloadavg()}  # others' runs slow TCG down
    try:
        results["hub"] = hub_run(args.suite, args.json.with_suffix(".png"), args.refresh)
    except (GuestError, subprocess.SubprocessError, OSError) as error:
        results["hub"] = {"error": str(error)[-3000:]}
    results["load_after_hub"] = os.getloadavg()
    print(json.dumps(results["hub"], indent=1))
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.literal:
        results["literal"] = literal(args.suite)
        results["load_after_literal"] = os.getloadavg()
        print(json.dumps(results["literal"], indent=1))
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0 if results["hub"].get("unit", {}).get("pass") and "lab" in results["hub"].get("attendee", {}) else 1


if __name__ == "__main__":
    sys.exit(main())
