import re
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from labkit.core.errors import TopicNotFoundError
from labkit.kafka.records import (caught_up, committed_offsets, create_topic, high_watermarks,
                                  last_stable_offsets, produce, read_topic)


def test_topics_get_unique_names(bootstrap):
    a, b = create_topic(bootstrap, "same"), create_topic(bootstrap, "same", partitions=3)
    assert a != b and a.startswith("same-")
    assert set(high_watermarks(bootstrap, b)) == {0, 1, 2}


def test_plain_produce_is_read_back_in_order(bootstrap):
    topic = create_topic(bootstrap)
    sent = produce(bootstrap, topic, ["x", "y", "z"], key="k")
    assert list(sent["offset"]) == [0, 1, 2]
    got = read_topic(bootstrap, topic, "read_uncommitted")
    assert list(got["value"]) == ["x", "y", "z"] and set(got["key"]) == {"k"}


def test_transaction_markers_take_an_offset_each(bootstrap):
    topic = create_topic(bootstrap)
    produce(bootstrap, topic, ["c"], transactional_id=f"t-{uuid.uuid4()}", wait_marker=True)
    # the marker is written once produce returns (the coordinator answers EndTxn before it is), so "a" follows it
    assert high_watermarks(bootstrap, topic) == last_stable_offsets(bootstrap, topic) == {0: 2}
    produce(bootstrap, topic, ["a"], transactional_id=f"t-{uuid.uuid4()}", outcome="abort", wait_marker=True)
    assert high_watermarks(bootstrap, topic) == {0: 4}  # c, COMMIT, a, ABORT
    assert list(read_topic(bootstrap, topic)["offset"]) == [0]
    assert list(read_topic(bootstrap, topic, "read_uncommitted")["offset"]) == [0, 2]


def test_open_transaction_holds_a_read_committed_read_back(bootstrap):
    topic = create_topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"open-{uuid.uuid4()}"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=0)
    producer.flush(10)
    assert list(read_topic(bootstrap, topic, "read_uncommitted")["value"]) == ["pending"]
    with pytest.raises(TimeoutError, match="is a transaction still open"):
        read_topic(bootstrap, topic, "read_committed", timeout_s=3)
    producer.abort_transaction(10)


def test_bad_outcome_is_refused_before_sending(bootstrap):
    with pytest.raises(ValueError, match="outcome must be 'commit' or 'abort'"):
        produce(bootstrap, "never-created", ["x"], transactional_id="t", outcome="maybe")


def test_caught_up_once_every_partition_with_records_is_committed_to_its_end(bootstrap):
    topic, group = create_topic(bootstrap, "caught", partitions=2), f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, ["a", "b"])  # partition 0; partition 1 stays empty, and counts as done
    assert not caught_up(bootstrap, group, topic)  # nothing committed yet
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        assert not caught_up(bootstrap, group, topic)
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        assert caught_up(bootstrap, group, topic)
    finally:
        consumer.close()
    assert not caught_up("127.0.0.1:1", group, topic, timeout_s=1)  # no broker: not yet, within seconds


def test_a_position_past_the_last_marker_counts_as_caught_up_once_what_was_returned_is_committed(bootstrap):
    topic, group = create_topic(bootstrap, "marker"), f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, ["a", "b"], transactional_id=f"t-{uuid.uuid4()}")  # a, b, COMMIT: high watermark 3
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # b returned, not committed
        assert not caught_up(bootstrap, group, topic, positions={0: 3}, returned={0: 2})
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)  # the committed offset stays below
        assert not caught_up(bootstrap, group, topic)  # the marker without a member's position
        assert not caught_up(bootstrap, group, topic, positions={0: 2}, returned={0: 2})  # not past the marker yet
        assert caught_up(bootstrap, group, topic, positions={0: 3}, returned={0: 2})
    finally:
        consumer.close()


def test_a_missing_topic_is_an_error_naming_it_and_the_broker_not_an_empty_log(bootstrap):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    named = re.escape(f"topic '{missing}' does not exist on the broker at {bootstrap}")
    for measure in (read_topic, high_watermarks, last_stable_offsets):
        with pytest.raises(TopicNotFoundError, match=named):
            measure(bootstrap, missing)
    with pytest.raises(TopicNotFoundError, match=named):
        committed_offsets(bootstrap, "g", missing)
    with pytest.raises(KafkaException, match="TOPIC_EXCEPTION"):  # the broker's other errors for a topic, too
        high_watermarks(bootstrap, "no spaces allowed")


def test_caught_up_raises_what_does_not_pass(bootstrap):
    with pytest.raises(TopicNotFoundError):  # not "not caught up yet", for ever
        caught_up(bootstrap, f"g-{uuid.uuid4().hex[:8]}", f"missing-{uuid.uuid4().hex[:8]}")
