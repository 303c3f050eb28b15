"""A share group's configs: what a release refuses before anything is sent, and what the broker refuses."""

import pytest

from labkit.core.errors import LabkitError
from labkit.share.group_config import configure_group, dlq_supported


def test_dlq_needs_kafka_4_4(monkeypatch):
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", "4.3.2")
    assert not dlq_supported()
    with pytest.raises(LabkitError, match="Kafka 4.3.2 has no share-group dead-letter queue.*LABKIT_KAFKA_VERSION=4.4.0"):
        configure_group("127.0.0.1:1", "g", dlq_topic="dlq.x")  # refused before anything is sent
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", "4.4.0")
    assert dlq_supported()


def test_a_limit_below_two_is_refused_by_the_broker(bootstrap):
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException):
        configure_group(bootstrap, "limit-group", delivery_limit=1)



def test_a_renew_is_refused_with_invalid_record_state_when_the_group_disables_renewals(bootstrap, tmp_path):
    """``share.renew.acknowledge.enable=false`` (Kafka 4.3+, KAFKA-20161; default true) on the real broker: the Java
    client's RENEW (KIP-1222) of the record it holds is answered INVALID_RECORD_STATE and renews nothing: the lock
    runs out as if no RENEW had come and the record is delivered again, delivery count 2 (with the default, notebook
    06 part 4 and ``test_share_groups`` show the same RENEWs accepted and one delivery)."""
    from labkit.crashlab.experiment import Experiment
    from labkit.lessons.share_groups import LOCK_MS, first_ns, share_group
    from labkit.core.waiting import wait_for

    exp = Experiment("norenew", bootstrap, folder=tmp_path)
    topic, group = share_group(exp, "norenew", 1, renew=False)
    consumer = exp.participant("norenew", "share_consumer", client="java", topic=topic, group_id=group,
                               hold_ms=4 * LOCK_MS, renew_ms=1000, idle_ms=60_000, default="hold").start()
    try:
        wait_for(lambda: [e.delivery_count for e in exp.history.events() if e.kind == "delivered"] == [1, 2],
                 "the record was not delivered twice", 60)
    finally:
        consumer.stop()
    events = exp.history.events()
    renews = [e.error for e in events if e.kind == "ack_committed" and e.ack_type == "RENEW"]
    assert renews[0] == "INVALID_RECORD_STATE", renews
    again = first_ns(events, "delivered", delivery_count=2) - first_ns(events, "delivered", delivery_count=1)
    assert again >= (LOCK_MS - 1000) * 1_000_000, again / 1e9  # the lock's time: the RENEW extended nothing
