"""A share group's configs: what a release refuses before anything is sent, and what the broker refuses."""

import pytest

from labkit.errors import LabkitError
from labkit.share.group_config import configure_group, dlq_supported


def test_dlq_needs_kafka_4_4(monkeypatch):
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", "4.3.1")
    assert not dlq_supported()
    with pytest.raises(LabkitError, match="Kafka 4.3.1 has no share-group dead-letter queue.*LABKIT_KAFKA_VERSION=4.4.0"):
        configure_group("127.0.0.1:1", "g", dlq_topic="dlq.x")  # refused before anything is sent
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", "4.4.0")
    assert dlq_supported()


def test_a_limit_below_two_is_refused_by_the_broker(bootstrap):
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException):
        configure_group(bootstrap, "limit-group", delivery_limit=1)
