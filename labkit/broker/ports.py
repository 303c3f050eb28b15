"""Free TCP ports on 127.0.0.1 for the broker's listeners."""

from __future__ import annotations

import random
import socket

from labkit.errors import PortInUseError

HOST = "127.0.0.1"
#: Where the lab's ports come from: below Linux's default ephemeral range (32768-60999,
#: ``net.ipv4.ip_local_port_range``), where the kernel never puts the local end of an outgoing connection. The lab
#: binds some ports, closes them and binds them again (a fault proxy opened per experiment, a broker restarted after
#: its crash on the same listeners); a port from the ephemeral range, once closed, could be taken meanwhile by any
#: process's outgoing connection ("Address already in use", seen once in a test run of notebook 06).
PORT_RANGE = range(20000, 32768)


def free_port(attempts: int = 200) -> int:
    """A TCP port of :data:`PORT_RANGE` on 127.0.0.1 that can be bound right now (picked at random, so that parallel
    callers rarely meet). Nothing holds it for the caller: another process can take it before the caller binds it, so
    a caller that binds later retries with another port on failure (:meth:`labkit.broker.EmbeddedBroker.start`).

    Raises:
        PortInUseError: none of ``attempts`` random ports of the range could be bound.
    """
    for port in random.sample(PORT_RANGE, attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise PortInUseError(f"no free port found among {attempts} tried in {PORT_RANGE.start}-{PORT_RANGE.stop - 1} on "
                         f"{HOST}: too many ports in use; stop other labs or brokers (`make stop`)")


def ensure_free(port: int, what: str) -> None:
    """Check that ``port`` can be bound on 127.0.0.1.

    Args:
        port: TCP port number.
        what: what the port is for, named in the error (e.g. "client listener").
    Raises:
        PortInUseError: something already holds the port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise PortInUseError(
                f"Port {port} on {HOST} ({what}) is in use: stop what holds it "
                f"(`ss -ltnp 'sport = :{port}'` names it), or leave the port unset so labkit picks a free one."
            ) from exc
