import socket

import pytest

from labkit.broker.ports import ensure_free, free_port
from labkit.errors import PortInUseError


def test_free_port_can_be_bound():
    port = free_port()
    ensure_free(port, "test")


def test_port_in_use_names_the_port_and_the_fix():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"Port {port} on 127.0.0.1 \\(client\\) is in use.*ss -ltnp"):
            ensure_free(port, "client")
