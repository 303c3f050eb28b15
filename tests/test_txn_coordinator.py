"""The modelled transaction coordinator and a data partition's LSO (KIP-98)."""

import pytest

from labkit.models.txn_coordinator import (COMPLETE_ABORT, COMPLETE_COMMIT, CONCURRENT_TRANSACTIONS,
                                           COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_EPOCH, ONGOING,
                                           PREPARE_ABORT, PREPARE_COMMIT, PRODUCER_FENCED, DataPartition,
                                           TxnCoordinator)


def test_a_transaction_goes_through_its_states_and_is_logged_first():
    tc = TxnCoordinator()
    _, t = tc.init_producer_id("tx", "a")
    assert tc.check("tx", "a", t.epoch) is None
    assert tc.add("tx", "output-0", 0).state == ONGOING
    assert tc.add("tx", "__share_group_state-0", 0).partitions == {"output-0", "__share_group_state-0"}
    assert tc.end("tx", commit=True).state == PREPARE_COMMIT
    assert tc.check("tx", "a", t.epoch) == CONCURRENT_TRANSACTIONS
    assert tc.pending_markers()[0].state == PREPARE_COMMIT
    assert tc.markers_written("tx").state == COMPLETE_COMMIT
    assert [e.state for e in tc.log] == ["EMPTY", ONGOING, ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT]


def test_init_fences_the_previous_instance_and_aborts_its_transaction():
    tc = TxnCoordinator()
    _, old = tc.init_producer_id("tx", "a")
    tc.add("tx", "output-0", 0)
    _, new = tc.init_producer_id("tx", "a'")
    assert new.epoch == old.epoch + 1 and new.state == PREPARE_ABORT
    assert tc.check("tx", "a", old.epoch) == PRODUCER_FENCED
    assert tc.init_producer_id("tx", "a''") == (CONCURRENT_TRANSACTIONS, None)  # markers first


def test_a_timeout_bumps_the_epoch_and_a_crash_recovers_from_the_log():
    tc = TxnCoordinator()
    _, t = tc.init_producer_id("tx", "a")
    tc.add("tx", "output-0", 0)
    tc.time_out("tx")
    assert tc.check("tx", "a", t.epoch) == INVALID_PRODUCER_EPOCH
    tc.crash()
    assert tc.check("tx", "a", t.epoch) == COORDINATOR_NOT_AVAILABLE and tc.pending_markers() == []
    tc.recover()
    assert [m.state for m in tc.pending_markers()] == [PREPARE_ABORT]
    assert tc.markers_written("tx").state == COMPLETE_ABORT


def test_markers_are_written_partition_by_partition_and_a_recovered_coordinator_sends_them_all_again():
    tc = TxnCoordinator()
    tc.init_producer_id("tx", "a")
    for p in ("output-0", "__share_group_state-0", "__share_group_state-1"):
        tc.add("tx", p, 0)
    tc.end("tx", commit=True)
    assert tc.mark("tx", "__share_group_state-1").marked == {"__share_group_state-1"}
    assert tc.log[-1].state == PREPARE_COMMIT and not tc.log[-1].marked  # never logged
    tc.crash()
    assert tc.decision(1000) == PREPARE_COMMIT  # __transaction_state still says it
    tc.recover()
    assert tc.txns["tx"].marked == frozenset() and tc.pending_markers()[0].partitions == {
        "output-0", "__share_group_state-0", "__share_group_state-1"}
    for p in ("__share_group_state-1", "output-0"):
        tc.mark("tx", p)
    assert tc.mark("tx", "__share_group_state-0").state == COMPLETE_COMMIT and tc.decision(1000) == COMPLETE_COMMIT
    with pytest.raises(ValueError, match="no marker of tx is pending"):
        tc.mark("tx", "output-0")


def test_lso_stops_at_the_first_open_transaction():
    out = DataPartition()
    out.append(0, pid=1)
    out.append(1, pid=2)
    out.append(2, pid=1)
    assert out.lso() == 0 and out.read_committed() == []
    assert out.marker(1, commit=True) == [0, 2]
    assert out.lso() == 1 and out.read_committed() == [0]  # pid 2 still open at offset 1
    out.marker(2, commit=False)
    assert out.lso() == 3 and out.read_committed() == [0, 2]
