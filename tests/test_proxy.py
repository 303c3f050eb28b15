"""The fault proxy, in front of a real broker's PROXIED listener."""


import pytest
from confluent_kafka import Producer

from labkit.broker import EmbeddedBroker
from labkit.crashlab.proxy import FaultProxy
from labkit.kafka.records import create_topic, read_topic


@pytest.fixture(scope="module")
def proxied():
    with EmbeddedBroker(proxy_listener=True) as broker, FaultProxy.for_broker(broker) as proxy:
        yield broker, proxy


def send(proxy, topic, values, **config):
    # librdkafka times a ProduceRequest out after socket.timeout.ms, then retries it
    producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "request.timeout.ms": 2000, "socket.timeout.ms": 2000,
                         "message.timeout.ms": 30000, "retry.backoff.ms": 100, **config})
    for v in values:
        producer.produce(topic, v.encode(), partition=0)
        assert producer.flush(30) == 0
    return producer


@pytest.mark.parametrize("idempotent, copies", [(False, 2), (True, 1)])
def test_lost_produce_response_duplicates_only_without_idempotence(proxied, idempotent, copies):
    broker, proxy = proxied
    topic = create_topic(broker.bootstrap_servers, "dup")
    producer = send(proxy, topic, ["warm-up"], **{"enable.idempotence": idempotent})
    dropped = proxy.dropped_responses
    proxy.drop_responses(1)
    producer.produce(topic, b"retried", partition=0)
    assert producer.flush(30) == 0  # the retry's response arrives: the producer reports success
    assert proxy.dropped_responses == dropped + 1
    values = list(read_topic(broker.bootstrap_servers, topic, "read_uncommitted")["value"])
    assert values == ["warm-up"] + ["retried"] * copies


def test_clients_stay_behind_the_proxy(proxied):
    broker, proxy = proxied
    topic = create_topic(broker.bootstrap_servers, "behind")
    before = proxy.forwarded_responses
    send(proxy, topic, ["a"])
    assert proxy.forwarded_responses > before
    meta = Producer({"bootstrap.servers": proxy.bootstrap_servers}).list_topics(topic, timeout=10)
    assert {f"{b.host}:{b.port}" for b in meta.brokers.values()} == {proxy.bootstrap_servers}


def test_black_hole_then_heal(proxied):
    broker, proxy = proxied
    topic = create_topic(broker.bootstrap_servers, "hole")
    producer = send(proxy, topic, ["before"])
    proxy.black_hole()
    producer.produce(topic, b"during", partition=0)
    assert producer.flush(3) == 1  # no answer while black-holed
    proxy.heal()
    proxy.cut()  # the client reconnects and retries
    assert producer.flush(30) == 0
    assert "during" in list(read_topic(broker.bootstrap_servers, topic, "read_uncommitted")["value"])


def test_broker_without_proxied_listener_is_refused():
    with pytest.raises(ValueError, match="proxy_listener=True"):
        FaultProxy.for_broker(EmbeddedBroker())
