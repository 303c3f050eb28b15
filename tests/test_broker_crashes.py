"""Notebook 08's helpers on hand-written histories (the notebook runs the broker restarts themselves, on a broker of
its own): the restart tried until librdkafka stalls, one timeline per client on one time axis, the prediction's grade
(the crash step itself: tests/test_broker_restart.py)."""

from types import SimpleNamespace

from labkit.learn.exercise import UNANSWERED
from labkit.lessons import broker_crashes as bc
from labkit.lessons.broker_crashes import check_restart_prediction, client_timelines, tries_table, until_stalled
from tests.histories import H


def _try(librdkafka: str) -> dict:
    """What broker_restart_in_transaction returns, in small: librdkafka's outcome as given, Java's recovered."""
    return {"librdkafka": {"outcome": librdkafka, "stalled_in": "send_offsets_to_transaction"
                           if librdkafka == "stalled" else None, "recovery_s": None if librdkafka == "stalled" else 1.0},
            "java": {"outcome": "recovered", "stalled_in": None, "recovery_s": 0.5}}


def test_the_restart_is_tried_again_until_librdkafka_stalls_and_every_try_is_kept(bootstrap, monkeypatch):
    outcomes = iter(["recovered", "stalled", "recovered"])
    monkeypatch.setattr(bc, "broker_restart_in_transaction", lambda exp, broker, **kw: _try(next(outcomes)))
    tries = until_stalled(SimpleNamespace(bootstrap_servers=bootstrap))
    assert [t["experiment"].name for t in tries] == ["hang", "hang-2"]  # stopped at the stall
    table = tries_table(tries)
    assert table["librdkafka outcome"].tolist() == ["recovered", "stalled"]
    assert table["librdkafka stalled in"].tolist() == ["—", "send_offsets_to_transaction"]
    assert table["java next commit (s)"].tolist() == [0.5, 0.5] and table.index.tolist() == [1, 2]
    outcomes = iter(["recovered"] * 5)  # never stalls: three tries, no more, the last one recovered
    assert [t["runs"]["librdkafka"]["outcome"] for t in until_stalled(SimpleNamespace(bootstrap_servers=bootstrap))] == [
        "recovered"] * 3


def test_each_client_has_its_own_timeline_on_one_time_axis():
    h = H().write("source-a", "a-1", 0, topic="in-a").write("source-b", "b-1", 0, topic="in-b")
    h.write("proc-a", "a-1>out", 0, txn=1).add("crash", "broker").add("start", "broker")
    h.write("proc-b", "b-1>out", 0, txn=1).txn("proc-b", 1, "committed")
    for _ in range(40):
        h.add("consume", "proc-b", topic="in-b", partition=0, offset=0, value_id="b-1")  # proc-b's events go on: its figure alone would end later
    runs = {c: {"source": SimpleNamespace(name=f"source-{c}"), "processor": SimpleNamespace(name=f"proc-{c}")}
            for c in "ab"}
    figures = client_timelines(SimpleNamespace(history=SimpleNamespace(events=lambda: h.events)), runs,
                               {"a": "A", "b": "B"})
    rows = {c: {y for t in f.data for y in t.y if y is not None} for c, f in figures.items()}
    assert rows == {"a": {"a-1 by source-a @0", "a-1>out by proc-a @0"}, "b": {"b-1 by source-b @0", "b-1>out by proc-b @0"}}
    assert figures["a"].layout.xaxis.range == figures["b"].layout.xaxis.range and figures["a"].layout.xaxis.range[0] == 0
    assert [a.text for a in figures["a"].layout.annotations] == ["crash → broker back"]  # 1 ns apart: one label
    assert figures["a"].layout.title.text == "A"


def supervised_run(crash_at, state, outcome, first_after_restart, copies):
    """An experiment whose history holds a supervised processor's run as :func:`supervised_processor` writes it:
    killed at ``crash_at`` of input 3, restarted, its ``init_transactions`` finding ``state`` and doing ``outcome``,
    the new instance consuming from input ``first_after_restart`` on, and ``copies`` of source-3>out in the log."""
    h = H()
    for n in (1, 2, 3):
        h.add("consume", "processor", topic="in", partition=0, offset=n - 1, value_id=f"source-{n}")
    h.add("crash", "processor", step=crash_at).add("restart", "processor", step="crashed")
    h.add("txn_init", "processor", state=state, txn=3, outcome=outcome, producer_epoch=1)
    for n in range(first_after_restart, 7):
        h.add("consume", "processor", topic="in", partition=0, offset=n - 1, value_id=f"source-{n}")
    for _ in range(copies):
        h.add("final_read", "lab", topic="out", partition=0, value_id="source-3>out", isolation_level="read_uncommitted")
    return SimpleNamespace(name="exercise-08", history=SimpleNamespace(events=lambda: h.events))


RIGHT = {"outcome": None, "first_input": 4, "read_uncommitted": 1}


def test_the_restart_prediction_is_graded_on_the_run_with_a_hint_per_wrong_part():
    """Notebook 08's exercise, on the history of a kill after_commit (the coordinator had CompleteCommit, which part 3's
    table shows and the exercise no longer asks). Right; wrong by copying part 4's run (all three parts, each hinted);
    wrong in one part only (only that part's hint); a bool for a count; the old question's keys; unanswered."""
    exp = supervised_run("after_commit", "CompleteCommit", None, 4, 1)
    right = check_restart_prediction(exp, RIGHT)
    assert right.ok and "found the transaction CompleteCommit (the state part 3's table shows" in right.message, right
    assert "had nothing to end" in right.message and "at input 4" in right.message and "1 copy of" in right.message
    part4 = check_restart_prediction(exp, {"outcome": "aborted", "first_input": 3, "read_uncommitted": 2})
    assert not part4.ok and part4.message.endswith("(wrong: outcome, first_input, read_uncommitted)"), part4
    assert "what is left for init_transactions to end?" in part4.message and "KIP-447" in part4.message, part4
    offsets = check_restart_prediction(exp, {**RIGHT, "first_input": 3})
    assert not offsets.ok and offsets.message.endswith("(wrong: first_input)"), offsets
    assert "committed offset" in offsets.message and "init_transactions" not in offsets.message, offsets
    boolean = check_restart_prediction(exp, {**RIGHT, "read_uncommitted": True})  # True == 1 in Python
    assert not boolean.ok and boolean.message.endswith("(wrong: read_uncommitted)"), boolean
    old = check_restart_prediction(exp, {"state": "CompleteCommit", "outcome": None, "read_uncommitted": 1})
    assert not old.ok and "exactly the keys" in old.message, old
    blank = check_restart_prediction(exp, UNANSWERED)
    assert not blank.ok and "in place of `...`" in blank.message


def test_the_restart_prediction_follows_the_run_it_is_graded_on():
    """On part 4's run (killed after_produce: Ongoing, aborted, input 3 again, two copies) part 4's answer is right
    and the after_commit answer is not: the verdict is the run's, not a stored answer."""
    exp = supervised_run("after_produce", "Ongoing", "aborted", 3, 2)
    part4 = check_restart_prediction(exp, {"outcome": "aborted", "first_input": 3, "read_uncommitted": 2})
    assert part4.ok and "found the transaction Ongoing and aborted it" in part4.message, part4
    assert "at input 3" in part4.message and "2 copies of" in part4.message, part4
    assert check_restart_prediction(exp, RIGHT).message.endswith("(wrong: outcome, first_input, read_uncommitted)")
