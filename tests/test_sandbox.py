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

import pytest

from labkit.broker.ports import free_port
from labkit.errors import LabkitError
from labkit.hub import firewall, sandbox
from tests.probes import CONNECT

#: A Python every user may run (the test venv's lives under /root, mode 0700).
SYSTEM_PYTHON = "/usr/bin/python3"


def test_each_attendee_uid_has_an_address_of_its_own_and_no_other_uid_has_one():
    addresses = [sandbox.address(uid) for uid in sandbox.ATTENDEE_UIDS]
    assert len(set(addresses)) == len(addresses) and sandbox.GATEWAY not in addresses
    assert sandbox.address(sandbox.ATTENDEE_UIDS.start) == "10.127.1.2"
    for uid in (0, 1000, sandbox.ATTENDEE_UIDS.stop):
        with pytest.raises(LabkitError, match="not an attendee's uid.*userdel"):
            sandbox.address(uid)


@pytest.fixture
def two_attendees(tmp_path):
    """Attendees A and B (the two highest uids) with sandboxes as the spawner makes them, under two hubs' walls;
    ``{"a", "b", "tmp_root", "tables"}``. Everything removed after."""
    if os.geteuid() != 0:
        pytest.skip("the sandbox test makes network namespaces, cgroups and nftables tables: run it as root")
    try:
        firewall.check()
        sandbox.check()
    except LabkitError as exc:
        pytest.skip(f"attendees cannot be kept apart here: {exc}")
    a, b = sandbox.ATTENDEE_UIDS.stop - 1, sandbox.ATTENDEE_UIDS.stop - 2
    tmp_root = tmp_path / "private"
    tables = [f"{firewall.TABLE_PREFIX}t{secrets.token_hex(4)}" for _ in range(2)]
    sandbox.ensure_gateway()
    limits = sandbox.Limits(memory_mib=512, tasks=256)
    try:
        for table in tables:  # two hubs on one machine: both tables apply to every packet
            firewall.wall(table, sandbox.GATEWAY)
        for uid in (a, b):
            sandbox.prepare(uid, uid, limits, tmp_root)
        yield {"a": a, "b": b, "tmp_root": tmp_root, "tables": tables}
    finally:
        for uid in (a, b):
            sandbox.release(uid)
        for table in tables:
            firewall.remove_table(table)


def _in(attendees: dict, uid: int, script: str, *args: str, **popen) -> subprocess.CompletedProcess:
    """Run ``script`` with the system's Python as ``uid`` in its sandbox, as the spawner starts a lab."""
    return subprocess.run([*sandbox.enter_command(uid, uid, attendees["tmp_root"]), SYSTEM_PYTHON, "-c", script,
                           *args], preexec_fn=lambda: sandbox.join_cgroups(uid), capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"}, **popen)


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
    assert (sandbox.private_tmp(two_attendees["tmp_root"], a) / "tmp" / "mine").exists()
    assert (sandbox.private_tmp(two_attendees["tmp_root"], a) / "info" / "memory.json").exists()


def test_removing_an_attendee_removes_its_files_in_private_and_shared_writable_folders(two_attendees):
    a, b = two_attendees["a"], two_attendees["b"]
    _in(two_attendees, a, "open('/tmp/left', 'w').write('x'); open('/run/lock/labkit-test-a', 'w').write('x')")
    _in(two_attendees, b, "open('/run/lock/labkit-test-b', 'w').write('x')")
    sandbox.release(a)
    assert not sandbox.exists(a) and not any(group.exists() for group in sandbox.cgroups(a))
    removed = sandbox.remove_files(a, two_attendees["tmp_root"])
    assert sorted(removed) == sorted([str(sandbox.private_tmp(two_attendees["tmp_root"], a)),
                                      "/run/lock/labkit-test-a"])
    assert Path("/run/lock/labkit-test-b").exists()  # B's is B's
    Path("/run/lock/labkit-test-b").unlink()


def test_a_lab_s_veth_adds_no_address_to_the_machine(two_attendees, tmp_path):
    """Making and removing a sandbox changes no address of the machine (``ip monitor address``): a browser on the
    machine (another test's Chromium) takes an address change for a network change and fails its loads
    (ERR_NETWORK_CHANGED, met in make test while the hub test made its labs)."""
    uid = sandbox.ATTENDEE_UIDS.stop - 3
    monitor = subprocess.Popen(["ip", "-o", "monitor", "address"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # listening
        sandbox.prepare(uid, uid, sandbox.Limits(memory_mib=512, tasks=256), two_attendees["tmp_root"])
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
