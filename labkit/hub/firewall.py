"""No attendee reaches another attendee's broker: each attendee's TCP ports on this machine are a block of their own,
and a firewall rule (nftables) refuses connections to that block from every Unix user but the attendee and root.

A broker of the lab listens on 127.0.0.1 without authentication, so without this any local user could produce to, read
or delete another attendee's topics. The hub gives each attendee a block of :data:`BLOCK` ports of
:data:`labkit.broker.ports.PORT_RANGE` (:func:`port_block`, from their uid) and sets ``LABKIT_PORT_RANGE`` in their
server's environment, so every port their lab listens on (the broker's client, controller and PROXIED listeners, the
fault proxy, a second broker, a kernel's own broker, a Spark master: whatever :func:`labkit.broker.ports.free_port`
picks) is in the block. The rule, on nftables' ``output`` hook of the loopback interface, matches the *sending* Unix
user (``meta skuid``: the owner of the socket that sends the SYN; nftables wiki, "Matching packet metainformation")::

    oifname "lo" tcp dport <lo>-<hi> meta skuid != 0 meta skuid != <uid> reject with tcp reset

so a client run by another attendee gets "connection refused" at once. Replies need no rule: they go to the client's
port, outside every block (a client's local port comes from the ephemeral range, 32768-60999).

The blocks follow from the uids: the hub makes attendees with uids of :data:`ATTENDEE_UIDS` only
(:func:`labkit.hub.users.create`), block ``n`` for uid ``ATTENDEE_UIDS.start + n``, so two hubs on one machine (each
with a table of its own) never give one block to two users. The limit: :data:`ATTENDEE_UIDS` holds 100 accounts of
the lab on one machine, all hubs together (users the test or the instructor removed free their uid). The hub's own
ports (its proxy, its API) come from :data:`HUB_PORTS`, above every block.

Each hub has a table of its own (:func:`table_name`, from its state folder), made by its first spawn if missing and
removed when the hub process ends (:func:`guard_attendee`). A table left by a killed hub keeps guarding the labs
that outlived it; the next hub on that state folder takes it over as it is (:func:`ensure_table`: its rules stay).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from labkit.broker.ports import PORT_RANGE
from labkit.errors import LabkitError

#: Ports per attendee: a lab listens on about 4 at once (broker: client, controller, PROXIED; fault proxy), 8 with
#: notebook 08's second broker; 100 leave :func:`labkit.broker.ports.free_port`'s random picks room to miss.
BLOCK = 100
#: The uids of the lab's attendees, one port block each: blocks 20000-29999 of :data:`PORT_RANGE`.
ATTENDEE_UIDS = range(50000, 50100)
#: The hub's own ports (proxy, hub API, proxy API) when not given: above every attendee's block, within
#: :data:`PORT_RANGE` (below the ephemeral range).
HUB_PORTS = range(PORT_RANGE.start + BLOCK * len(ATTENDEE_UIDS), PORT_RANGE.stop)
#: Every table of the lab's hubs starts with this.
TABLE_PREFIX = "labkit_hub_"
#: Seconds any ``nft`` call may take.
NFT_TIMEOUT_S = 30


def port_block(uid: int) -> range:
    """The TCP ports of the attendee whose uid is ``uid``: :data:`BLOCK` ports of :data:`PORT_RANGE`.

    Raises:
        LabkitError: ``uid`` is not one of :data:`ATTENDEE_UIDS` (a user made by an older labkit: remove it).
    """
    if uid not in ATTENDEE_UIDS:
        raise LabkitError(f"uid {uid} is not an attendee's uid ({ATTENDEE_UIDS.start}-{ATTENDEE_UIDS.stop - 1}), so "
                          "it has no port block of its own: remove that user (userdel -r) and sign in again.")
    start = PORT_RANGE.start + (uid - ATTENDEE_UIDS.start) * BLOCK
    return range(start, start + BLOCK)


def range_spec(ports: range) -> str:
    """``ports`` as ``LABKIT_PORT_RANGE`` spells it: ``"<lo>-<hi>"``, both included."""
    return f"{ports.start}-{ports.stop - 1}"


def table_name(state: Path | str) -> str:
    """The nftables table of the hub whose state folder is ``state`` (its absolute path's digest: one per hub)."""
    return TABLE_PREFIX + hashlib.sha256(str(Path(state).resolve()).encode()).hexdigest()[:10]


def _nft(args: list[str], script: str | None = None) -> str:
    """Run ``nft ARGS`` (``script`` on its stdin); returns its stdout.

    Raises:
        LabkitError: nft is missing or failed (its message quoted).
    """
    nft = shutil.which("nft") or ("/usr/sbin/nft" if os.path.exists("/usr/sbin/nft") else None)
    if not nft:
        raise LabkitError("The hub keeps attendees off each other's brokers with nftables, and `nft` is missing: "
                          "apt-get install nftables (make hub's set-up does it as root).")
    done = subprocess.run([nft, *args], input=script, capture_output=True, text=True, timeout=NFT_TIMEOUT_S)
    if done.returncode != 0:
        raise LabkitError(f"nft {' '.join(args)} failed: {done.stderr.strip()} (the hub needs root and a kernel with "
                          "nf_tables)")
    return done.stdout


def check() -> None:
    """Check that nftables can be used here (``nft list tables``: root, and the kernel's nf_tables).

    Raises:
        LabkitError: it cannot (the message names the fix).
    """
    _nft(["list", "tables"])


def install(say: Callable[[str], None] = print) -> None:
    """Install Debian's ``nftables`` package with apt-get when ``nft`` is missing (the hub's set-up, as root).

    Raises:
        LabkitError: not root, no apt-get, or apt-get failed (its output quoted).
    """
    if shutil.which("nft") or os.path.exists("/usr/sbin/nft"):
        return
    apt = shutil.which("apt-get")
    if os.geteuid() != 0 or not apt:
        raise LabkitError("nftables is missing: install it (Debian: apt-get install nftables) and start again.")
    say("installing nftables (apt-get), which keeps attendees off each other's brokers")
    done = subprocess.run([apt, "install", "-y", "-q", "nftables"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if done.returncode != 0:
        raise LabkitError(f"apt-get install nftables failed:\n{(done.stdout + done.stderr)[-2000:]}")


def ensure_table(table: str) -> None:
    """Make ``table`` (family ``inet``) with its ``output`` chain if it is not there; a table already there keeps its
    rules (a hub restarted after SIGKILL finds its attendees' labs still running, guarded by them: each rule depends on
    its uid alone, so it stays right whoever has that uid next).

    Raises:
        LabkitError: as :func:`_nft`.
    """
    _nft(["-f", "-"], f"add table inet {table}\n"
         f"add chain inet {table} output {{ type filter hook output priority 0; policy accept; }}\n")


def guard(table: str, uid: int, ports: range) -> None:
    """Add to ``table`` (made by :func:`ensure_table`) the rule refusing connections to ``ports`` from every Unix user
    but ``uid`` and root, unless it is there already, then read the chain back to check it is. Not safe to call for one
    table from two threads at once (two could add the rule): the spawner holds a lock.

    Raises:
        LabkitError: as :func:`_nft`; or the rule is not in the chain after it was added.
    """
    comment = f'comment "uid {uid}"'
    if comment in _nft(["list", "chain", "inet", table, "output"]):
        return
    _nft(["add", "rule", "inet", table, "output", "oifname", "lo", "tcp", "dport", range_spec(ports), "meta", "skuid",
          "!=", "0", "meta", "skuid", "!=", str(uid), "reject", "with", "tcp", "reset", "comment", f'"uid {uid}"'])
    if comment not in _nft(["list", "chain", "inet", table, "output"]):
        raise LabkitError(f"The firewall rule guarding uid {uid}'s ports is not in nftables table {table} after it was "
                          "added: the attendee's lab is not started (nft list table inet " + table + " shows what is).")


#: Held while a table is made or a rule added: the hub's spawns run in threads at once (twenty first sign-ins).
_LOCK = threading.Lock()
#: The tables this process has made sure of, removed when it ends.
_MADE: set[str] = set()


def guard_attendee(table: str, uid: int) -> None:
    """What the hub's spawner does before an attendee's server starts: make sure of ``table`` (:func:`ensure_table`,
    once per process, removed when the process ends) and add the rule keeping ``uid``'s port block to it
    (:func:`guard`), under a lock, so that spawns in threads at once neither lose nor double a rule.

    Raises:
        LabkitError: as :func:`guard`; ``uid`` has no port block (:func:`port_block`).
    """
    with _LOCK:
        if table not in _MADE:
            ensure_table(table)
            _MADE.add(table)
            atexit.register(remove_table, table)  # the hub's exit (SIGTERM, Ctrl-C) removes it
        guard(table, uid, port_block(uid))


def exists(table: str) -> bool:
    """Whether nftables has ``table`` (family ``inet``)."""
    try:
        return f"table inet {table}" in _nft(["list", "tables"])
    except LabkitError:
        return False


def remove_table(table: str) -> None:
    """Remove ``table`` if it exists (the hub's exit; the test's teardown).

    Raises:
        LabkitError: nft failed otherwise than "no such table".
    """
    if exists(table):
        _nft(["delete", "table", "inet", table])
