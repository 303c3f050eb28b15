"""Scripts the hub and sandbox tests run as an attendee, inside the attendee's sandbox (tests/test_hub.py,
tests/test_sandbox.py)."""

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
