"""Scripts the hub and sandbox tests run as an attendee, inside the attendee's sandbox (tests/test_hub.py,
tests/test_sandbox.py), and the skip those tests share where no sandbox can be made."""

import os

import pytest

from labkit.core.errors import LabkitError
from labkit.hub import firewall, sandbox


def skip_unless_sandbox_can_run(makes: str) -> None:
    """Skip the calling test, saying why, unless this process is root and the machine can keep attendees apart
    (:func:`labkit.hub.firewall.check`, :func:`labkit.hub.sandbox.check`); ``makes`` names what the test makes."""
    if os.geteuid() != 0:
        pytest.skip(f"the test makes {makes}: run it as root")
    try:
        firewall.check()
        sandbox.check()
    except LabkitError as exc:
        pytest.skip(f"attendees cannot be kept apart here: {exc}")

#: Connect to each ``host:port`` of ``argv[1:]``; one word each: ``connected``, ``refused``, ``unreachable``
#: (ENETUNREACH: no route from the namespace, whose one route leads to the gateway; EHOSTUNREACH: the hub's wall), or
#: ``error-<errno>``.
CONNECT = """
import socket, sys
for address in sys.argv[1:]:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
        print("connected")
    except ConnectionRefusedError:
        print("refused")
    except OSError as exc:
        print("unreachable" if exc.errno in (101, 113) else f"error-{exc.errno}")
"""
