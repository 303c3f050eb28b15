"""The KIP-1289 world (MODELLED): the seed's flow and faults, on one share partition and across several,
and hypothesis's stateful testing over random interleavings."""

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from labkit.share.check import check_share
from labkit.models.invariants import step_violations
from labkit.models.kip1289 import INPUT, World
from labkit.models.share_partition import PENDING, TERMINAL, Record

FLOW = [("poll", "c1"), ("produce", "c1"), ("send_acks", "c1")]
MARKERS = [("markers", "tx-c1", "output-0"), ("markers", "tx-c1", "__share_group_state-0")]


def steps(world, actions):
    return [world.step(a) for a in actions]


def test_commit_makes_output_visible_and_records_acknowledged_at_the_markers():
    w = World(records=1)
    steps(w, FLOW + [("commit", "c1")])
    assert w.sp.offsets[0].state == PENDING
    assert w.out.read_committed() == [] and w.out.lso() == 0  # PREPARE_COMMIT: markers not yet written
    steps(w, MARKERS[:1])
    assert w.out.read_committed() == [(0, 0)] and w.sp.offsets[0].state == PENDING  # in flight, not broken
    assert w.violations() == []
    steps(w, MARKERS[1:])
    assert w.sp.offsets[0].state == "ACKNOWLEDGED" and w.violations(final=True) == []
    assert w.tc.txns["tx-c1"].state == "COMPLETE_COMMIT"
    kinds = [e.kind for e in w.events]
    assert kinds.index("txn_commit_start") < kinds.index("effect") < kinds.index("ack_committed") < kinds.index("txn_end")


@pytest.mark.parametrize("fault", [[("crash", "c1"), ("restart", "c1")], [("timeout", "tx-c1")],
                                   [("zombie", "c1")], [("abort", "c1")]])
def test_every_way_a_transaction_fails_returns_the_record_and_discards_the_output(fault):
    w = World(records=1)
    steps(w, FLOW + fault + MARKERS)
    assert w.sp.offsets[0] == Record("AVAILABLE", 1) and w.out.read_committed() == [] and w.out.lso() == 1
    assert w.violations() == []


def test_a_zombie_is_fenced_and_a_timed_out_producer_must_abort():
    w = World(records=2)
    said = steps(w, FLOW + [("zombie", "c1")] + MARKERS + [("commit", "c1")])
    assert said[-1].endswith("PRODUCER_FENCED") and not w.clients["c1"].alive and w.clients["c1.2"].alive
    w = World(records=1)
    said = steps(w, FLOW + [("timeout", "tx-c1")] + MARKERS + [("commit", "c1")])
    assert said[-1].endswith("INVALID_PRODUCER_EPOCH") and w.clients["c1"].pc == "idle"


def test_coordinators_recover_from_their_logs():
    w = World(records=1)
    steps(w, FLOW + [("sc_crash", "__share_group_state-0"), ("commit", "c1"), ("tc_crash",)])
    assert MARKERS[0] not in w.actions()  # nobody sends them while the coordinator is down
    steps(w, [("tc_recover",)] + MARKERS)
    assert w.sp.offsets[0].state == "ACKNOWLEDGED" and w.out.read_committed() == [(0, 0)]


def test_steps_not_possible_now_are_refused_naming_the_possible_ones():
    with pytest.raises(ValueError, match="possible: .*poll"):
        World().step(("commit", "c1"))
    with pytest.raises(ValueError, match="unknown faults"):
        World(faults={"meteor": 1})


def test_the_history_it_writes_passes_notebook_06s_checker():
    w = World(records=2)
    steps(w, FLOW + [("commit", "c1")] + MARKERS + [("poll", "c2"), ("produce", "c2"), ("send_acks", "c2"),
                                                   ("commit", "c2"), ("markers", "tx-c2", "__share_group_state-0"),
                                                   ("markers", "tx-c2", "output-0")])
    result = check_share(w.events, topic=INPUT, delivery_limit=w.sp.limit, lock_ms=w.lock_ms, slack_ms=0, sink=True)
    assert result.ok, result.table()


def test_a_clean_end_has_no_violation():
    w = World(records=1)
    steps(w, FLOW + [("commit", "c1")] + MARKERS)
    assert w.violations(final=True) == []


# -- across several share partitions --------------------------------------------------------------------
TWO = dict(records=1, partitions=2)
ALL_MARKERS = [("markers", "tx-c1", p) for p in ("output-0", "__share_group_state-0", "__share_group_state-1")]


