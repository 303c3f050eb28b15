"""The KIP drafts' numbers against the running release (item 11 of issue 24: taken in Kafka 4.4.0): API key and
TxnOffsetCommit version as the real broker answers ApiVersions, error codes from the release's kafka-clients jar; and
ConsumerGroupDescribe against the real broker."""

import pytest

from labkit.broker.settings import DEFAULT_KAFKA_VERSION, FEATURES_BY_VERSION, kafka_at_least
from labkit.kafka import protocol
from labkit.kafka.protocol import ProtocolError, describe_consumer_group, draft_collisions, error_names
from labkit.kafka.wire import WireError


def test_the_jar_names_error_134_on_the_default_release():
    """Kafka 4.4.0 (the default release): KIP-1287's error code is taken."""
    assert DEFAULT_KAFKA_VERSION == "4.4.0"
    assert error_names([134, 133, 135, 999], DEFAULT_KAFKA_VERSION) == {134: "GROUP_DELETION_FAILED", 133: "SHARE_SESSION_LIMIT_REACHED",
                                                 135: "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED", 999: None}


def test_draft_collisions_on_the_running_broker(bootstrap):
    rows = {(r["draft"], r["kind"]): r for r in draft_collisions(bootstrap)}
    assert len(rows) == 3 and all(r["taken"] == kafka_at_least("4.4") for r in rows.values()), rows
    if kafka_at_least("4.4"):
        assert rows[("KIP-1287", "error code")]["in_release"] == "GROUP_DELETION_FAILED"
        assert rows[("KIP-1287", "TxnOffsetCommit version")]["in_release"] == "TxnOffsetCommit versions 0-6"
        assert rows[("KIP-1289", "API key")]["in_release"] == "StreamsGroupTopologyDescriptionUpdate (versions 0-0)"


def test_without_the_error_codes_no_jar_or_java_is_needed(bootstrap, monkeypatch, tmp_path):
    """Notebook 07's table on the Docker route: an empty jar cache and no java on PATH."""
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    rows = draft_collisions(bootstrap, error_codes=False)
    assert [r["kind"] for r in rows] == ["TxnOffsetCommit version", "API key"]
    assert all(r["taken"] == kafka_at_least("4.4") for r in rows), rows


@pytest.mark.skipif("4.3.2" not in FEATURES_BY_VERSION, reason="4.3.2 is no longer supported")
def test_kafka_4_3_2_has_no_error_134():
    """4.3.2's jar (cached beside 4.4.0's): code 134 is free (its broker's API key 93 and TxnOffsetCommit v6:
    notebook 05 on 4.3.2, tests/test_older_releases.py)."""
    assert error_names([134, 133], "4.3.2") == {134: None, 133: "SHARE_SESSION_LIMIT_REACHED"}


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
