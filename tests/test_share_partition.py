"""The modelled share partition (KIP-932 as Kafka 4.4 does it, plus KIP-1289's pending state)."""

import pytest

from labkit.models.share_partition import TERMINAL as TERMINAL_STATES
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


# -- differential: the same client steps on the real broker (notebook 06's runs) and on the model ---------------

def _final(exp, topic):
    from labkit.lessons.share_groups import persisted
    frame = persisted(exp, topic)
    return {o: ("ARCHIVED" if s == "ARCHIVING" else s) for o, s in zip(frame.offset, frame.state)}


@pytest.mark.parametrize("scenario", ["acknowledgement_types", "lock_expiry_pause", "lock_expiry_crash"])
def test_model_and_real_broker_agree_on_record_states(bootstrap, tmp_path, scenario):
    """Acquire, ACCEPT, RELEASE, REJECT, the delivery limit, lock expiry and a member crash: notebook 06's
    runs against the real broker, replayed through the model, end in the same states with the same
    delivery counts. The one known disagreement (timing aside, absorbed by a 1 s slack on the lock):
    confluent-kafka reports success for a late ACCEPT of a record another consumer has already
    committed, while the broker leaves the record as it was (notebook 06 shows it); the model says
    INVALID_RECORD_STATE, which is what the broker did."""
    from labkit.crashlab.experiment import Experiment
    from labkit.lessons import share_groups as sg
    from labkit.models.share_partition import replay_client_events

    exp = Experiment(f"diff-{scenario}", bootstrap, folder=tmp_path)
    if scenario == "acknowledgement_types":
        run, limit, records = sg.acknowledgement_types(exp, delivery_limit=3, per_record_ms=100), 3, 6
    else:
        run, limit, records = sg.lock_expiry(exp, how=scenario.rsplit("_", 1)[1]), 5, 4
    events = exp.history.events()
    model, disagreements = replay_client_events(events, run["topic"], records, limit, sg.LOCK_MS)
    known = [d for d in disagreements if "broker None, model INVALID_RECORD_STATE" in d and "ACCEPT" in d]
    assert [d for d in disagreements if d not in known] == []
    assert not known or scenario == "lock_expiry_pause"
    broker = _final(exp, run["topic"])
    assert broker == {o: r.state for o, r in enumerate(model.offsets)}, (broker, model.offsets)
    assert all(r.state in TERMINAL_STATES for r in model.offsets)
