"""Notebook 06's experiments refuse what they cannot show (the notebook runs each of them whole)."""

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.errors import LabkitError
from labkit.history import Event
from labkit.lessons.share_groups import configure_group, dlq_supported, first_ns, framework_sink, lock_expiry


def test_dlq_needs_kafka_4_4(monkeypatch):
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", "4.3.1")
    assert not dlq_supported()
    with pytest.raises(LabkitError, match="Kafka 4.3.1 has no share-group dead-letter queue.*LABKIT_KAFKA_VERSION=4.4.0"):
        configure_group("127.0.0.1:1", "g", dlq_topic="dlq.x")  # refused before anything is sent
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", "4.4.0")
    assert dlq_supported()



def test_first_ns_is_the_earliest_event_matching_every_field_given():
    events = [Event("share_state", "observer", mono_ns=5, topic="t", state="ACQUIRED"),
              Event("share_state", "observer", mono_ns=9, topic="t", state="AVAILABLE"),
              Event("share_state", "observer", mono_ns=7, topic="u", state="AVAILABLE"),
              Event("delivered", "a", mono_ns=3, topic="t"), Event("delivered", "b", mono_ns=2, topic="t")]
    assert first_ns(events, "share_state", topic="t", state="AVAILABLE") == 9
    assert first_ns(events, "share_state", state="AVAILABLE") == 7
    assert first_ns(events, "delivered", "a") == 3 and first_ns(events, "delivered") == 2
    with pytest.raises(ValueError):
        first_ns(events, "crash")
def test_unknown_order_and_fault_are_refused_before_anything_runs(tmp_path):
    exp = Experiment("share", "127.0.0.1:1", folder=tmp_path)
    with pytest.raises(ValueError, match="unknown order 'both'; the orders are ack_first, sink_first"):
        framework_sink(exp, "both")
    with pytest.raises(ValueError, match="how must be 'pause' or 'crash', not 'stop'"):
        lock_expiry(exp, "stop")
    assert exp.history.events() == []


def test_a_limit_below_two_is_refused_by_the_broker(bootstrap):
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException):
        configure_group(bootstrap, "limit-group", delivery_limit=1)
