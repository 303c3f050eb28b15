"""The MODELLED offset commit validation: Kafka 4.2's rule (history), 4.3/4.4's (KIP-1251: the current-epoch and
the lagging path) and KIP-1287's draft (seed 001), one row per case; the 4.3/4.4 rule checked against the real
broker's answers to real commits at three epochs."""

import pytest

from labkit.broker.settings import kafka_version
from labkit.crashlab.experiment import Experiment
from labkit.lessons.unassigned import epoch_paths, replay_paths
from labkit.models.kip1287 import (ILLEGAL_GENERATION, NO_EPOCH, NO_MEMBER, NONE, STALE_MEMBER_EPOCH,
                                     UNASSIGNED_PARTITION, UNKNOWN_MEMBER_ID, GroupModel, rule_of)


def group():
    g = GroupModel()
    g.add("A", epoch=5, assignment={0: 3})  # A owns partition 0 since epoch 3
    g.add("B", epoch=7, assignment={1: 7}, pending_revocation={3: 2})  # B owns 1 since 7, is giving up 3
    return g


CASES = [
    # (case, member, client epoch, partition, 4.2, 4.3/4.4, kip1287 (v6, UNASSIGNED_PARTITION)); TxnOffsetCommit v5
    ("current epoch, not assigned to anyone", "A", 5, 2, NONE, NONE, UNASSIGNED_PARTITION),
    ("current epoch, assigned to a different member", "B", 7, 0, NONE, NONE, UNASSIGNED_PARTITION),
    ("current epoch, this member's", "A", 5, 0, NONE, NONE, NONE),
    ("lagging epoch, this member's since before it (KIP-1251)", "A", 4, 0, ILLEGAL_GENERATION, NONE, NONE),
    ("lagging epoch, assigned to a different member", "A", 4, 1, ILLEGAL_GENERATION, ILLEGAL_GENERATION,
     UNASSIGNED_PARTITION),
    ("lagging epoch, assigned after the client's epoch", "B", 6, 1, ILLEGAL_GENERATION, ILLEGAL_GENERATION,
     STALE_MEMBER_EPOCH),
    ("lagging epoch, pending revocation", "B", 6, 3, ILLEGAL_GENERATION, NONE, NONE),
    ("client epoch ahead of the broker", "A", 6, 0, ILLEGAL_GENERATION, ILLEGAL_GENERATION, STALE_MEMBER_EPOCH),
    ("unknown member", "Z", 1, 0, UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID),
]


@pytest.mark.parametrize("case, member, epoch, partition, r42, r43, proposed", CASES, ids=[c[0] for c in CASES])
def test_each_rule(case, member, epoch, partition, r42, r43, proposed):
    g = group()
    assert g.txn_offset_commit(member, epoch, [partition], rule="4.2", version=5) == {partition: r42}
    for rule in ("4.3", "4.4"):
        assert g.txn_offset_commit(member, epoch, [partition], rule=rule, version=5) == {partition: r43}
    assert g.txn_offset_commit(member, epoch, [partition], rule="kip1287") == {partition: proposed}


def test_paths():
    g = group()
    assert [g.path("A", e) for e in (5, 4, 6)] == ["current", "lagging", "newer"] and g.path("Z", 1) == "unknown member"


def test_4_4_names_stale_member_epoch_from_txn_offset_commit_v6_and_on_offset_commit():
    g = group()
    assert g.txn_offset_commit("A", 6, [0], rule="4.4") == {0: STALE_MEMBER_EPOCH}  # default: 4.4's newest, v6
    assert g.txn_offset_commit("A", 6, [0], rule="4.4", version=5) == {0: ILLEGAL_GENERATION}
    assert g.offset_commit("A", 4, [1], rule="4.3", transactional=False) == {1: STALE_MEMBER_EPOCH}
    assert g.offset_commit("A", 4, [1], rule="4.4", transactional=False) == {1: STALE_MEMBER_EPOCH}
    with pytest.raises(ValueError, match="v6 does not exist under rule 4.3"):
        g.txn_offset_commit("A", 5, [0], rule="4.3", version=6)


def test_one_failing_partition_fails_the_whole_lagging_request_but_not_a_kip1287_one():
    g = group()
    assert g.txn_offset_commit("A", 4, [0, 1], rule="4.4", version=5) == {0: ILLEGAL_GENERATION, 1: ILLEGAL_GENERATION}
    assert g.txn_offset_commit("A", 4, [0, 1], rule="kip1287") == {0: NONE, 1: UNASSIGNED_PARTITION}


def test_the_seed_also_names_stale_member_epoch_for_unassigned_partitions():
    g = group()
    assert g.txn_offset_commit("B", 7, [0, 1], rule="kip1287", unassigned_error=STALE_MEMBER_EPOCH) == \
        {0: STALE_MEMBER_EPOCH, 1: NONE}


@pytest.mark.parametrize("version", [0, 3, 5])
def test_kip1287_below_v6_keeps_the_releases_rule(version):
    assert group().txn_offset_commit("B", 7, [0], rule="kip1287", version=version) == {0: NONE}


