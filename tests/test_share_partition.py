"""The modelled share partition (KIP-932 as Kafka 4.4 does it, plus KIP-1289's pending state)."""

import pytest

from labkit.models.share_partition import (ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, INVALID_RECORD_STATE,
                                           INVALID_REQUEST, PENDING, SharePartition)


def states(sp):
    return [(r.state, r.count) for r in sp.offsets]


def test_acquire_counts_deliveries_and_acknowledgements_end_in_their_states():
    sp = SharePartition(4, limit=2)
    assert sp.acquire("a", 3) == [0, 1, 2] and sp.speo == 3
    assert [sp.acknowledge("a", o, t) for o, t in enumerate(["ACCEPT", "REJECT", "RELEASE"])] == [None] * 3
    assert states(sp) == [(ACKNOWLEDGED, 1), (ARCHIVED, 1), (AVAILABLE, 1), (AVAILABLE, 0)]
    assert sp.spso == 2
    assert sp.acquire("b", 5) == [2, 3] and sp.offsets[2].count == 2
    assert sp.acknowledge("a", 2, "ACCEPT") == INVALID_RECORD_STATE  # b holds it now
    assert sp.acknowledge("b", 2, "RELEASE") is None and sp.offsets[2].state == ARCHIVED  # at the limit
    with pytest.raises(ValueError, match="ack_type"):
        sp.acknowledge("b", 3, "MAYBE")


def test_lock_expiry_and_member_leaving_release():
    sp = SharePartition(3, limit=5)
    sp.acquire("a", 2)
    sp.acquire("b", 1)
    assert sp.release(0) and sp.offsets[0].state == AVAILABLE
    assert sp.member_left("a") == [1] and sp.offsets[2].state == ACQUIRED
    assert not sp.release(1)  # already AVAILABLE


def test_transactional_acknowledgements_wait_for_the_marker():
    sp = SharePartition(3, limit=2)
    sp.acquire("a", 3)
    assert sp.acknowledge_in_txn("a", 0, "ACCEPT", pid=7) is None
    assert sp.acknowledge_in_txn("a", 1, "REJECT", pid=7) is None
    assert sp.acknowledge_in_txn("a", 2, "RELEASE", pid=7) == INVALID_REQUEST
    assert sp.acknowledge_in_txn("b", 2, "ACCEPT", pid=8) == INVALID_RECORD_STATE
    assert [r.state for r in sp.offsets] == [PENDING, PENDING, ACQUIRED]
    assert sp.complete(7, commit=True) == {0: "ACCEPT", 1: "REJECT"}
    assert [r.state for r in sp.offsets[:2]] == [ACKNOWLEDGED, ARCHIVED]


@pytest.mark.parametrize("count_on_abort, after", [("keep", [(AVAILABLE, 1), (ARCHIVED, 2)]),
                                                    ("revert", [(AVAILABLE, 0), (AVAILABLE, 1)])])
def test_abort_returns_records_keeping_or_reverting_the_delivery_count(count_on_abort, after):
    sp = SharePartition(2, limit=2, count_on_abort=count_on_abort)
    sp.acquire("a", 1)
    sp.acknowledge("a", 0, "RELEASE")
    sp.acquire("a", 1)  # offset 0 again (count 2)
    sp.acquire("a", 1)  # offset 1 (count 1)
    sp.acknowledge_in_txn("a", 0, "ACCEPT", 7)
    sp.acknowledge_in_txn("a", 1, "ACCEPT", 7)
    sp.complete(7, commit=False)
    assert sorted(states(sp), key=lambda s: s[1]) == sorted(after[::-1], key=lambda s: s[1])


@pytest.mark.parametrize("option, state", [("freeze", PENDING), ("abort", PENDING), ("release", AVAILABLE)])
def test_lock_expiry_while_pending_follows_the_option(option, state):
    sp = SharePartition(1, lock_while_pending=option)
    sp.acquire("a", 1)
    sp.acknowledge_in_txn("a", 0, "ACCEPT", 7)
    sp.release(0)
    assert sp.offsets[0].state == state


def test_reload_keeps_what_was_persisted_and_loses_acquisitions():
    sp = SharePartition(4, limit=3)
    sp.acquire("a", 4)
    sp.acknowledge("a", 0, "ACCEPT")
    sp.acknowledge("a", 1, "RELEASE")
    sp.acknowledge_in_txn("a", 2, "REJECT", 7)
    sp.acquire("b", 1)  # offset 1, delivery 2: not persisted
    sp.reload()
    assert states(sp) == [(ACKNOWLEDGED, 1), (AVAILABLE, 1), (PENDING, 1), (AVAILABLE, 0)]
    assert sp.pending == {7: {2: "REJECT"}}
    sp.complete(7, commit=True)
    sp.reload()  # the marker is in the log too
    assert sp.offsets[2].state == ARCHIVED and sp.pending == {}


def test_bad_options_name_the_choices():
    with pytest.raises(ValueError, match="freeze"):
        SharePartition(1, lock_while_pending="sometimes")


# The differential check (the same client steps on the real broker and on the model, ending in the same states) is
# notebook 06's claim 6: it replays the notebook's own runs (parts 2 and 3) instead of running them again here.