def test_one_poll_holds_records_of_both_share_partitions_and_their_state_partitions_join_the_transaction():
    w = World(**TWO)
    said = steps(w, FLOW)
    assert w.clients["c1"].held == ((0, 0), (1, 0)) and "input-0:0, input-1:0" in said[0]
    assert w.tc.txns["tx-c1"].partitions == {"output-0", "__share_group_state-0", "__share_group_state-1"}
    assert [a for a in w.actions() if a[0] == "sc_crash"] == [("sc_crash", "__share_group_state-0"),
                                                               ("sc_crash", "__share_group_state-1")]


def test_markers_go_partition_by_partition_and_a_coordinator_crash_between_them_sends_them_all_again():
    w = World(**TWO)
    steps(w, FLOW + [("commit", "c1"), ALL_MARKERS[1]])
    assert [r.state for sp in w.sps for r in sp.offsets] == ["ACKNOWLEDGED", PENDING] and w.violations() == []
    steps(w, [("tc_crash",), ("tc_recover",)])
    assert sorted(a for a in w.actions() if a[0] == "markers") == sorted(ALL_MARKERS)  # which ones were written was not logged
    said = steps(w, ALL_MARKERS)
    assert "0 acknowledgements" in said[1]  # the second COMMIT marker on __share_group_state-0 changes nothing
    assert [r.state for sp in w.sps for r in sp.offsets] == ["ACKNOWLEDGED"] * 2 and w.violations(final=True) == []


def test_a_share_coordinator_crash_hits_one_partition_and_the_refused_acknowledgement_aborts_both():
    w = World(**TWO)
    steps(w, FLOW[:2] + [("sc_crash", "__share_group_state-1")])
    assert [sp.offsets[0].state for sp in w.sps] == ["ACQUIRED", "AVAILABLE"]  # only input-1 lost its acquisition
    said = steps(w, [("send_acks", "c1")] + ALL_MARKERS)
    assert "refused {'input-1:0': 'INVALID_RECORD_STATE'}" in said[0]
    assert [sp.offsets[0] for sp in w.sps] == [Record("AVAILABLE", 1), Record("AVAILABLE", 0)]
    assert w.out.read_committed() == [] and w.violations() == []


def test_share_partitions_of_two_topics_may_share_a_state_partition():
    w = World(records=1, partitions=("orders-0", "payments-0"), state_partitions=(3, 3))
    steps(w, FLOW)
    assert w.tc.txns["tx-c1"].partitions == {"output-0", "__share_group_state-3"}
    steps(w, [("commit", "c1"), ("markers", "tx-c1", "__share_group_state-3"), ("sc_crash", "__share_group_state-3")])
    assert [sp.offsets[0].state for sp in w.sps] == ["ACKNOWLEDGED"] * 2
    assert {e.topic for e in w.events if e.kind == "ack_committed"} == {"orders", "payments"}
    with pytest.raises(ValueError, match="state_partitions"):
        World(partitions=2, state_partitions=(0,))


class Interleavings(RuleBasedStateMachine):
    """Random interleavings of every step and fault, with the draft's answers (the lock freezes while
    pending) and one with the lock-expiry abort, on one share partition or two: the invariants hold in
    every state and on every step."""

    def __init__(self):
        super().__init__()
        self.world = None

    @precondition(lambda self: self.world is None)
    @rule(option=st.sampled_from(["freeze", "abort"]), batch=st.integers(1, 2), partitions=st.integers(1, 2),
          shared=st.booleans())
    def start(self, option, batch, partitions, shared):
        self.world = World(records=3 - partitions, consumers=2, batch=batch, limit=3, lock_while_pending=option,
                           partitions=partitions, state_partitions=(0,) * partitions if shared else None,
                           history=False)

    @precondition(lambda self: self.world is not None and self.world.actions())
    @rule(data=st.data())
    def step(self, data):
        before = self.world.clone()
        action = data.draw(st.sampled_from(self.world.actions()))
        self.world.step(action)
        assert step_violations(before, self.world, action) == []

    @precondition(lambda self: self.world is not None and not self.world.actions())
    @rule()
    def nothing_left(self):
        assert all(r.state in TERMINAL for sp in self.world.sps for r in sp.offsets)

    @invariant()
    def exactly_once(self):
        if self.world is not None:
            assert self.world.violations(final=not self.world.actions(faults=False)) == []


TestInterleavings = Interleavings.TestCase
TestInterleavings.settings = settings(max_examples=80, stateful_step_count=50, deadline=None)
