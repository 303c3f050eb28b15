"""What the hub tests share (tests/test_hub.py, tests/test_hub_room.py): their deadlines and limits, the skip when the
machine cannot run a hub, and the steps of an attendee's lab (sign in and wait, ask for the broker, run a script as
them in their sandbox). Each is a real action on a real hub: nothing here fakes one."""

from __future__ import annotations

import os
import pwd
import subprocess

import psutil
import pytest

from labkit.broker import runtime
from labkit.core.waiting import wait_until
from labkit.hub import names, observed, sandbox, users
from labkit.lab import server as lab
from labkit_dev import drive
from tests.probes import CONNECT

HUB_START_S = 180  # a cold hub on a loaded 2-core machine took 20 s; the set-up before it is not counted here
LAB_START_S = 420  # sign-in to the file browser (JupyterLab; the broker starts with a notebook): 2 cores
#: The test hub's limits per attendee: notebook 00's lab (JupyterLab, a kernel, the broker) fits, a hog or a fork
#: bomb reaches them in seconds.
MEMORY_LIMIT_MIB, TASK_LIMIT = 1536, 1024


def skip_unless_hub_can_run() -> None:
    from labkit_dev.browser import missing

    if os.geteuid() != 0:
        pytest.skip("the hub test makes Unix users and runs JupyterHub as root: run it as root (sudo make test)")
    if (why := missing()):
        pytest.skip(f"the hub test signs in through a browser: it {why}")


def wait_for_lab(page, hub: dict, name: str) -> None:
    drive.wait_for_lab(page, hub, name, LAB_START_S)


def ask_for_broker(entry: pwd.struct_passwd, hub: dict) -> None:
    """Ask for the attendee's lab broker as their first kernel does (labkit.lab.server.want_broker, as them, in their lab)."""
    as_attendee(entry, hub, "from labkit.lab import server as lab; lab.want_broker()", env=lab_env(entry, hub))


def broker_state(entry: pwd.struct_passwd) -> dict:
    """The attendee's lab broker's state once it names the broker's address (:func:`ask_for_broker` first)."""
    assert wait_until(lambda: observed.ready_state(entry.pw_dir, entry.pw_uid), lab.BROKER_READY_S + 30, 1.0), \
        f"{entry.pw_name}'s broker did not start"
    return observed.ready_state(entry.pw_dir, entry.pw_uid)


def broker_jvms(uid: int) -> list[psutil.Process]:
    """The broker JVMs among ``uid``'s processes (main class: the lab's launcher, or Kafka's)."""
    return [p for p in users.processes_of(uid)
            if any(arg in ("labkit.broker.Launcher", "kafka.Kafka") for arg in p.cmdline())]


def listening(uid: int) -> set[int]:
    """The TCP ports listening in attendee ``uid``'s network namespace (``ss``, iproute2, run inside it)."""
    out = subprocess.run(["ip", "netns", "exec", sandbox.netns(uid), "ss", "-Htln"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if line.strip()}


def lab_env(entry: pwd.struct_passwd, hub: dict) -> dict[str, str]:
    """What the spawner gives an attendee's lab that a process of theirs needs to start their broker."""
    return {"LABKIT_HOME": os.path.join(entry.pw_dir, "labkit"), runtime.SHARED_CACHE_ENV: str(hub["cache"]),
            "LABKIT_BROKER_HEAP_MB": "256"}


#: Run as an attendee: try to read each file of ``argv[3:]`` (a folder: list it), then to SIGTERM the pid that is
#: ``argv[1]``, then to connect to each address of ``argv[2]`` (``host:port``, comma-separated); one word per try.
PROBE = """
import os, signal, sys
pid, addresses, paths = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
for path in paths:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path).read()
        print("read")
    except PermissionError:
        print("denied")
try:
    os.kill(pid, signal.SIGTERM)
    print("signalled")
except PermissionError:
    print("denied")
sys.argv[1:] = addresses
""" + CONNECT


def as_attendee(entry: pwd.struct_passwd, hub: dict, script: str, *args: str, check: bool = True, timeout_s: float = 180,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``script`` with the shared venv's Python as the attendee ``entry`` would from their lab: in their sandbox
    (network namespace, cgroups, private /tmp: :func:`labkit.hub.sandbox.enter_command`), as their uid."""
    command = [*sandbox.enter_command(entry.pw_uid, entry.pw_gid, sandbox.private_root(hub["state"])),
               os.path.join(hub["prefix"], "venv", "bin", "python"), "-c", script, *args]
    done = subprocess.run(command, preexec_fn=lambda: sandbox.join_cgroups(entry.pw_uid), capture_output=True,
                          text=True, timeout=timeout_s,
                          env={"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir, **(env or {})})
    assert not check or done.returncode == 0, done.stdout + done.stderr
    return done


def wait_for_server(page, hub: dict, name: str) -> None:
    """:func:`labkit_dev.drive.wait_for_server` within the hub tests' :data:`LAB_START_S`."""
    drive.wait_for_server(page, hub, name, LAB_START_S)


def join_to_server(page, hub: dict, name: str, next_path: str = "") -> float:
    """Sign ``name`` in on ``page`` without drawing their lab (:func:`labkit_dev.drive.without_lab_drawn`) and wait
    until their server answers with their files (:func:`wait_for_server`); the submit's time (``time.monotonic``, s)."""
    drive.without_lab_drawn(page)
    submitted = drive.join(page, hub, name, next_path)
    wait_for_server(page, hub, name)
    return submitted


def ensure_lab(hub: dict, name: str, page=None) -> pwd.struct_passwd:
    """Sign ``name`` in and wait for their lab and its broker (started unless it runs already); their Unix user's
    entry. On ``page`` when given, the lab is drawn (:func:`wait_for_lab`) and left open: JupyterLab's polling through
    the proxy is activity, so the hub's culler leaves the lab be while the page is open. Else in a browser of its own,
    closed after, where the lab is not drawn (:func:`labkit_dev.drive.without_lab_drawn`): their server answering with
    their files is what is waited for (the tests that look at the lab itself draw it)."""
    from labkit_dev.browser import chromium

    if page is not None:
        drive.join(page, hub, name)
        wait_for_lab(page, hub, name)
    else:
        with chromium() as page:
            join_to_server(page, hub, name)
    entry = pwd.getpwnam(names.unix_name(name))
    ask_for_broker(entry, hub)
    broker_state(entry)
    return entry
