"""The fault proxy, in front of a real broker's PROXIED listener."""

import socket
import struct
import threading
import time

import pytest
from confluent_kafka import Producer

from labkit.broker import EmbeddedBroker
from labkit.broker.ports import HOST, free_port
from labkit.core.waiting import wait_until
from labkit.crashlab.proxy import PRODUCE, FaultProxy
from labkit.kafka.api_versions import broker_api_versions
from labkit.kafka.records import create_topic, read_topic
from labkit.kafka.wire import API_VERSIONS_KEY


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


class _FailingTap:
    """Keeps every frame it is shown, then raises, as a tap that cannot read them would."""

    def __init__(self) -> None:
        self.seen = []

    def request(self, conn_id: int, body: bytes) -> None:
        self.seen.append(("request", conn_id, body))
        raise ValueError("cannot read this request")

    def response(self, conn_id: int, body: bytes) -> None:
        self.seen.append(("response", conn_id, body))
        raise ValueError("cannot read this response")


def test_a_tap_sees_each_frame_and_its_errors_are_kept_while_the_frame_still_reaches_the_other_side(proxied):
    broker, _ = proxied
    tap = _FailingTap()
    with FaultProxy(free_port(), broker.proxied_listener_port, tap=tap) as proxy:
        versions = broker_api_versions(proxy.bootstrap_servers, timeout_s=10)  # a real ApiVersions, both ways
    assert API_VERSIONS_KEY in versions
    (_, conn, asked), (_, conn_back, answer) = tap.seen
    api_key, _, correlation_id = struct.unpack(">hhi", asked[:8])
    assert (api_key, conn_back, struct.unpack(">i", answer[:4])[0]) == (API_VERSIONS_KEY, conn, correlation_id)
    assert proxy.tap_errors == [
        f"request api {API_VERSIONS_KEY} correlation {correlation_id}: ValueError('cannot read this request')",
        f"response api {API_VERSIONS_KEY} correlation {correlation_id}: ValueError('cannot read this response')"]
    assert proxy.tap_error_count == 2


def test_broker_without_proxied_listener_is_refused():
    with pytest.raises(ValueError, match="proxy_listener=True"):
        FaultProxy.for_broker(EmbeddedBroker())


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return sock.recv(size, socket.MSG_WAITALL)


def test_callers_of_lose_responses_at_once_each_wait_for_a_response_of_their_own(monkeypatch):
    """Threads asking the proxy to lose a response at once (a notebook's and a supervisor's) each return once as many
    responses were lost as were asked for up to their own ask: the count of lost responses and the drops still to
    make are read and changed together. A byte-level broker stands in for Kafka."""
    callers = 4
    with socket.create_server((HOST, 0)) as listener, FaultProxy(free_port(), listener.getsockname()[1]) as proxy:
        client = socket.create_connection((HOST, proxy.listen_port))
        broker, _ = listener.accept()
        with client, broker:
            for correlation_id in range(callers):  # Produce requests (API key, version, correlation id)
                client.sendall(_frame(struct.pack(">hhi", PRODUCE, 9, correlation_id)))
            for _ in range(callers):
                _read_frame(broker)  # through the proxy: it knows each request's API key
            asked, returned = threading.Semaphore(0), []
            drop_responses = proxy.drop_responses
            monkeypatch.setattr(proxy, "drop_responses", lambda n: (drop_responses(n), asked.release())[0])
            threads = [threading.Thread(target=lambda: (proxy.lose_responses(1, timeout_s=30), returned.append(1)))
                       for _ in range(callers)]
            for t in threads:
                t.start()
            assert all(asked.acquire(timeout=10) for _ in range(callers))
            for correlation_id in range(callers):
                broker.sendall(_frame(struct.pack(">i", correlation_id)))
                assert wait_until(lambda: proxy.dropped_responses == correlation_id + 1, 10)
                time.sleep(0.2)  # a caller looks every 0.01 s
                assert len(returned) == correlation_id + 1
            for t in threads:
                t.join(10)
