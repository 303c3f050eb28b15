"""The hub's wall (labkit/hub/firewall.py): its tables' names, and, on a real namespace, what an attendee's lab
reaches of the machine (only the hub's own sockets, issue 63) and the wall made again when it vanished. The rules
against another attendee are tested in tests/test_sandbox.py (two attendees under two hubs' walls at once).

The namespace tests need root, ``ip`` and nftables (skipped otherwise, saying why); they use an attendee uid no other
test uses (no Unix user needed: ``setpriv`` takes a bare uid), a table of their own and a private temporary root
under pytest's, and remove all of it. They never flush the machine's whole ruleset (other hubs' tables on this
machine would go with it): they remove or flush their own table, which is what ``nft flush ruleset`` does to it.
"""

from __future__ import annotations

import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from labkit.broker.ports import free_port
from labkit.hub import firewall, sandbox
from tests.probes import CONNECT, skip_unless_sandbox_can_run

#: A Python every user may run (the test venv's lives under /root, mode 0700).
SYSTEM_PYTHON = "/usr/bin/python3"
#: An attendee uid no other test uses.
UID = sandbox.ATTENDEE_UIDS.stop - 6


def test_one_table_per_hub():
    assert firewall.table_name("/a/state") == firewall.table_name("/a/state") != firewall.table_name("/b/state")
    assert firewall.table_name("/a/state").startswith(firewall.TABLE_PREFIX)


@pytest.fixture
def lab():
    """Attendee :data:`UID`'s sandbox under a wall this process keeps (:func:`firewall.keep_wall`, as the hub's
    spawner does), and two listeners of the machine on the gateway's side in :data:`firewall.HUB_PORTS`: the hub's
    own (bound to the gateway) and another program's (bound to all addresses). ``{"try", "hub", "other", "table",
    "warned"}``: ``try(*addresses)`` connects from the lab, one word each."""
    skip_unless_sandbox_can_run("a network namespace and an nftables table")
    table, warned = f"{firewall.TABLE_PREFIX}t{secrets.token_hex(4)}", []
    tmp_root = Path(tempfile.mkdtemp(prefix="labkit-wall-test-", dir="/run"))  # not under /tmp: the lab's own hides it
    sandbox.ensure_gateway()
    try:
        firewall.keep_wall(table, sandbox.GATEWAY, warned.append)
        sandbox.prepare(UID, sandbox.Limits(memory_mib=256, tasks=64), tmp_root)
        hub_port = free_port(ports=firewall.HUB_PORTS)
        with socket.create_server((sandbox.GATEWAY, hub_port)) as hub:
            other_port = free_port(ports=firewall.HUB_PORTS)
            with socket.create_server(("0.0.0.0", other_port)) as other:

                def attempt(*addresses: str) -> list[str]:
                    done = subprocess.run([*sandbox.enter_command(UID, UID, tmp_root), SYSTEM_PYTHON, "-c", CONNECT,
                                           *addresses], capture_output=True, text=True, timeout=60,
                                          env={"PATH": "/usr/bin:/bin", "HOME": "/"},
                                          preexec_fn=lambda: sandbox.join_cgroups(UID))
                    assert done.returncode == 0, done.stderr
                    return done.stdout.split()

                yield {"try": attempt, "hub": f"{sandbox.GATEWAY}:{hub.getsockname()[1]}",
                       "other": f"{sandbox.GATEWAY}:{other.getsockname()[1]}", "table": table, "warned": warned}
    finally:
        sandbox.release(UID)
        firewall.remove_table(table)
        shutil.rmtree(tmp_root)


def test_a_lab_reaches_the_hub_s_own_socket_but_not_a_host_service_on_all_addresses_in_the_hub_s_range(lab):
    assert lab["try"](lab["hub"], lab["other"]) == ["connected", "unreachable"]


def _other_walls(table: str) -> list[str]:
    """The labkit hubs' nftables tables on the machine other than ``table``."""
    listed = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True, timeout=30).stdout
    return [t for t in re.findall(rf"table inet ({firewall.TABLE_PREFIX}\w+)", listed) if t != table]


@pytest.mark.parametrize("how", ["table removed (nft flush ruleset)", "table's rules flushed"])
def test_a_wall_that_vanished_is_made_again_within_a_poll_and_the_hub_s_log_says_so(lab, how):
    table = lab["table"]
    subprocess.run(["nft", "delete" if how.startswith("table removed") else "flush", "table", "inet", table],
                   check=True, timeout=30)
    # the wall is down: the attempt is not vacuous. Another hub's table on the machine (a real hub test in another
    # worker) walls every lab too (both tables apply to every packet), so the lab's own reach is the control only when
    # no other hub's table was there around the attempt
    assert "reject" not in firewall.listing(table)
    others_before, reached, others_after = _other_walls(table), lab["try"](lab["other"]), _other_walls(table)
    assert reached == ["connected"] or others_before or others_after, reached
    started = time.monotonic()
    while not lab["warned"] and time.monotonic() - started < 10.0:  # the spawner's poll interval
        firewall.keep_wall(table, sandbox.GATEWAY, lab["warned"].append)  # as each lab's poll does
        time.sleep(0.5)
    assert len(lab["warned"]) == 1 and f"table inet {table}, was gone or changed" in lab["warned"][0], lab["warned"]
    assert lab["try"](lab["hub"], lab["other"]) == ["connected", "unreachable"]
    assert not firewall.keep_wall(table, sandbox.GATEWAY, lab["warned"].append)  # checked, found, not made again
