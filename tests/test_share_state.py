"""The share-state decoder (on bytes recorded from a Kafka 4.4.0 broker, and live) and the share group describe requests."""

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from labkit.broker.ports import free_port
from labkit.core.errors import BrokerUnreachableError
from labkit.core.waiting import wait_until
from labkit.kafka.records import create_topic, produce
from labkit.kafka.share_state import StateBatch, decode_state_record, describe_share_group, describe_share_group_offsets
from labkit.kafka.wire import WireError
from labkit.share.group_config import configure_group

RECORDED = Path(__file__).parent / "data" / "share_state_records_4.4.0.jsonl"


def test_recorded_records_decode_to_what_the_consumer_did():
    """Recorded on Kafka 4.4.0: offsets 0..5 delivered once; 0, 3-5 accepted, 1 released, 2 rejected."""
    rows = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    snapshot, update = (decode_state_record(bytes.fromhex(r["key"]), r["value"] and bytes.fromhex(r["value"]))
                        for r in rows)
    assert (snapshot.kind, snapshot.group_id, snapshot.partition) == ("snapshot", "g1", 0)
    assert snapshot.start_offset == -1 and snapshot.batches == () and snapshot.state_epoch == 2
    assert update.kind == "update" and update.topic_id == snapshot.topic_id and update.start_offset == 0
    assert update.batches == (StateBatch(0, 0, "ACKNOWLEDGED", 1), StateBatch(1, 1, "AVAILABLE", 1),
                              StateBatch(2, 2, "ARCHIVED", 1), StateBatch(3, 5, "ACKNOWLEDGED", 1))
    assert update.delivery_complete_count == 5  # the tagged field of KIP-1226
    key = bytes.fromhex(rows[0]["key"])
    assert decode_state_record(key, None).kind == "tombstone"


def test_bad_records_are_refused_with_a_reason():
    key = bytes.fromhex(json.loads(RECORDED.read_text().splitlines()[0])["key"])
    with pytest.raises(ValueError, match="record type 7 is not ShareSnapshot"):
        decode_state_record(b"\x00\x07" + key[2:], None)
    with pytest.raises(ValueError, match="truncated"):
        decode_state_record(key[:10], None)
    with pytest.raises(ValueError, match="value version 3"):
        decode_state_record(key, b"\x00\x03")


def test_describe_requests_show_the_members_and_the_spso(bootstrap):
    topic, group = create_topic(bootstrap, "wire"), f"wire-{time.monotonic_ns()}"
    configure_group(bootstrap, group)
    produce(bootstrap, topic, ["a", "b", "c"])
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "reader-1",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        got = []
        assert wait_until(lambda: got.extend(m for m in consumer.poll(0.5) if not m.error()) or len(got) == 3, 60)
        (member,) = describe_share_group(bootstrap, group)["members"]
        assert member["client_id"] == "reader-1" and member["assignment"] == {topic: [0]}
        for m in got:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync(30)
        # lag 0: nothing left to deliver. The SPSO itself may stay behind acknowledged records (the
        # broker moves it lazily: seen at 0 here after all three were acknowledged).
        assert wait_until(lambda: describe_share_group_offsets(bootstrap, group)[0]["lag"] == 0, 30)
        (row,) = describe_share_group_offsets(bootstrap, group)
        assert (row["topic"], row["partition"], row["error"]) == (topic, 0, None) and 0 <= row["start_offset"] <= 3
    finally:
        consumer.close()


def test_unknown_group_and_unreachable_broker_are_named(bootstrap):
    with pytest.raises(WireError, match="ShareGroupDescribe for group 'no-such-group': GROUP_ID_NOT_FOUND"):
        describe_share_group(bootstrap, "no-such-group")
    address, started = f"127.0.0.1:{free_port()}", time.monotonic()
    with pytest.raises(BrokerUnreachableError, match=address):
        describe_share_group_offsets(address, "g", timeout_s=2)
    assert time.monotonic() - started < 5
