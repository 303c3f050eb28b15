"""The client-side guard an application can call today before it commits offsets inside a transaction (notebook 05):
refuse offsets of partitions outside the consumer's assignment, which Kafka 4.3.2 and 4.4.0's group coordinator
accepts in a TxnOffsetCommit (KAFKA-20191; KIP-1287 proposes the broker-side check)."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from labkit.core.errors import LabkitError


class UnassignedPartitionError(LabkitError):
    """Offsets were about to be committed for partitions outside the consumer's assignment."""


def check_assigned(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Raise unless every partition in ``offsets`` is in ``consumer.assignment()``.

    Raises:
        UnassignedPartitionError: names the partitions outside the assignment; nothing is sent.
    """
    assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    outside = sorted(f"{tp.topic}[{tp.partition}]" for tp in offsets if (tp.topic, tp.partition) not in assigned)
    if outside:
        raise UnassignedPartitionError(
            f"refusing to commit offsets for {', '.join(outside)}: not assigned to this consumer (its assignment: "
            f"{sorted(f'{t}[{p}]' for t, p in assigned) or 'none'}). Commit only partitions you consumed from.")


def send_offsets_guarded(producer: Producer, consumer: Consumer, offsets: list[TopicPartition],
                         timeout_s: float = 30.0) -> None:
    """``producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())``, after
    :func:`check_assigned`.

    Raises:
        UnassignedPartitionError: a partition is outside the consumer's assignment (nothing sent).
        confluent_kafka.KafkaException: the transaction coordinator or group coordinator refused.
    """
    check_assigned(consumer, offsets)
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), timeout_s)
