import socket

import pytest

from labkit.broker.ports import PORT_RANGE, ensure_free, free_port
from labkit.errors import PortInUseError


def test_free_port_can_be_bound_and_is_outside_the_ephemeral_range():
    """No outgoing connection can take a lab port while the lab has it closed (a fault proxy between experiments):
    the kernel picks those connections' local ports in 32768-60999 only."""
    ports = {free_port() for _ in range(20)}
    assert all(p in PORT_RANGE and p < 32768 for p in ports) and len(ports) > 1
    ensure_free(ports.pop(), "test")


def test_no_free_port_says_what_to_do(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    monkeypatch.setattr("labkit.broker.ports.PORT_RANGE", range(taken.getsockname()[1], taken.getsockname()[1] + 1))
    try:
        with pytest.raises(PortInUseError, match=r"no free port found among 1 tried .*make stop"):
            free_port(attempts=1)
    finally:
        taken.close()


def test_port_in_use_names_the_port_and_the_fix():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"Port {port} on 127.0.0.1 \\(client\\) is in use.*ss -ltnp"):
            ensure_free(port, "client")