def test_bad_choices_name_the_options():
    with pytest.raises(ValueError, match="the rules are 4.2, 4.3, 4.4, kip1287"):
        group().txn_offset_commit("A", 5, [0], rule="today")
    with pytest.raises(ValueError, match="UNASSIGNED_PARTITION or STALE_MEMBER_EPOCH"):
        group().txn_offset_commit("A", 5, [0], rule="kip1287", unassigned_error="NOT_ASSIGNED")
    with pytest.raises(ValueError, match="no rule for Kafka 3.9.0"):
        rule_of("3.9.0")


def test_rule_of_a_release():
    assert (rule_of("4.3.2"), rule_of("4.4.0"), rule_of("4.2.0")) == ("4.3", "4.4", "4.2")


def test_a_group_from_a_real_description_replays_the_attack():
    g = GroupModel.from_assignments({"A": [0], "B": [1]}, epoch=4, assigned_at={"B": {1: 2}})
    assert g.members["B"].assignment == {1: 2} and g.members["A"].assignment == {0: 4}
    assert g.txn_offset_commit("B", 4, [0], rule="4.4", version=5) == {0: NONE}  # what Kafka 4.3.2 and 4.4.0 answered
    assert g.txn_offset_commit("B", 4, [0], rule="kip1287") == {0: UNASSIGNED_PARTITION}
    assert g.txn_offset_commit("B", 3, [1], rule="4.4", version=5) == {1: NONE}


def test_the_release_rule_answers_as_the_real_broker(bootstrap, tmp_path):
    """Real TxnOffsetCommits at B's epoch, one lower and one higher (:func:`epoch_paths`) against the running
    release's rule: every answer the same."""
    paths = epoch_paths(Experiment("kip1287", bootstrap, folder=tmp_path))
    replayed = replay_paths(paths)
    assert [r["real"] for r in replayed] == [r["release"] for r in replayed] == \
        [NONE, NONE, ILLEGAL_GENERATION, ILLEGAL_GENERATION], (kafka_version(), replayed)
    assert [r["path"] for r in replayed] == ["current", "lagging", "lagging", "newer"]


# The non-member path (generation -1, no member id, no group instance id): ConsumerGroup.validateOffsetCommit and
# ClassicGroup.validateOffsetCommit skip every check of such a TxnOffsetCommit, even in a group with members.
NON_MEMBER = dict(member_id=NO_MEMBER, client_epoch=NO_EPOCH)


@pytest.mark.parametrize("rule, version", [("4.2", 5), ("4.3", 5), ("4.4", 5), ("4.4", 6), ("kip1287", 5),
                                           ("kip1287", 6)])
def test_a_non_member_txn_commit_moves_any_partition_of_a_live_group(rule, version):
    assert group().txn_offset_commit(**NON_MEMBER, partitions=[0, 1, 2], rule=rule, version=version) == \
        {0: NONE, 1: NONE, 2: NONE}


def test_a_non_member_plain_commit_to_a_live_group_is_an_unknown_member():
    for rule in ("4.2", "4.3", "4.4", "kip1287"):
        assert group().offset_commit(**NON_MEMBER, partitions=[0], rule=rule, transactional=False) == \
            {0: UNKNOWN_MEMBER_ID}


def test_kip1287_checked_reading_refuses_a_non_member_from_v6_only():
    g = group()
    assert g.txn_offset_commit(**NON_MEMBER, partitions=[0, 2], rule="kip1287", non_member="checked") == \
        {0: UNASSIGNED_PARTITION, 2: UNASSIGNED_PARTITION}
    assert g.txn_offset_commit(**NON_MEMBER, partitions=[0], rule="kip1287", non_member="checked",
                               unassigned_error=STALE_MEMBER_EPOCH) == {0: STALE_MEMBER_EPOCH}
    assert g.txn_offset_commit(**NON_MEMBER, partitions=[0], rule="kip1287", non_member="checked", version=5) == \
        {0: NONE}  # the version gate: a client sending v5 or below keeps the release's rule
    assert g.txn_offset_commit(**NON_MEMBER, partitions=[0], rule="4.4", non_member="checked") == {0: NONE}


def test_an_empty_group_takes_any_commit_without_a_member():
    empty = GroupModel()
    for transactional in (True, False):
        assert empty.offset_commit(**NON_MEMBER, partitions=[0], transactional=transactional) == {0: NONE}
    assert empty.txn_offset_commit(**NON_MEMBER, partitions=[0], rule="kip1287", non_member="checked") == {0: NONE}


def test_any_of_the_three_fields_takes_the_member_path():
    g = group()
    assert not GroupModel.is_non_member(NO_MEMBER, NO_EPOCH, "instance-1")
    assert g.txn_offset_commit(NO_MEMBER, NO_EPOCH, [0], group_instance_id="instance-1") == {0: UNKNOWN_MEMBER_ID}
    assert g.txn_offset_commit(NO_MEMBER, 5, [0]) == {0: UNKNOWN_MEMBER_ID}
    assert g.txn_offset_commit("A", NO_EPOCH, [0], version=5) == {0: ILLEGAL_GENERATION}  # lagging, assigned at 3


def test_a_bad_non_member_reading_names_the_options():
    with pytest.raises(ValueError, match="non_member must be one of 'as drafted', 'checked'"):
        group().txn_offset_commit(**NON_MEMBER, partitions=[0], non_member="closed")
