"""Why labkit's processor checks the committed offset itself (:mod:`labkit.kafka.committed_start`) instead of
setting ``auto.offset.reset=error``: on the real broker, with librdkafka 2.16, a partition librdkafka starts
without a committed offset stops with an error and cannot be sought. (The client bug the guard corrects, and
the guard, are asserted by notebook 08's claims cell: part 5.)"""

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from labkit.core.waiting import Deadline
from labkit.kafka.records import create_topic, produce


def _first_event(consumer: Consumer, timeout_s: float) -> tuple[str, object] | None:
    """("record", offset) or ("error", the KafkaError) of the first message ``consumer`` polls within
    ``timeout_s`` s; None if none."""
    deadline = Deadline(timeout_s)
    while not deadline.expired():
        m = consumer.poll(0.2)
        if m is not None:
            return ("error", m.error()) if m.error() else ("record", m.offset())
    return None


def test_auto_offset_reset_error_stops_the_partition_and_seek_is_refused(bootstrap):
    topic = create_topic(bootstrap, "reset-error")
    produce(bootstrap, topic, [f"v{i}" for i in range(10)])
    # a group with nothing committed: librdkafka starts the partition at offset INVALID, as it does when it keeps
    # an UNSTABLE_OFFSET_COMMIT answer's -1 (notebook 08, part 5)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reset-error-{uuid.uuid4()}",
                         "group.protocol": "consumer", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.subscribe([topic])
    try:
        # rd_kafka_offset_reset (rdkafka_offset.c): auto.offset.reset=error raises _AUTO_OFFSET_RESET and sets the
        # partition's fetch state to NONE
        kind, error = _first_event(consumer, 30) or (None, None)
        assert kind == "error" and error.code() == KafkaError._AUTO_OFFSET_RESET, (kind, error)
        # rd_kafka_toppar_seek (rdkafka_partition.c) refuses a partition whose fetcher is not started: _STATE
        with pytest.raises(KafkaException) as refused:
            consumer.seek(TopicPartition(topic, 0, 3))
        assert refused.value.args[0].code() == KafkaError._STATE, refused.value
        assert _first_event(consumer, 3) is None, "the partition stays stopped"
        # taking the partition out of the assignment and back in at an offset restarts it there
        consumer.incremental_unassign([TopicPartition(topic, 0)])
        consumer.incremental_assign([TopicPartition(topic, 0, 3)])
        assert _first_event(consumer, 10) == ("record", 3)
    finally:
        consumer.close()
