import socket

import pytest

from labkit.broker.ports import PORT_RANGE, ensure_free, free_port, lab_ports
from labkit.core.errors import LabkitError, PortInUseError


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



def test_a_port_already_drawn_is_not_drawn_again_and_when_only_those_are_left_they_are_named():
    """Two draws of a free port could give the same one, as nothing binds it between them (a fresh-clone run's Spark
    master got its web UI drawn on its RPC port): a port of ``besides`` is never picked, the picked one joins it, and
    a range holding only drawn ports raises, naming them."""
    port = free_port()
    drawn = {port - 1, port + 1}
    assert free_port(ports=range(port - 1, port + 2), besides=drawn) == port and drawn == {port - 1, port, port + 1}
    with pytest.raises(PortInUseError, match=rf"among 0 tried .* \(besides \[{port - 1}, {port}, {port + 1}\]\)"):
        free_port(ports=range(port - 1, port + 2), besides=drawn)

def test_port_in_use_names_the_port_and_the_fix():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"Port {port} on 127.0.0.1 \\(client\\) is in use.*ss -ltnp"):
            ensure_free(port, "client")


def test_free_port_stays_in_the_block_labkit_port_range_names(monkeypatch):
    """The workshop hub gives each attendee a block of ports (LABKIT_PORT_RANGE): every port the lab picks is in it."""
    monkeypatch.setenv("LABKIT_PORT_RANGE", "21000-21009")
    assert lab_ports() == range(21000, 21010)
    assert {free_port() for _ in range(30)} <= set(range(21000, 21010))


@pytest.mark.parametrize("spec", ["21000", "21010-21000", "x-y", "1000-2000", "32000-40000"])
def test_a_malformed_port_range_names_the_variable(monkeypatch, spec):
    monkeypatch.setenv("LABKIT_PORT_RANGE", spec)
    with pytest.raises(LabkitError, match="LABKIT_PORT_RANGE"):
        free_port()


def test_an_address_not_of_this_machine_is_not_called_in_use():
    with pytest.raises(LabkitError, match="an address of this machine") as caught:
        ensure_free(free_port(), "test", host="192.0.2.1")  # TEST-NET-1: never assigned to a host
    assert not isinstance(caught.value, PortInUseError)
