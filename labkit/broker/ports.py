"""Free TCP ports on 127.0.0.1 for the broker's listeners."""

from __future__ import annotations

import socket

from labkit.errors import PortInUseError

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel picks it). Nothing holds it for the
    caller: another process can take it before the caller binds it, so a caller that binds later retries with
    another port on failure (:meth:`labkit.broker.EmbeddedBroker.start`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


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
