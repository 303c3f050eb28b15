"""Notebook 01's experiments refuse settings that could not show the lesson (the notebook runs them whole); on the
real broker, a retry behind requests in flight reorders records without idempotence and not with it, on both
clients."""

import time

import pytest
from confluent_kafka import Producer

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.proxy import FaultProxy
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.records import create_topic, read_topic
from labkit.lessons.idempotence import log_order, lost_responses, reordered_retry, restart_and_resend


def test_too_few_records_for_the_losses_is_refused_before_anything_runs(tmp_path):
    exp = Experiment("idem", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="records=5 is too few for losses=3: use at least 9"):
        lost_responses(exp, proxy=None, idempotent=True, records=5, losses=3)


def test_crash_iteration_outside_the_batches_is_refused(tmp_path):
    exp = Experiment("idem", "127.0.0.1:1", folder=tmp_path)
    with pytest.raises(ValueError, match="crash_iteration must be within 1..5, not 6"):
        restart_and_resend(exp, batches=5, crash_iteration=6)
    assert exp.history.events() == []


def test_a_reordering_run_refuses_what_could_not_show_it(tmp_path):
    exp = Experiment("idem", "127.0.0.1:1", folder=tmp_path)
    with pytest.raises(ValueError, match="unknown client 'jvm'; the clients are librdkafka, java"):
        reordered_retry(exp, proxy=None, idempotent=False, client="jvm")
    with pytest.raises(ValueError, match="max_in_flight=1: both must be at least 2"):
        reordered_retry(exp, proxy=None, idempotent=False, client="java", max_in_flight=1)
    assert exp.history.events() == []


@pytest.mark.parametrize("client", CLIENTS)
def test_a_retry_behind_requests_in_flight_lands_last_only_without_idempotence(broker, tmp_path, client):
    """Record 6 is refused (CORRUPT_MESSAGE) while 7 to 10, in flight behind it, succeed: without idempotence its
    retry is appended after 10; with idempotence the leader refuses 7 to 10 as out of sequence and the log keeps the
    producer's order. Nothing is written twice."""
    exp = Experiment("order", broker.bootstrap_servers, folder=tmp_path)
    with FaultProxy.for_broker(broker) as proxy:
        runs = {mode: reordered_retry(exp, proxy, idempotent=mode == "idempotent", client=client)
                for mode in ("plain", "idempotent")}
        assert proxy.corrupted_requests == 2
    order = log_order(exp, runs).set_index("run")
    assert order.loc["plain"].to_dict() == {"client": client, "log": "1 2 3 4 5 7 8 9 10 6", "out_of_order": 1,
                                            "duplicates": 0}, order
    assert order.loc["idempotent"].to_dict() == {"client": client, "log": "1 2 3 4 5 6 7 8 9 10", "out_of_order": 0,
                                                 "duplicates": 0}, order
    assert all(p.status == "finished" for p, _ in runs.values())


def test_a_corrupted_record_is_refused_and_retried_behind_a_held_response(broker):
    """The proxy's fault itself, on a plain librdkafka producer with one request in flight: the broker refuses the
    corrupted record, the producer retries it, and its delivery report comes after the held response."""
    topic = create_topic(broker.bootstrap_servers, "corrupt")
    with FaultProxy.for_broker(broker) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "enable.idempotence": False,
                             "max.in.flight.requests.per.connection": 1})
        producer.produce(topic, b"first", partition=0)
        assert producer.flush(30) == 0
        proxy.corrupt_record(b"second", hold_response_s=1.0)
        start = time.monotonic()
        producer.produce(topic, b"second", partition=0)
        assert producer.flush(30) == 0 and time.monotonic() - start >= 1.0
        assert proxy.corrupted_requests == 1
    assert list(read_topic(broker.bootstrap_servers, topic, "read_uncommitted")["value"]) == ["first", "second"]
