import time

import pytest

from labkit.broker import probe
from labkit.broker.ports import free_port
from labkit.core.errors import BrokerUnreachableError
from labkit.core.waiting import wait_until
from labkit.crashlab.proxy import FaultProxy

#: Kafka API key of CreateTopics requests (the Kafka protocol's ApiKeys.CREATE_TOPICS).
CREATE_TOPICS = 19


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


def test_a_probe_whose_topic_is_not_created_in_time_says_not_ready_instead_of_raising(broker):
    """On a busy machine the probe topic's creation can outlast the probe's timeout: the probe then answers False (the
    lab broker's start raised TimeoutError there, when twenty attendees' brokers started at once on the hub). Here the
    fault proxy loses the CreateTopics response, on the broker's proxied listener, with the topic deleted first."""
    client = probe.admin(broker.bootstrap_servers)
    client.delete_topics([probe.READY_TOPIC], operation_timeout=10)[probe.READY_TOPIC].result(timeout=15)
    assert wait_until(lambda: probe.READY_TOPIC not in client.list_topics(timeout=5).topics, 15, 0.1)
    with FaultProxy.for_broker(broker) as proxy:
        proxy.drop_responses(1, apis=(CREATE_TOPICS,))
        assert probe.is_ready(proxy.bootstrap_servers, timeout_s=2.0) is False
        assert proxy.dropped_responses == 1
    assert wait_until(lambda: probe.is_ready(broker.bootstrap_servers), 60, 0.5)  # the broker is ready again after
