"""The hub's second wall: an nftables table refusing whatever an attendee's network namespace sends but to the hub's
own sockets, and stopping any packet meant for another attendee before it is routed.

Each attendee's lab has a network namespace of its own (:mod:`labkit.hub.sandbox`), joined to the machine by a veth
pair whose machine end is named ``lkh<uid>``. IP forwarding off already keeps one namespace from another; this table
(:func:`wall`) makes that explicit and prompt (a refusal, not a silent drop that a client waits out), and keeps the
machine's own services (anything listening on all addresses) from the attendees:

    prerouting: iifname "lkh*" ip daddr != <gateway> reject; iifname "lkh*" meta nfproto ipv6 reject
    input:      iifname "lkh*" ct state established,related accept;
                iifname "lkh*" ip daddr <gateway> tcp dport <HUB_PORTS> socket wildcard 0 accept;
                iifname "lkh*" reject

so an attendee's lab reaches what it needs of the machine, the hub's API and the live view, and nothing else: both
listen on :data:`labkit.hub.sandbox.GATEWAY` itself (``JupyterHub.hub_ip``, the live view's ``url``:
:mod:`labkit.hub.config`), on ports of :data:`HUB_PORTS`, where every hub on the machine picks its own. ``socket
wildcard 0`` (nftables' ``socket`` expression, Linux 5.3+: the socket the packet would reach is bound to an address,
not to all) is what tells them from any other program's service in that range listening on all addresses (``0.0.0.0``),
which is refused (issue 63: every lab reached every such service before). Only root can bind the gateway address of
the machine's namespace: the lab's hubs do. The lab's own broker and services are in its namespace, on its loopback
and address: no rule of the machine's is in their way. The hub's proxy still reaches each attendee's JupyterLab (its
replies are ``established``). The rules name interfaces and the range by pattern, not attendees nor one hub's ports,
so every hub's table is the same (nftables drops a packet any table rejects: two hubs' tables must agree), and no two
sign-ins race over it.

The hub's own ports come from :data:`HUB_PORTS`, above the ports ``make lab`` picks for a lab run beside the hub.

Each hub has a table of its own (:func:`table_name`, from its state folder), made afresh by its first spawn and
checked again at every poll of a lab (:func:`keep_wall`): a table gone or changed (``nft flush ruleset``, which a
reload of the nftables service does) is made again, with a warning in the hub's log (issue 63: it vanished
unnoticed). It is removed when the hub process ends. A table left by a killed hub keeps walling the labs that
outlived it; the next hub on that state folder replaces it with the same rules in one nftables transaction (no moment
without them).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from labkit.broker.ports import PORT_RANGE
from labkit.core.errors import LabkitError

#: The hub's own ports (proxy, hub API, proxy API, live view) when not given: the top of :data:`PORT_RANGE`, above the
#: ports a lab run beside the hub picks first.
HUB_PORTS = range(30000, PORT_RANGE.stop)
#: Every table of the lab's hubs starts with this.
TABLE_PREFIX = "labkit_hub_"
#: Seconds any ``nft`` call may take.
NFT_TIMEOUT_S = 30
#: Seconds between two checks of a table by :func:`keep_wall` (one ``nft list table`` each, about 5 ms of CPU): below
#: the spawner's poll interval (``Spawner.poll_interval``, 10 s), so a wall that vanished is back within one poll.
CHECK_EVERY_S = 2.0


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
        raise LabkitError("The hub walls each attendee's network in with nftables, and `nft` is missing: "
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
    say("installing nftables (apt-get), the hub's second wall between attendees")
    done = subprocess.run([apt, "install", "-y", "-q", "nftables"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if done.returncode != 0:
        raise LabkitError(f"apt-get install nftables failed:\n{(done.stdout + done.stderr)[-2000:]}")


def wall(table: str, gateway: str) -> None:
    """Make ``table`` (family ``inet``) afresh with the module's rules: an attendee's namespace reaches sockets bound to
    ``gateway`` itself on :data:`HUB_PORTS` (TCP) and nothing else. Any old table of that name goes, in the same
    transaction.

    Raises:
        LabkitError: as :func:`_nft`.
    """
    _nft(["-f", "-"], f"""table inet {table}
delete table inet {table}
table inet {table} {{
  chain prerouting {{
    type filter hook prerouting priority 0; policy accept;
    iifname "lkh*" meta nfproto ipv6 reject with icmpx type admin-prohibited
    iifname "lkh*" ip daddr != {gateway} reject with icmpx type admin-prohibited
  }}
  chain input {{
    type filter hook input priority 0; policy accept;
    iifname "lkh*" ct state established,related accept
    iifname "lkh*" ip daddr {gateway} tcp dport {HUB_PORTS.start}-{HUB_PORTS.stop - 1} socket wildcard 0 accept
    iifname "lkh*" reject with icmpx type admin-prohibited
  }}
}}
""")


#: Held while a table is checked or made: the hub's spawns and polls run in threads at once (twenty first sign-ins).
_LOCK = threading.Lock()
#: ``{table: (its listing as made, monotonic time of its last check)}``: the tables this process made, removed when
#: it ends.
_MADE: dict[str, tuple[str, float]] = {}


def listing(table: str) -> str:
    """``nft list table inet TABLE`` as nftables prints it now ("" if there is no such table)."""
    try:
        return _nft(["list", "table", "inet", table])
    except LabkitError:
        return ""


def keep_wall(table: str, gateway: str, warn: Callable[[str], None]) -> bool:
    """Make sure ``table`` is there with :func:`wall`'s rules: made at the first call of the process (its removal
    registered for the process's exit: SIGTERM, Ctrl-C), then checked at most every :data:`CHECK_EVERY_S` seconds
    against its listing as made, and made again when it is gone or differs, saying so with ``warn`` (the hub's log).
    Thread-safe (the hub's spawner calls it before every spawn and at every poll, from threads at once). Returns
    whether it made the table again.

    Raises:
        LabkitError: as :func:`wall`.
    """
    with _LOCK:
        made = _MADE.get(table)
        if made and time.monotonic() - made[1] < CHECK_EVERY_S:
            return False
        if made and listing(table) == made[0]:
            _MADE[table] = (made[0], time.monotonic())
            return False
        wall(table, gateway)
        _MADE[table] = (listing(table), time.monotonic())
        if made is None:
            atexit.register(remove_table, table)
            return False
    warn(f"The hub's wall, nftables table inet {table}, was gone or changed (nft flush ruleset, or a reload of the "
         "nftables service, removes it): made it again. Until now the labs could reach the machine's ports.")
    return True


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
