"""The KIP-1289 invariants (MODELLED): each anomaly caught on a hand-made bad state or step, and no false
alarm on the clean ones, in flight between two markers included."""

import pytest

from labkit.models.invariants import state_violations, step_violations
from labkit.models.kip1289 import World
from labkit.models.share_partition import PENDING, Record
from labkit.models.txn_coordinator import DataRecord

FLOW = [("poll", "c1"), ("produce", "c1"), ("send_acks", "c1"), ("commit", "c1")]
OUT, S0, S1 = "output-0", "__share_group_state-0", "__share_group_state-1"


def world(*actions, **options):
    w = World(**{"records": 1, **options})
    for a in actions:
        w.step(a)
    return w


def bad(change, **options):
    w = world(**options)
    change(w)
    return state_violations(w, final=True)


@pytest.mark.parametrize("change, expected", [
    (lambda w: w.out.records.extend([DataRecord((0, 0), 1000, "committed")] * 2), "duplicate: input-0:0"),
    (lambda w: w.out.records.append(DataRecord((0, 0), 1000, "committed")),
     "input-0:0's output is committed but the record is AVAILABLE: its acknowledgement was discarded"),
    (lambda w: w.sps[0].offsets.__setitem__(0, Record("ACKNOWLEDGED", 1)), "loss: input-0:0 is ACKNOWLEDGED"),
    (lambda w: w.sps[0].offsets.__setitem__(0, Record("ARCHIVED", 9)), "input-0:0 delivered 9 times, over the limit"),
    (lambda w: w.sps[0].offsets.__setitem__(0, Record("ACQUIRED", 1, "c1")), "input-0:0 ended ACQUIRED"),
])
def test_each_exactly_once_anomaly_is_caught(change, expected):
    found = bad(change)
    assert any(expected in v for v in found), found


def test_an_output_committed_while_another_transaction_holds_the_record_pending_is_caught():
    w = world(*FLOW)  # c1's acknowledgement pending for producer id 1000; an output of c2's (1001) committed
    w.out.records.append(DataRecord((0, 0), 1001, "committed"))
    assert any("output is committed but the record is TX_PENDING" in v for v in state_violations(w))


def test_an_acknowledgement_no_marker_will_settle_is_caught():
    w = world(*FLOW, ("markers", "tx-c1", OUT), ("markers", "tx-c1", S0), ("markers", "tx-c1", S1), partitions=2)
    w.sps[1].pending[1000] = {0: "ACCEPT"}  # as if __share_group_state-1 had missed its marker
    assert any("tx-c1's transaction is COMPLETE_COMMIT but its acknowledgement of input-1:0 is still pending on "
               "__share_group_state-1" in v for v in state_violations(w))
    w = world(("poll", "c1"), ("produce", "c1"), partitions=2)
    w.sps[1].pending[1000] = {0: "ACCEPT"}  # pending on a state partition that is not in the open transaction
    assert any("ONGOING but its acknowledgement of input-1:0" in v for v in state_violations(w))


def test_markers_that_break_atomicity_are_caught_on_the_step():
    before = world(*FLOW, partitions=2)
    after = before.clone()
    after.sps[1].pending.clear()  # a COMMIT marker that dropped the acknowledgement instead of applying it
    after.tc.mark("tx-c1", S1)
    assert step_violations(before, after, ("markers", "tx-c1", S1)) == [
        "tx-c1's COMMIT marker left its ACCEPT of input-1:0 TX_PENDING"]
    before = world(*FLOW[:3], ("abort", "c1"))
    after = before.clone()
    after.sps[0].offsets[0] = Record("ACKNOWLEDGED", 1)  # an ABORT marker that applied the acknowledgement
    assert step_violations(before, after, ("markers", "tx-c1", S0)) == ["tx-c1's ABORT marker made input-0:0 ACKNOWLEDGED"]
    after = world(*FLOW, ("markers", "tx-c1", OUT), ("markers", "tx-c1", S0))
    later = after.clone()
    later.sps[0].offsets[0] = Record("AVAILABLE", 1)
    assert step_violations(after, later, ("sc_crash", S0)) == ["input-0:0 left the terminal state ACKNOWLEDGED for AVAILABLE"]


def test_between_two_markers_a_decided_commit_is_in_flight_not_broken():
    w = world(*FLOW, ("markers", "tx-c1", OUT))  # output visible, acknowledgement still pending
    assert w.out.read_committed() == [(0, 0)] and w.sp.offsets[0].state == PENDING and state_violations(w) == []
    w = world(*FLOW, ("markers", "tx-c1", S0))  # record ACKNOWLEDGED, output not yet visible
    assert w.sp.offsets[0].state == "ACKNOWLEDGED" and w.out.read_committed() == [] and state_violations(w) == []
    w = world(*FLOW, ("markers", "tx-c1", S0), ("tc_crash",))  # the decision is read from __transaction_state
    assert state_violations(w) == []


def test_an_abort_archiving_a_record_at_the_delivery_limit_is_kip_932_not_a_broken_abort():
    before = world(*FLOW[:3], ("abort", "c1"), ("markers", "tx-c1", OUT), limit=1)
    after = before.clone()
    after.step(("markers", "tx-c1", S0))
    assert after.sp.offsets[0] == Record("ARCHIVED", 1) and step_violations(before, after, ("markers", "tx-c1", S0)) == []
    assert state_violations(after, final=True) == []
