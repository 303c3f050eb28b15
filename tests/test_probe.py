import time

import pytest

from labkit.broker import probe
from labkit.broker.ports import free_port
from labkit.errors import BrokerUnreachableError


def test_unreachable_broker_fails_within_seconds_naming_the_address():
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match=f"No Kafka broker answered at {address} within 2 s"):
        probe.check_reachable(address, timeout_s=2)
    assert time.monotonic() - started < 5


def test_running_broker_is_reachable_and_ready(bootstrap):
    probe.check_reachable(bootstrap)
    assert probe.is_ready(bootstrap)
    assert probe.READY_TOPIC in probe.admin(bootstrap).list_topics(timeout=5).topics


def test_nothing_listening_is_not_ready():
    assert not probe.is_ready(f"127.0.0.1:{free_port()}", timeout_s=0.5)
