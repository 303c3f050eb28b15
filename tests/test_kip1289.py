"""The KIP-1289 world (MODELLED): the seed's flow and faults, its invariants on hand-made bad states,
and hypothesis's stateful testing over random interleavings."""

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from labkit.share.check import check_share
from labkit.models.kip1289 import INPUT, World
from labkit.models.share_partition import PENDING, TERMINAL, Record
from labkit.models.txn_coordinator import DataRecord

FLOW = [("poll", "c1"), ("produce", "c1"), ("send_acks", "c1")]


def steps(world, actions):
    return [world.step(a) for a in actions]


def test_commit_makes_output_visible_and_records_acknowledged_at_the_markers():
    w = World(records=1)
    steps(w, FLOW + [("commit", "c1")])
    assert w.sp.offsets[0].state == PENDING
    assert w.out.read_committed() == [] and w.out.lso() == 0  # PREPARE_COMMIT: markers not yet written
    steps(w, [("markers", "tx-c1")])
    assert w.sp.offsets[0].state == "ACKNOWLEDGED" and w.out.read_committed() == [0] and w.violations(final=True) == []
    kinds = [e.kind for e in w.events]
    assert kinds.index("txn_commit_start") < kinds.index("ack_committed") < kinds.index("effect")


@pytest.mark.parametrize("fault", [[("crash", "c1"), ("restart", "c1")], [("timeout", "tx-c1")],
                                   [("zombie", "c1")], [("abort", "c1")]])
def test_every_way_a_transaction_fails_returns_the_record_and_discards_the_output(fault):
    w = World(records=1)
    steps(w, FLOW + fault + [("markers", "tx-c1")])
    assert w.sp.offsets[0] == Record("AVAILABLE", 1) and w.out.read_committed() == [] and w.out.lso() == 1
    assert w.violations() == []


def test_a_zombie_is_fenced_and_a_timed_out_producer_must_abort():
    w = World(records=2)
    said = steps(w, FLOW + [("zombie", "c1"), ("markers", "tx-c1"), ("commit", "c1")])
    assert said[-1].endswith("PRODUCER_FENCED") and not w.clients["c1"].alive and w.clients["c1.2"].alive
    w = World(records=1)
    said = steps(w, FLOW + [("timeout", "tx-c1"), ("markers", "tx-c1"), ("commit", "c1")])
    assert said[-1].endswith("INVALID_PRODUCER_EPOCH") and w.clients["c1"].pc == "idle"


def test_coordinators_recover_from_their_logs():
    w = World(records=1)
    steps(w, FLOW + [("sc_crash",), ("commit", "c1"), ("tc_crash",)])
    assert ("markers", "tx-c1") not in w.actions()  # nobody sends them while the coordinator is down
    steps(w, [("tc_recover",), ("markers", "tx-c1")])
    assert w.sp.offsets[0].state == "ACKNOWLEDGED" and w.out.read_committed() == [0]


def test_steps_not_possible_now_are_refused_naming_the_possible_ones():
    with pytest.raises(ValueError, match="possible: .*poll"):
        World().step(("commit", "c1"))
    with pytest.raises(ValueError, match="unknown faults"):
        World(faults={"meteor": 1})


def test_the_history_it_writes_passes_notebook_06s_checker():
    w = World(records=2)
    steps(w, FLOW + [("commit", "c1"), ("markers", "tx-c1"), ("poll", "c2"), ("produce", "c2"), ("send_acks", "c2"),
                     ("commit", "c2"), ("markers", "tx-c2")])
    result = check_share(w.events, topic=INPUT, delivery_limit=w.sp.limit, lock_ms=w.lock_ms, slack_ms=0, sink=True)
    assert result.ok, result.table()


def bad(world, change):
    change(world)
    return world.violations(final=True)


@pytest.mark.parametrize("change, expected", [
    (lambda w: w.out.records.extend([DataRecord(0, 1, "committed")] * 2), "duplicate"),
    (lambda w: w.out.records.append(DataRecord(0, 1, "committed")), "committed but the record is AVAILABLE"),
    (lambda w: w.sp.offsets.__setitem__(0, Record("ACKNOWLEDGED", 1)), "loss"),
    (lambda w: w.sp.offsets.__setitem__(0, Record("ARCHIVED", 9)), "over the limit"),
])
def test_invariants_catch_each_hand_made_bad_state(change, expected):
    found = bad(World(records=1), change)
    assert any(expected in v for v in found), found


def test_a_clean_end_has_no_violation():
    w = World(records=1)
    steps(w, FLOW + [("commit", "c1"), ("markers", "tx-c1")])
    assert w.violations(final=True) == []


class Interleavings(RuleBasedStateMachine):
    """Random interleavings of every step and fault, with the draft's answers (the lock freezes while
    pending) and one with the lock-expiry abort: the invariants hold in every state."""

    def __init__(self):
        super().__init__()
        self.world = None

    @precondition(lambda self: self.world is None)
    @rule(option=st.sampled_from(["freeze", "abort"]), batch=st.integers(1, 2))
    def start(self, option, batch):
        self.world = World(records=3, consumers=2, batch=batch, limit=3, lock_while_pending=option, history=False)

    @precondition(lambda self: self.world is not None and self.world.actions())
    @rule(data=st.data())
    def step(self, data):
        before = [r.state for r in self.world.sp.offsets]
        self.world.step(data.draw(st.sampled_from(self.world.actions())))
        for old, new in zip(before, self.world.sp.offsets):
            assert old not in TERMINAL or new.state == old, (old, new)

    @precondition(lambda self: self.world is not None and not self.world.actions())
    @rule()
    def nothing_left(self):
        assert all(r.state in TERMINAL for r in self.world.sp.offsets)

    @invariant()
    def exactly_once(self):
        if self.world is not None:
            assert self.world.violations(final=not self.world.actions(faults=False)) == []


TestInterleavings = Interleavings.TestCase
TestInterleavings.settings = settings(max_examples=80, stateful_step_count=50, deadline=None)
