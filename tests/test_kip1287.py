"""Table-driven tests of the MODELLED TxnOffsetCommit validation, one row per case of KIP-1287's
table (seed 001), plus the version gate and today's behaviour."""

import pytest

from labkit.models.kip1287 import (NONE, STALE_MEMBER_EPOCH, UNASSIGNED_PARTITION, UNKNOWN_MEMBER_ID,
                                     GroupModel)


def group():
    g = GroupModel()
    g.add("A", epoch=5, assignment={0: 3})  # A owns partition 0 since epoch 3
    g.add("B", epoch=7, assignment={1: 7})  # B owns partition 1 since epoch 7
    return g


KIP_TABLE = [
    # (case, member, client epoch, partition, today, kip1287 with UNASSIGNED_PARTITION)
    ("not assigned to anyone", "A", 5, 2, NONE, UNASSIGNED_PARTITION),
    ("assigned to a different member", "B", 7, 0, NONE, UNASSIGNED_PARTITION),
    ("assigned to this member, epoch current", "A", 5, 0, NONE, NONE),
    ("assigned to this member, heartbeat bumped broker epoch", "A", 4, 0, STALE_MEMBER_EPOCH, NONE),
    ("assigned after the client's epoch", "B", 6, 1, STALE_MEMBER_EPOCH, STALE_MEMBER_EPOCH),
    ("client epoch ahead of the broker", "A", 6, 0, STALE_MEMBER_EPOCH, STALE_MEMBER_EPOCH),
    ("unknown member", "Z", 1, 0, UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID),
]


@pytest.mark.parametrize("case, member, epoch, partition, today, proposed", KIP_TABLE, ids=[r[0] for r in KIP_TABLE])
def test_kip_table(case, member, epoch, partition, today, proposed):
    g = group()
    assert g.txn_offset_commit(member, epoch, [partition], rule="today") == {partition: today}
    assert g.txn_offset_commit(member, epoch, [partition], rule="kip1287") == {partition: proposed}


def test_the_seed_also_names_stale_member_epoch_for_unassigned_partitions():
    g = group()
    assert g.txn_offset_commit("B", 7, [0, 1], unassigned_error=STALE_MEMBER_EPOCH) == {0: STALE_MEMBER_EPOCH, 1: NONE}
    assert g.txn_offset_commit("B", 7, [0, 1]) == {0: UNASSIGNED_PARTITION, 1: NONE}  # per partition


@pytest.mark.parametrize("version", [0, 3, 5])
def test_versions_up_to_5_keep_todays_behaviour(version):
    assert group().txn_offset_commit("B", 7, [0], version=version) == {0: NONE}


def test_bad_choices_name_the_options():
    with pytest.raises(ValueError, match="the rules are today, kip1287"):
        group().txn_offset_commit("A", 5, [0], rule="kip447")
    with pytest.raises(ValueError, match="UNASSIGNED_PARTITION or STALE_MEMBER_EPOCH"):
        group().txn_offset_commit("A", 5, [0], unassigned_error="NOT_ASSIGNED")


def test_a_group_from_a_real_description_replays_the_attack():
    g = GroupModel.from_assignments({"A": [0], "B": [1]}, epoch=4)
    assert g.txn_offset_commit("B", 4, [0], rule="today") == {0: NONE}  # what Kafka 4.3.1 and 4.4.0 answered
    assert g.txn_offset_commit("B", 4, [0]) == {0: UNASSIGNED_PARTITION}
    assert g.txn_offset_commit("A", 4, [0]) == {0: NONE}
