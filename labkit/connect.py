"""Which broker a notebook talks to."""

from __future__ import annotations

import os

from labkit import lab
from labkit.broker import EmbeddedBroker
from labkit.broker.probe import check_reachable
from labkit.errors import BrokerUnreachableError

_kernel_broker: EmbeddedBroker | None = None


def connect(timeout_s: float = 5.0, *, quiet: bool = False) -> str:
    """A bootstrap address ("host:port") of a Kafka broker that answers, found in this order:

    1. ``LABKIT_BOOTSTRAP`` if set: an external cluster (``docker compose up -d``, or any Kafka >= 4.2);
    2. the lab broker that ``make lab`` started (found through its state file in ``$LABKIT_HOME/lab/``);
    3. else an :class:`~labkit.broker.EmbeddedBroker` started for this Python process (kernel), which
       stops when the process exits. Later calls return the same one.

    Args:
        timeout_s: how long to wait for an answer from cases 1 and 2, in seconds.
        quiet: do not print which broker is used.
    Raises:
        BrokerUnreachableError: ``LABKIT_BOOTSTRAP`` is set but nothing answers there.
        JavaError, MavenError, BrokerExitedError, BrokerNotReadyError: case 3 could not start a broker.
    """
    global _kernel_broker
    address, origin = os.environ.get("LABKIT_BOOTSTRAP"), "LABKIT_BOOTSTRAP"
    if address:
        check_reachable(address, timeout_s)
    else:
        address, origin = lab.running_broker(), "the lab broker (make lab)"
        if address:
            try:
                check_reachable(address, timeout_s)
            except BrokerUnreachableError:
                address = None
        if not address:
            if _kernel_broker is None or not _kernel_broker.is_running:
                _kernel_broker = EmbeddedBroker().start()
            address, origin = _kernel_broker.bootstrap_servers, "a broker started for this kernel"
    if not quiet:
        print(f"Kafka at {address} ({origin})")
    return address
