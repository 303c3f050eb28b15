"""Notebook 05's runs on the real broker: a plain OffsetCommit of another member's partition, and the real answer
replayed beside each rule of the group coordinator's model."""

from labkit.crashlab.experiment import Experiment
from labkit.lessons.unassigned import epoch_paths, replay_commit


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
    rows = replay_commit(bug, "4.3.2")
    assert [r["answer"] for r in rows] == ["NONE", "NONE", "NONE", "NONE", "UNASSIGNED_PARTITION", "STALE_MEMBER_EPOCH"]
    assert rows[0]["coordinator"] == "Kafka 4.3.2, real broker" and rows[2]["coordinator"].startswith("Kafka 4.3's rule")
    lagging = replay_commit({**bug, "b_epoch": 2}, "4.4.0")
    assert [r["answer"] for r in lagging][1:3] == ["ILLEGAL_GENERATION", "ILLEGAL_GENERATION"]
