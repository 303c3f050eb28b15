"""The notebook's group member and the client-side guard it can commit through, against the real broker."""

import pytest
from confluent_kafka import TopicPartition

from labkit.crashlab.experiment import Experiment
from labkit.kafka.group_member import GroupMember, classic_session, describe_assignments
from labkit.kafka.offset_guard import UnassignedPartitionError, check_assigned


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
