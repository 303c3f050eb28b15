"""The client-side guard and the notebook's group member, against the real broker."""

import pytest
from confluent_kafka import TopicPartition

from labkit.crashlab.experiment import Experiment
from labkit.lessons.unassigned import (GroupMember, GroupMetadataFormatError, UnassignedPartitionError,
                                      check_assigned, classic_session, describe_assignments, epoch_paths,
                                      metadata_epoch, replay_commit, with_epoch)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_member_commits_its_own_partitions_and_the_guard_refuses_others(bootstrap, tmp_path, protocol):
    exp = Experiment("guard", bootstrap, folder=tmp_path)
    topic = exp.topic("in", partitions=2)
    member = GroupMember(exp, f"g-{exp.run_id}-{protocol}", topic, protocol=protocol)
    try:
        assert member.join(partitions=2) == [0, 1]  # alone in the group: both partitions
        assert member.commit_offsets({0: 0, 1: 0}, guard=True) == {0: "NONE", 1: "NONE"}
        assert describe_assignments(bootstrap, f"g-{exp.run_id}-{protocol}") == {member.member_id: [0, 1]}
        check_assigned(member.consumer, [TopicPartition(topic, 1, 5)])
        with pytest.raises(UnassignedPartitionError, match=rf"refusing to commit offsets for {topic}\[7\]"):
            check_assigned(member.consumer, [TopicPartition(topic, 7, 5)])
        with pytest.raises(UnassignedPartitionError):
            member.commit_offsets({7: 5}, guard=True)
        refused = [e for e in exp.history.events() if e.error == "REFUSED_BY_GUARD"]
        assert len(refused) == 1  # recorded, and nothing was sent
        assert member.commit_offsets({0: 1}, guard=True) == {0: "NONE"}  # the refused transaction was ended
    finally:
        member.close()


def test_session_settings_only_for_classic():
    assert classic_session("consumer") == {}
    assert classic_session("classic")["session.timeout.ms"] == 10_000


def test_metadata_epoch_reads_and_rewrites_librdkafkas_group_metadata():
    metadata = b"CGMDv2:" + (7).to_bytes(4, "little") + b"g\x00m\x00\x01"
    assert metadata_epoch(metadata) == 7
    assert metadata_epoch(with_epoch(metadata, 6)) == 6 and with_epoch(metadata, 6)[11:] == metadata[11:]
    with pytest.raises(GroupMetadataFormatError, match="not librdkafka's CGMDv2"):
        metadata_epoch(b"CGMDv3:....")


def test_a_plain_offset_commit_of_another_members_partition_goes_through(bootstrap, tmp_path):
    """Item 4 of issue 24: ``consumer.commit`` (OffsetCommit, B's current member epoch) for A's partition: accepted,
    and A's partition's committed offset is B's. B's metadata epoch is its member epoch at the broker."""
    paths = epoch_paths(Experiment("plain", bootstrap, folder=tmp_path), plain_offset=4)
    assert paths["plain"] == {"answer": "NONE", "committed": 4}
    assert paths["b_epoch"] == paths["b_broker_epoch"] > paths["first_epoch"] >= 1
    assert {paths["own"], paths["victim"]} == {0, 1}


def test_replay_commit_puts_the_real_answer_beside_each_rule():
    bug = {"assignments": {"A": [1], "B": [0]}, "b_broker_epoch": 3, "b_epoch": 3, "member_b": "B", "victim": 1,
           "answer": "NONE"}
    rows = replay_commit(bug, "4.3.1")
    assert [r["answer"] for r in rows] == ["NONE", "NONE", "NONE", "NONE", "UNASSIGNED_PARTITION", "STALE_MEMBER_EPOCH"]
    assert rows[0]["coordinator"] == "Kafka 4.3.1, real broker" and rows[2]["coordinator"].startswith("Kafka 4.3's rule")
    lagging = replay_commit({**bug, "b_epoch": 2}, "4.4.0")
    assert [r["answer"] for r in lagging][1:3] == ["ILLEGAL_GENERATION", "ILLEGAL_GENERATION"]
