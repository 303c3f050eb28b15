"""The release's protocol definitions, read from its kafka-clients jar (item 11 of issue 24: the KIP drafts'
numbers are taken in Kafka 4.4.0), and ConsumerGroupDescribe against the real broker."""

import pytest

from labkit.broker.settings import DEFAULT_KAFKA_VERSION, FEATURES_BY_VERSION
from labkit.kafka import protocol
from labkit.kafka.protocol import (ProtocolError, api_name, api_versions, describe_consumer_group, draft_collisions,
                                   error_names)
from labkit.kafka.wire import WireError


def test_the_jar_names_api_key_93_error_134_and_txn_offset_commit_v6():
    """Kafka 4.4.0 (the default release): the numbers KIP-1287's and KIP-1289's drafts chose are taken."""
    assert DEFAULT_KAFKA_VERSION == "4.4.0"
    assert api_name(93, DEFAULT_KAFKA_VERSION) == "StreamsGroupTopologyDescriptionUpdate"
    assert error_names([134, 133, 135, 999], DEFAULT_KAFKA_VERSION) == {134: "GROUP_DELETION_FAILED", 133: "SHARE_SESSION_LIMIT_REACHED",
                                                 135: "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED", 999: None}
    txn = api_versions("TxnOffsetCommit", DEFAULT_KAFKA_VERSION)
    assert txn["api_key"] == 28 and txn["versions"] == (0, 6)
    assert "KIP-1319" in txn["added"][6] and "topic IDs" in txn["added"][6]
    assert "KIP-890" in txn["added"][4]


def test_draft_collisions_on_the_default_release():
    rows = {(r["draft"], r["kind"]): r for r in draft_collisions(DEFAULT_KAFKA_VERSION)}
    assert rows[("KIP-1287", "error code")]["in_release"] == "GROUP_DELETION_FAILED"
    assert "KIP-1319" in rows[("KIP-1287", "TxnOffsetCommit version")]["in_release"]
    assert rows[("KIP-1289", "API key")]["in_release"] == "StreamsGroupTopologyDescriptionUpdate"
    assert all(r["taken"] for r in rows.values()) and len(rows) == 3


@pytest.mark.skipif("4.3.1" not in FEATURES_BY_VERSION, reason="4.3.1 is no longer supported")
def test_kafka_4_3_1_has_none_of_them():
    """4.3.1's jar (cached beside 4.4.0's): key 93 and code 134 are free, TxnOffsetCommit stops at v5."""
    assert api_name(93, "4.3.1") is None
    assert error_names([134, 133], "4.3.1") == {134: None, 133: "SHARE_SESSION_LIMIT_REACHED"}
    assert api_versions("TxnOffsetCommit", "4.3.1")["versions"] == (0, 5)
    assert not any(r["taken"] for r in draft_collisions("4.3.1"))


def test_an_unknown_api_names_some_that_exist():
    with pytest.raises(ProtocolError, match="has no API 'TxnShareAcknowledge'.*AddOffsetsToTxn"):
        api_versions("TxnShareAcknowledge", DEFAULT_KAFKA_VERSION)


def test_a_missing_jar_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    with pytest.raises(ProtocolError, match=r"python -m labkit jars 4.4.0"):
        protocol.clients_jar(DEFAULT_KAFKA_VERSION)


def test_describe_consumer_group_shows_member_epochs(bootstrap, tmp_path):
    from confluent_kafka import Consumer

    from labkit.kafka.records import create_topic
    topic = create_topic(bootstrap, "describe", partitions=2)
    group = f"describe-{topic}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"})
    consumer.subscribe([topic])
    try:
        for _ in range(100):
            consumer.poll(0.1)
            if len(consumer.assignment()) == 2:
                break
        described = describe_consumer_group(bootstrap, group)
        (member,) = described["members"]
        assert member["member_id"] == consumer.memberid() and member["assignment"] == {topic: [0, 1]}
        assert member["member_epoch"] == described["group_epoch"] >= 1 and described["state"] == "Stable"
    finally:
        consumer.close()
    with pytest.raises(WireError, match="GROUP_ID_NOT_FOUND"):
        describe_consumer_group(bootstrap, "no-such-group-here")
