"""The hub's firewall (labkit/hub/firewall.py): each attendee's port block, and a real nftables rule refusing
connections to it from every other Unix user.

The rule test needs root and nftables (skipped otherwise, saying why); it makes a table of its own (unique per run),
listens as root on a port of a block, connects as ``nobody`` (refused), as the block's owner and as root (accepted),
and removes the table.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from labkit.broker.ports import PORT_RANGE
from labkit.errors import LabkitError
from labkit.hub import firewall

NOBODY = 65534
#: A Python every user may run (the test venv's lives under /root, mode 0700).
SYSTEM_PYTHON = "/usr/bin/python3"


def test_blocks_are_disjoint_inside_the_lab_range_and_leave_the_hub_its_own():
    blocks = [firewall.port_block(uid) for uid in firewall.ATTENDEE_UIDS]
    ports = [p for block in blocks for p in block]
    assert len(ports) == len(set(ports)) == firewall.BLOCK * len(firewall.ATTENDEE_UIDS)
    assert set(ports) <= set(PORT_RANGE) and not set(ports) & set(firewall.HUB_PORTS)
    assert firewall.port_block(firewall.ATTENDEE_UIDS.start) == range(20000, 20100)
    assert firewall.range_spec(range(20100, 20200)) == "20100-20199"


@pytest.mark.parametrize("uid", [0, 1000, firewall.ATTENDEE_UIDS.stop])
def test_a_uid_outside_the_attendees_has_no_block(uid):
    with pytest.raises(LabkitError, match="not an attendee's uid.*userdel"):
        firewall.port_block(uid)


def test_one_table_per_hub():
    assert firewall.table_name("/a/state") == firewall.table_name("/a/state") != firewall.table_name("/b/state")
    assert firewall.table_name("/a/state").startswith(firewall.TABLE_PREFIX)


CONNECT = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
    print("connected")
except ConnectionRefusedError:
    print("refused")
"""


def _connect_as(uid: int, port: int) -> str:
    return subprocess.run([SYSTEM_PYTHON, "-c", CONNECT, str(port)], user=uid, group=uid if uid else 0,
                          extra_groups=[], cwd="/", capture_output=True, text=True, timeout=60).stdout.strip()


def _skip_unless_nft() -> None:
    if os.geteuid() != 0:
        pytest.skip("the firewall test adds an nftables table: run it as root")
    try:
        firewall.check()
    except LabkitError as exc:
        pytest.skip(f"nftables cannot be used here: {exc}")


def _rules(table: str) -> list[str]:
    listed = subprocess.run(["nft", "list", "table", "inet", table], capture_output=True, text=True).stdout
    return sorted(re.findall(r'comment "(uid \d+)"', listed))


def test_twenty_first_spawns_at_once_each_get_their_rule_and_a_restarted_hub_keeps_them():
    _skip_unless_nft()
    table = f"{firewall.TABLE_PREFIX}t{secrets.token_hex(4)}"
    uids = list(firewall.ATTENDEE_UIDS)[-20:]
    try:
        with ThreadPoolExecutor(len(uids)) as pool:  # every spawn's guard at the same moment, as JupyterHub's threads
            list(pool.map(lambda uid: firewall.guard_attendee(table, uid), uids))
        assert _rules(table) == sorted(f"uid {uid}" for uid in uids)
        firewall.ensure_table(table)  # a hub restarted after SIGKILL on the same state: the running labs' rules stay
        assert _rules(table) == sorted(f"uid {uid}" for uid in uids)
    finally:
        firewall.remove_table(table)


def test_the_rule_refuses_every_other_user_and_lets_the_owner_and_root_in():
    _skip_unless_nft()
    table = f"{firewall.TABLE_PREFIX}t{secrets.token_hex(4)}"
    owner = firewall.ATTENDEE_UIDS.stop - 1
    block = firewall.port_block(owner)
    listener = None
    for port in block:
        try:
            listener = socket.create_server(("127.0.0.1", port))
            break
        except OSError:
            continue
    assert listener, f"no free port in {block}"
    try:
        firewall.ensure_table(table)
        firewall.guard(table, owner, block)
        firewall.guard(table, owner, block)  # idempotent: one rule
        assert firewall.exists(table)
        listed = subprocess.run(["nft", "list", "table", "inet", table], capture_output=True, text=True).stdout
        assert listed.count("reject with tcp reset") == 1, listed
        assert _connect_as(NOBODY, port) == "refused"
        assert _connect_as(owner, port) == "connected"
        assert _connect_as(0, port) == "connected"
        outside = socket.create_server(("127.0.0.1", 0))  # a port outside every block: the rule leaves it alone
        with outside:
            assert _connect_as(NOBODY, outside.getsockname()[1]) == "connected"
    finally:
        listener.close()
        firewall.remove_table(table)
    assert not firewall.exists(table)
