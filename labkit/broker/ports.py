"""Free TCP ports on 127.0.0.1 for the broker's listeners."""

from __future__ import annotations

import errno
import os
import random
import socket

from labkit.core.errors import LabkitError, PortInUseError

HOST = "127.0.0.1"
#: Where the lab's ports come from: below Linux's default ephemeral range (32768-60999,
#: ``net.ipv4.ip_local_port_range``), where the kernel never puts the local end of an outgoing connection. The lab
#: binds some ports, closes them and binds them again (a fault proxy opened per experiment, a broker restarted after
#: its crash on the same listeners); a port from the ephemeral range, once closed, could be taken meanwhile by any
#: process's outgoing connection ("Address already in use", seen once in a test run of notebook 06).
PORT_RANGE = range(20000, 32768)
#: The environment variable that narrows :func:`free_port` to a block of :data:`PORT_RANGE`, ``"<lo>-<hi>"`` (both
#: included): for labs of several users sharing one machine's loopback outside the workshop hub (whose attendees each
#: have a network namespace, :mod:`labkit.hub.sandbox`, and need none).
RANGE_ENV = "LABKIT_PORT_RANGE"


def lab_ports(env: dict[str, str] | None = None) -> range:
    """The ports :func:`free_port` picks from: ``$LABKIT_PORT_RANGE`` (``"lo-hi"``, both included) if set, else
    :data:`PORT_RANGE`.

    Raises:
        LabkitError: the variable is not ``lo-hi`` with ``lo <= hi`` inside :data:`PORT_RANGE` (the hub sets it; the
            message names the variable).
    """
    spec = (os.environ if env is None else env).get(RANGE_ENV)
    if not spec:
        return PORT_RANGE
    try:
        lo, hi = (int(part) for part in spec.split("-"))
    except ValueError:
        lo, hi = 0, -1
    if not (PORT_RANGE.start <= lo <= hi < PORT_RANGE.stop):
        raise LabkitError(f"{RANGE_ENV}={spec!r} is not '<lo>-<hi>' within {PORT_RANGE.start}-{PORT_RANGE.stop - 1}: "
                          f"fix it or unset it.")
    return range(lo, hi + 1)


def free_port(attempts: int = 200, ports: range | None = None, besides: set[int] | None = None) -> int:
    """A TCP port of ``ports`` (default :func:`lab_ports`: :data:`PORT_RANGE`, or the attendee's block) on 127.0.0.1
    that can be bound right now (picked at random, so that parallel callers rarely meet; at most ``attempts`` tried,
    and no more than the range holds). Nothing holds it for the caller: another process can take it before the caller
    binds it, so a caller that binds later retries with another port on failure
    (:meth:`labkit.broker.EmbeddedBroker.start`). Ports of ``besides`` are never picked, and the one picked is added
    to it: a caller drawing several ports before binding any passes one set to every draw, so no two coincide (a
    fresh-clone run met a Spark master's web UI drawn on its own RPC port).

    Raises:
        PortInUseError: none of the ports tried could be bound.
        LabkitError: ``LABKIT_PORT_RANGE`` is malformed (:func:`lab_ports`).
    """
    ports = lab_ports() if ports is None else ports
    besides = set() if besides is None else besides
    candidates = [port for port in ports if port not in besides]
    tried = min(attempts, len(candidates))
    for port in random.sample(candidates, tried):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            besides.add(port)
            return port
    taken = f" (besides {sorted(besides)})" if besides else ""
    raise PortInUseError(f"no free port found among {tried} tried in {ports.start}-{ports.stop - 1}{taken} on "
                         f"{HOST}: too many ports in use; stop other labs or brokers (`make stop`)")


def ensure_free(port: int, what: str, host: str = HOST) -> None:
    """Check that ``port`` can be bound on ``host`` (as a server binds it: ``SO_REUSEADDR``, so a port whose old
    connections wait in TIME_WAIT counts as free).

    Args:
        port: TCP port number.
        what: what the port is for, named in the error (e.g. "client listener").
        host: the address to bind, 127.0.0.1 unless a server listens elsewhere (the hub's ``--ip``).
    Raises:
        PortInUseError: something already holds the port.
        LabkitError: ``host`` is not an address of this machine (or another bind error: its reason quoted).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise LabkitError(f"Cannot listen on {host}:{port} ({what}): {exc.strerror}; is {host} an address "
                                  "of this machine?") from exc
            raise PortInUseError(
                f"Port {port} on {host} ({what}) is in use: stop what holds it "
                f"(`ss -ltnp 'sport = :{port}'` names it), or leave the port unset so labkit picks a free one."
            ) from exc
