"""The crash step of labkit/crashlab/broker_restart.py: when a processor holds a transaction open (hand-written
histories), and what it refuses before killing anything (a real broker; notebooks 08 and 09 run the restarts)."""

import pytest

from labkit.core.errors import LabkitError
from labkit.core.history import Event
from labkit.crashlab.broker_restart import broker_restart_in_transaction, check_killed_in_hold, holds_transaction
from labkit.crashlab.experiment import Experiment
from tests.histories import H


def test_a_processor_holds_a_transaction_once_one_committed_and_the_next_has_a_fresh_output():
    h = H().add("start", "p").write("p", "s-1>out", 0, txn=1)
    assert not holds_transaction(h.events, "p")  # its first transaction: nothing committed before the kill yet
    h.txn("p", 1, "committed")
    assert not holds_transaction(h.events, "p")  # between transactions
    h.write("p", "s-2>out", 2, txn=2)
    acked = h.events[-1].mono_ns
    assert holds_transaction(h.events, "p") and not holds_transaction(h.events, "q")
    assert holds_transaction(h.events, "p", acked) and not holds_transaction(h.events, "p", acked + 1)  # too old
    h.add("offsets_sent", "p", txn=2)
    assert not holds_transaction(h.events, "p")  # its hold is over: it sent the offsets


def _killed(after: str | None, ack_to_kill_s: float) -> list[Event]:
    """Processor p committed transaction 1, had s-2>out acknowledged in transaction 2 at 10 s, then (``after``) logged
    one more step at 10.5 s, and the broker was killed ``ack_to_kill_s`` after the acknowledgement."""
    s = 1_000_000_000
    events = [Event("ack", "p", 1 * s, value_id="s-1>out", txn=1), Event("txn_end", "p", 2 * s, txn=1, outcome="committed"),
              Event("ack", "p", 10 * s, value_id="s-2>out", txn=2)]
    events += [Event(after, "p", int(10.5 * s), txn=2)] if after else []
    return events + [Event("crash", "broker", int((10 + ack_to_kill_s) * s))]


def test_the_lab_says_so_when_its_kill_missed_a_processor_s_hold():
    check_killed_in_hold(_killed(None, 2.0), ["p"], hold_ms=2500)  # 2 s into a 2.5 s hold: inside it
    with pytest.raises(LabkitError, match=r"hold of p ended \(its last ack came 3.00 s before the kill, the hold is 2.5 s"):
        check_killed_in_hold(_killed(None, 3.0), ["p"], hold_ms=2500)  # past the hold: its next call may be in flight
    with pytest.raises(LabkitError, match=r"hold of p ended \(its last offsets_sent came 0.50 s before the kill"):
        check_killed_in_hold(_killed("offsets_sent", 1.0), ["p"], hold_ms=2500)


def test_a_hold_shorter_than_the_time_the_kill_needs_left_is_refused():
    with pytest.raises(ValueError, match="hold_ms must be more than 1500 ms"):
        broker_restart_in_transaction(None, None, hold_ms=1000)


def test_a_processor_that_ends_before_the_kill_is_named_at_once_not_waited_for(bootstrap):
    # a config librdkafka refuses: its processor exits at start, and the lab says so, without the 300 s hold deadline
    exp = Experiment("ends-early", bootstrap)
    with pytest.raises(LabkitError, match=r"before the broker's kill, processor-librdkafka failed: _INVALID_ARG \(see its \*.stderr.log"):
        broker_restart_in_transaction(exp, None, config={"debug": "no-such-context"})
    assert {e.kind for e in exp.history.events() if e.participant == "broker"} == set()  # no kill was attempted
