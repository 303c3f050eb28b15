"""labkit.learn.predictions: a locked-in prediction survives the kernel (read back by another process), a later one replaces
it, a wrong choice is refused and writes nothing; the reveal scores right, wrong (with its reason) and no prediction,
and says when it was locked in; a choice made after the first experiment started is kept apart, shown as chosen after
the run and never scored nor published (issue 66), also after a kernel restart, and on a real broker's first topic;
the widget's Lock in button does what lock_in does. Notebooks 00's and 01's outcomes are read from the run: each of
their choices from hand-written reads or checker verdicts, and a run that fits none is the lab's error."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from types import SimpleNamespace

import pandas as pd
import pytest

from labkit.core.errors import LabkitError
from labkit.core.history import Event
from labkit.crashlab.check import Anomaly, CheckResult
from labkit.learn import marks
from labkit.lessons import (broker_crashes, fencing, idempotence, isolation, share_prediction, share_transactions,
                            spark_pipeline, tour, unassigned)
from labkit.spark.timeline import BatchRow
from labkit.learn.predictions import (AFTER_RUN, PredictionWidget, Question, Reveal, check_reveal, kept, lock_in, locked,
                                predict, reveal)
from tests.test_spark_timeline import transactional_history

Q = Question("99", "how many copies?", {"one": "One copy", "two": "Two copies", "none": "None"},
             {"two": "A retry is written once when the producer is idempotent.", "none": "The first send succeeded."})


@pytest.fixture(autouse=True)
def run(monkeypatch):
    """This process's first experiment as :func:`labkit.learn.marks.experiment_started_ms` tells it: none until a test
    starts "the run" (``run.start()``); the test process's other tests create topics, which must not start these
    tests' runs. ``run.restart()``: a new kernel, which has started no experiment."""
    clock = SimpleNamespace(ms=None)

    def start() -> None:  # a ms apart from what came before and what comes after
        time.sleep(0.002)
        clock.ms = int(time.time() * 1000)
        time.sleep(0.002)

    clock.start, clock.restart = start, lambda: setattr(clock, "ms", None)
    monkeypatch.setattr(marks, "experiment_started_ms", lambda: clock.ms)
    return clock


def test_a_locked_in_prediction_outlives_the_kernel_and_a_later_one_replaces_it(tmp_path):
    assert locked(Q, tmp_path) is None
    assert lock_in(Q, "two", tmp_path) == "two"
    read_back = [sys.executable, "-c", "import sys; from pathlib import Path; from tests.test_predictions import Q; "
                 "from labkit.learn.predictions import locked; print(locked(Q, Path(sys.argv[1])))", str(tmp_path)]
    assert subprocess.run(read_back, capture_output=True, text=True, check=True).stdout.strip() == "two"
    lock_in(Q, "one", tmp_path)
    assert locked(Q, tmp_path) == "one"
    assert locked(Question("98", "q", {"a": "A", "b": "B"}, {}), tmp_path) is None  # another notebook's is its own


def test_a_choice_the_question_does_not_offer_is_refused_naming_the_choices_and_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match="choose one of 'one', 'two', 'none'"):
        lock_in(Q, "three", tmp_path)
    assert locked(Q, tmp_path) is None and not (tmp_path / "work").exists()
    with pytest.raises(ValueError, match="at least two choices"):
        Question("97", "q", {"only": "Only"}, {})
    with pytest.raises(ValueError, match="no choice"):
        Question("97", "q", {"a": "A", "b": "B"}, {"c": "why"})
    with pytest.raises(ValueError, match=r"short identifier .* not \['Two Copies'\]"):  # a live view report's state
        Question("97", "q", {"one": "One", "Two Copies": "Two"}, {})


def test_a_lock_in_is_published_as_a_prediction_mark_once_kept_and_a_refused_one_is_not(tmp_path):
    heard = []

    def observer(kind, state):
        heard.append((kind, state))

    marks.subscribe(observer)
    try:
        lock_in(Q, "two", tmp_path)
        with pytest.raises(ValueError):
            lock_in(Q, "three", tmp_path)
        PredictionWidget(Q, tmp_path).lock_in("none")  # the button's way
    finally:
        marks.unsubscribe(observer)
    assert heard == [("prediction", "two"), ("prediction", "none")]
    with pytest.raises(ValueError, match="a prediction's choice key"):  # what a report could not carry
        marks.publish("prediction", "Two Copies")


def test_the_reveal_scores_right_wrong_with_its_reason_and_no_prediction_as_unscored(tmp_path):
    nothing = reveal(Q, "one", tmp_path)
    assert nothing.predicted is None and not nothing.right
    assert "did not lock in" in nothing.message and "One copy" in nothing.message
    lock_in(Q, "two", tmp_path)
    wrong = reveal(Q, "one", tmp_path)
    assert (wrong.predicted, wrong.observed, wrong.right) == ("two", "one", False)
    assert re.search(r"You predicted \*\*Two copies\*\* \(locked in at \d\d:\d\d:\d\d, before any experiment of this "
                     r"notebook\); the broker did \*\*One copy\*\*", wrong.message), wrong.message
    assert Q.reasons["two"] in wrong.message
    lock_in(Q, "one", tmp_path)
    right = reveal(Q, "one", tmp_path)
    assert right.right and "You predicted **One copy** (locked in " in right.message
    assert "), and that is what the broker did" in right.message
    assert Q.reasons["two"] not in right.message
    with pytest.raises(ValueError, match="not a choice"):
        reveal(Q, "many", tmp_path)


@pytest.mark.parametrize("predicted", ["two", "one", None])
def test_check_reveal_passes_a_true_reveal_and_with_the_widget_reveals_a_choice_made_after_the_run_unscored(
        tmp_path, run, predicted):
    widget = PredictionWidget(Q, tmp_path)
    if predicted:
        widget.lock_in(predicted)
    run.start()
    shown = reveal(Q, "one", tmp_path)
    assert check_reveal(shown, Q) is None
    again = check_reveal(shown, Q, widget)  # "two": the first wrong choice with a reason
    assert (again.predicted, again.after_run, again.right) == (predicted, "two", predicted == "one")
    assert locked(Q, tmp_path) == predicted and f"You also chose **Two copies**, {AFTER_RUN}" in again.message


@pytest.mark.parametrize("bad, lacks", [
    (Reveal("two", "one", "You predicted **Two copies**; the broker did **One copy**."),
     "A retry is written once"),  # wrong, with no reason
    (Reveal("two", "one", "You predicted **Two copies**. A retry is written once when the producer is idempotent."),
     "One copy"),  # the run's outcome not said
    (Reveal("one", "one", "✓ You predicted **One copy**."), "that is what the broker did"),  # right, unsaid
    (Reveal(None, "one", "What the broker did: **One copy**."), "did not lock in"),  # no prediction, unsaid
    (Reveal("two", "one", "✓ You predicted **One copy**, and that is what the broker did."),
     "Two copies")])  # a wrong prediction told it was right
def test_check_reveal_names_what_a_false_reveal_leaves_unsaid(bad, lacks):
    with pytest.raises(AssertionError, match=re.escape(lacks)):
        check_reveal(bad, Q)


def test_check_reveal_refuses_a_reveal_of_another_prediction_than_the_widget_s(tmp_path):
    widget = PredictionWidget(Q, tmp_path)
    widget.lock_in("two")
    stale = reveal(Q, "one", tmp_path)
    widget.lock_in("none")  # a lock-in after the reveal was made (no experiment yet: it replaces the prediction)
    with pytest.raises(AssertionError, match=r"scored 'two' \(chosen after the run: None\), not the prediction kept: "
                                             r"'none'"):
        check_reveal(stale, Q, widget)


def test_a_choice_made_after_the_first_experiment_is_kept_apart_shown_as_such_and_neither_scored_nor_published(
        tmp_path, run):
    heard = []

    def observer(kind, state):
        heard.append((kind, state))

    marks.subscribe(observer)
    try:
        widget = predict(Q, tmp_path)
        widget.lock_in("two")  # before the run: the prediction
        run.start()
        widget.lock_in("one")  # after it: kept apart
        assert "Chosen after the run: <b>One copy</b> (not scored" in widget.status.value
    finally:
        marks.unsubscribe(observer)
    assert heard == [("prediction", "two")]  # the live view is told of the prediction only
    k = kept(Q, tmp_path)
    assert (k.predicted, k.after_run) == ("two", "one") and k.locked_ms < k.run_ms <= k.chosen_ms
    shown = reveal(Q, "one", tmp_path)
    assert (shown.predicted, shown.after_run, shown.right) == ("two", "one", False)
    assert "You predicted **Two copies** (locked in 0 s before the run began); the broker did **One copy**" in \
        shown.message, shown.message
    assert "You also chose **One copy**, chosen after the run (0 s after the run began): not scored" in shown.message


def test_the_reveal_says_how_long_before_the_run_the_prediction_was_locked_in(tmp_path, run):
    lock_in(Q, "one", tmp_path)
    run.ms = int(time.time() * 1000) + 65_000
    assert "You predicted **One copy** (locked in 1 min 5 s before the run began), and that is what the broker did" \
        in reveal(Q, "one", tmp_path).message


def test_a_prediction_locked_in_the_millisecond_the_run_began_is_still_the_prediction(tmp_path, run, monkeypatch):
    """lock_in decides when it runs: no run had begun, so the choice is the prediction, even when the experiment that
    follows starts within the same millisecond (the fresh-clone run's real-broker test met it: the lock-in and the
    first topic 0 ms apart, scored as 'chosen after the run')."""
    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.0)  # one millisecond for all of it
    lock_in(Q, "two", tmp_path)
    run.ms = int(time.time() * 1000)
    k = kept(Q, tmp_path)
    assert (k.predicted, k.after_run, k.locked_ms == k.run_ms) == ("two", None, True), k
    assert "(locked in 0 s before the run began)" in reveal(Q, "two", tmp_path).message


def test_with_no_prediction_before_the_run_a_later_choice_is_not_scored_but_shown_with_its_reason(tmp_path, run):
    run.start()
    lock_in(Q, "none", tmp_path)
    shown = reveal(Q, "one", tmp_path)
    assert (shown.predicted, shown.after_run) == (None, "none") and locked(Q, tmp_path) is None
    assert "You did not lock in a prediction before the run, so nothing is scored" in shown.message
    assert f"You also chose **None**, {AFTER_RUN}" in shown.message and Q.reasons["none"] in shown.message


def test_the_run_s_start_is_kept_with_the_shown_question_so_a_restarted_kernel_cannot_predict_again(tmp_path, run):
    """The widget shown, then the kernel's first experiment (its mark, as create_topic publishes it): the file keeps
    when the run began; a new kernel, which has started no experiment, still takes a choice as made after the run."""
    predict(Q, tmp_path)
    run.start()
    marks.publish(marks.EXPERIMENT, "started")
    assert json.loads((tmp_path / "work" / ".predictions" / "99.json").read_text())["run_ms"] == run.ms
    run.restart()
    lock_in(Q, "two", tmp_path)
    assert locked(Q, tmp_path) is None and kept(Q, tmp_path).after_run == "two"
    assert "The run has begun" in predict(Q, tmp_path).status.value or "Chosen after the run" in \
        predict(Q, tmp_path).status.value


def test_on_a_real_broker_a_choice_after_the_first_topic_is_not_scored_and_one_before_is(tmp_path, bootstrap):
    """A fresh process (a kernel's stand-in) locks in, creates a topic on the real broker (its first experiment), then
    chooses again: the reveal scores the first choice and shows the second as chosen after the run."""
    script = ("import json, sys\nfrom pathlib import Path\nfrom labkit.learn import marks\n"
              "from labkit.kafka.records import create_topic\nfrom labkit.learn.predictions import lock_in, reveal\n"
              "from tests.test_predictions import Q\nheard = []\nmarks.subscribe(lambda k, s: heard.append([k, s]))\n"
              "home = Path(sys.argv[1])\nlock_in(Q, 'two', home)\ncreate_topic(sys.argv[2], 'prediction-lock')\n"
              "lock_in(Q, 'one', home)\nr = reveal(Q, 'one', home)\n"
              "print(json.dumps([r.predicted, r.after_run, r.right, r.message, heard]))")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), bootstrap], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    predicted, after_run, right, message, heard = json.loads(done.stdout.splitlines()[-1])
    assert (predicted, after_run, right) == ("two", "one", False), message
    assert f"You also chose **One copy**, {AFTER_RUN}" in message and "before the run began" in message
    assert heard == [["prediction", "two"], ["experiment", "started"]]


def test_the_lock_in_button_keeps_the_chosen_answer_and_a_new_widget_shows_it(tmp_path):
    widget = PredictionWidget(Q, tmp_path)
    assert widget.choices.value is None and "Nothing locked in" in widget.status.value
    widget.button.click()  # nothing chosen: asks for a choice, keeps nothing
    assert "Choose one first" in widget.status.value and locked(Q, tmp_path) is None
    widget.choices.value = "none"
    widget.button.click()
    assert locked(Q, tmp_path) == "none" and "Locked in: <b>None</b>" in widget.status.value
    again = PredictionWidget(Q, tmp_path)  # a reopened notebook
    assert again.choices.value == "none" and "Locked in" in again.status.value


def _run(in_log: bool, committed: bool, uncommitted: bool) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Hand-written reads of notebook 00's partition: c1-c3 committed, a1-a3 aborted (in the log or not), and which
    isolation level returned the aborted ones."""
    values = ["c1", "c2", "c3", None] + (["a1", "a2", "a3", None] if in_log else [])
    log = pd.DataFrame({"value": values, "control": [v is None for v in values]})
    read = {True: ["c1", "c2", "c3", "a1", "a2", "a3"], False: ["c1", "c2", "c3"]}
    return log, {"read_committed": pd.DataFrame({"value": read[committed]}),
                 "read_uncommitted": pd.DataFrame({"value": read[uncommitted]})}


@pytest.mark.parametrize("in_log, committed, uncommitted, outcome", [
    (True, False, True, "uncommitted_only"), (False, False, False, "gone"), (True, False, False, "nobody"),
    (True, True, True, "everyone")])
def test_notebook_00_s_outcome_is_the_choice_its_reads_bear_out(in_log, committed, uncommitted, outcome):
    assert tour.aborted_outcome(*_run(in_log, committed, uncommitted), ["a1", "a2", "a3"]) == outcome


def test_notebook_00_s_reads_that_fit_no_choice_are_the_lab_s_error():
    with pytest.raises(LabkitError, match="fits no choice"):
        tour.aborted_outcome(*_run(True, True, False), ["a1", "a2", "a3"])


def _verdict(*names: str) -> CheckResult:
    return CheckResult([Anomaly(name, f"producer-{i}", "hand-written") for i, name in enumerate(names)])


@pytest.mark.parametrize("plain, idempotent, outcome", [
    (("duplicate", "duplicate", "duplicate"), (), "two_one"), ((), (), "one_one"),
    (("duplicate",), ("duplicate",), "two_two"), (("lost write",), (), "none_one")])
def test_notebook_01_s_outcome_is_the_choice_its_checker_verdicts_bear_out(plain, idempotent, outcome):
    assert idempotence.copies_outcome(_verdict(*plain), _verdict(*idempotent)) == outcome


def test_notebook_01_s_verdicts_that_fit_no_choice_are_the_lab_s_error():
    with pytest.raises(LabkitError, match="fits no choice: one_two"):
        idempotence.copies_outcome(_verdict(), _verdict("duplicate"))


def _paths(current: str, lower: str, client_epoch: int = 7) -> dict:
    """Part 2 of notebook 05 as :func:`unassigned.epoch_paths` returns it, with the broker's two answers for A's
    partition (1) given; B (epoch 7 at the broker, ``client_epoch`` in its client) owns partition 0."""
    def row(request: str, epoch: int, partition: int, answer: str) -> dict:
        return {"request": request, "epoch": epoch, "partition": partition, "answer": answer,
                "path": "current" if epoch == 7 else "lagging" if epoch < 7 else "newer"}
    return {"b_epoch": client_epoch, "b_broker_epoch": 7, "victim": 1, "rows": [
        row("B's epoch, A's partition", client_epoch, 1, current),
        row("B's epoch - 1, B's own partition", client_epoch - 1, 0, "NONE"),
        row("B's epoch - 1, A's partition", client_epoch - 1, 1, lower),
        row("B's epoch + 1, B's own partition", client_epoch + 1, 0, "STALE_MEMBER_EPOCH")]}


@pytest.mark.parametrize("current, lower, outcome", [
    ("NONE", "ILLEGAL_GENERATION", "current_only"), ("NONE", "NONE", "both"),
    ("ILLEGAL_GENERATION", "NONE", "lower_only"), ("UNKNOWN_MEMBER_ID", "STALE_MEMBER_EPOCH", "neither")])
def test_notebook_05_s_outcome_is_the_choice_the_broker_s_answers_bear_out(current, lower, outcome):
    assert unassigned.epochs_outcome(_paths(current, lower)) == outcome


def test_notebook_05_without_both_commits_for_a_s_partition_is_the_lab_s_error():
    paths = _paths("NONE", "NONE")
    del paths["rows"][2]
    with pytest.raises(LabkitError, match="no commit for A's partition"):
        unassigned.epochs_outcome(paths)


def test_notebook_05_where_b_s_client_was_behind_the_broker_s_epoch_is_the_lab_s_error():
    """B's client sent 6 as its current epoch while the broker held 7: both commits took the lagging path, and
    keyed on the client's epoch the lagging one would read as B's current epoch."""
    with pytest.raises(LabkitError, match=r"epoch at the broker \(7; B's client sent 6\)"):
        unassigned.epochs_outcome(_paths("NONE", "ILLEGAL_GENERATION", client_epoch=6))


class _Processor:
    name = "processor-librdkafka"


def _history(log: list[tuple[int, str, str | None]]) -> list[Event]:
    """A processor commits out-1 (acknowledged at offset 0; its commit marker at 1), writes out-2 (acknowledged at
    offset 2) in its next transaction, the broker crashes and is back, the processor writes out-3 and commits; then
    the output's log as read, ``[(offset, value_id, outcome)]``."""
    p, t = _Processor.name, iter(range(1, 100))
    events = [Event("ack", p, next(t), value_id="out-1", partition=0, offset=0),
              Event("txn_end", p, next(t), outcome="committed"),
              Event("ack", p, next(t), value_id="out-2", partition=0, offset=2), Event("crash", "broker", next(t)),
              Event("start", "broker", next(t)), Event("ack", p, next(t), value_id="out-3", partition=0, offset=6),
              Event("txn_end", p, next(t), outcome="committed")]
    return events + [Event("final_read", "lab", next(t), topic="out", isolation_level="read_uncommitted", value_id=v,
                           partition=0, offset=o, outcome=outcome) for o, v, outcome in log]


@pytest.mark.parametrize("out_2, outcome", [
    ([(2, "out-2", "committed")], "carried_on"),
    ([(2, "out-2", "aborted"), (4, "out-2", "committed")], "aborted"),
    ([], "lost"),
    ([(3, "out-2", "committed")], "lost"),  # lost, then its input reprocessed: a copy at another offset
    ([(2, "out-3", "committed")], "lost")])  # the log truncated below out-2, another record written where it was
def test_notebook_08_s_outcome_is_what_the_log_holds_at_the_open_transaction_s_offsets(out_2, outcome):
    log = [(0, "out-1", "committed")] + out_2 + [(6, "out-3", "committed")]
    run = {"processor": _Processor(), "output": "out"}
    assert broker_crashes.open_transaction_outcome(_history(log), run) == outcome


def test_notebook_08_without_a_crash_an_open_transaction_or_a_read_log_is_the_lab_s_error():
    run = {"processor": _Processor(), "output": "out"}
    events = _history([(2, "out-2", "committed")])
    with pytest.raises(LabkitError, match="no crash of the broker"):
        broker_crashes.open_transaction_outcome([e for e in events if e.kind != "crash"], run)
    with pytest.raises(LabkitError, match="no transaction open"):
        broker_crashes.open_transaction_outcome([e for e in events if e.value_id != "out-2"], run)
    with pytest.raises(LabkitError, match="was not read"):
        broker_crashes.open_transaction_outcome([e for e in events if e.kind != "final_read"], run)
    with pytest.raises(LabkitError, match="fits no choice"):
        broker_crashes.open_transaction_outcome(_history([(2, "out-2", None)]), run)


def _blocked(end: str, seen_ns: int | None) -> dict:
    """One of notebook 03's part 2 runs: plain-1 written at 10, the transaction's end asked for at 50."""
    return {"end": end, "write_ns": 10, "end_start_ns": 50, "seen_ns": {"read_committed": seen_ns,
                                                                        "read_uncommitted": 20}}


@pytest.mark.parametrize("after_commit, after_abort, outcome", [
    (60, 70, "when_ends"), (30, 40, "at_once"), (60, None, "if_commits")])
def test_notebook_03_s_outcome_is_when_read_committed_got_the_plain_record_in_each_run(after_commit, after_abort,
                                                                                       outcome):
    committed, aborted = _blocked("commit", after_commit), _blocked("abort", after_abort)
    assert isolation.plain_record_outcome(committed, aborted) == outcome


def test_notebook_03_s_runs_that_fit_no_choice_or_end_alike_are_the_lab_s_error():
    with pytest.raises(LabkitError, match="fit no choice: plain-1 read before the commit, after the abort"):
        isolation.plain_record_outcome(_blocked("commit", 30), _blocked("abort", 60))
    with pytest.raises(LabkitError, match="one run ended by a commit and one by an abort"):
        isolation.plain_record_outcome(_blocked("commit", 60), _blocked("commit", 60))


@pytest.mark.parametrize("a, b, outcome", [
    ({2: 200}, {1: 200}, "two_one"), ({1: 200}, {1: 200}, "one_one"), ({2: 200}, {2: 200}, "two_two")])
def test_notebook_04_s_outcome_is_the_copies_of_each_sink_s_crashed_batch(a, b, outcome):
    assert spark_pipeline.replay_outcome(BatchRow(2, copies=Counter(a)), BatchRow(2, copies=Counter(b))) == outcome


@pytest.mark.parametrize("a, b", [
    ({2: 120, 1: 80}, {1: 200}),  # part of the batch twice: sink A's mid_produce crash
    ({1: 150, 0: 50}, {1: 200}),  # outputs lost
    ({3: 100, 1: 100}, {1: 200}),  # as many extra copies as inputs, but half of them three times and half once
    ({1: 200}, {2: 200})])  # one_two: no such choice
def test_notebook_04_s_batches_that_fit_no_choice_are_the_lab_s_error(a, b):
    with pytest.raises(LabkitError, match="fits no choice"):
        spark_pipeline.replay_outcome(BatchRow(2, copies=Counter(a)), BatchRow(2, copies=Counter(b)))


def _replayed(ack_first_outputs: list[int], sink_first_outputs: list[int]) -> pd.DataFrame:
    """Notebook 07's replay of notebook 06's two crash points, as scenario_table gives it, with the outputs committed
    per record given; the share checker's counts follow them."""
    def row(name: str, outputs: list[int]) -> dict:
        return {"scenario": name, "outputs": outputs, "check": {"lost effect": outputs.count(0),
                                                                 "duplicate effect": sum(n > 1 for n in outputs)}}
    return pd.DataFrame([row("ack_first (06: lost)", ack_first_outputs), row("sink_first (06: duplicated)",
                                                                              sink_first_outputs)])


@pytest.mark.parametrize("ack_first, sink_first, outcome", [
    ([1, 1], [1, 1], "both"), ([0, 1], [1, 1], "duplicated_only"), ([1, 1], [2, 1], "lost_only"),
    ([0, 1], [2, 1], "neither")])
def test_notebook_07_s_outcome_is_which_of_06_s_failures_the_model_left(ack_first, sink_first, outcome):
    assert share_transactions.fixes_outcome(_replayed(ack_first, sink_first)) == outcome


def test_notebook_07_without_06_s_two_scenarios_is_the_lab_s_error_and_its_reveal_names_the_model(tmp_path):
    with pytest.raises(LabkitError, match="notebook 06's two scenarios"):
        share_transactions.fixes_outcome(_replayed([1], [1]).iloc[:1])
    lock_in(share_transactions.QUESTION, "lost_only", tmp_path)
    shown = reveal(share_transactions.QUESTION, "both", tmp_path)
    assert "the model (MODELLED: KIP-1289 is in no Kafka release) did **Both**" in shown.message, shown.message


@pytest.mark.parametrize("plain, fenced, outcome", [
    ((("duplicate",), ("duplicate",)), ((), (), ()), "fencing"), (((), ()), ((), ()), "idempotence"),
    ((("duplicate",),), (("duplicate",), ("duplicate",)), "nothing")])
def test_notebook_02_s_outcome_is_where_the_zombie_s_duplicate_was(plain, fenced, outcome):
    plain_checks = {f"client-{i}": _verdict(*names) for i, names in enumerate(plain)}
    assert fencing.zombie_outcome(plain_checks, [_verdict(*names) for names in fenced]) == outcome


def test_notebook_02_s_runs_that_fit_no_choice_are_the_lab_s_error():
    with pytest.raises(LabkitError, match="fit no choice"):  # one fenced run let the duplicate through
        fencing.zombie_outcome({"librdkafka": _verdict("duplicate")}, [_verdict(), _verdict("duplicate")])
    with pytest.raises(LabkitError, match="fit no choice"):  # the plain runs disagree
        fencing.zombie_outcome({"librdkafka": _verdict("duplicate"), "java": _verdict()}, [_verdict()])
    with pytest.raises(LabkitError, match="give part 1's runs"):
        fencing.zombie_outcome({}, [_verdict()])


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def _share_runs(b_got: int, freed_after_crash_ns: int) -> tuple[list[Event], dict, dict]:
    """Notebook 06's part 3 as its history holds it: the paused A got 4 records at 1000, paused at 1500, and they were
    AVAILABLE at 6000 (the lock: 5000 after the delivery); the crashed A got them at 19 000, was killed at 20 000, its
    records AVAILABLE ``freed_after_crash_ns`` after the crash, and B got ``b_got`` of them."""
    paused = {"topic": "lock-pause", "a": _Named("A-pause"), "records": 4}
    crashed = {"topic": "lock-crash", "a": _Named("A-crash"), "b": _Named("B-crash"), "records": 4}
    events = [Event("delivered", "A-pause", 1000, topic="lock-pause", offset=0), Event("pause", "A-pause", 1500),
              Event("share_state", "observer", 6000, topic="lock-pause", state="AVAILABLE"),
              Event("delivered", "A-crash", 19_000, topic="lock-crash", offset=0), Event("crash", "A-crash", 20_000),
              Event("share_state", "observer", 20_000 + freed_after_crash_ns, topic="lock-crash", state="AVAILABLE")]
    events += [Event("delivered", "B-crash", 30_000 + o, topic="lock-crash", offset=o) for o in range(b_got)]
    return events, crashed, paused


@pytest.mark.parametrize("freed_after_crash_ns, outcome", [
    (300, "other_at_once"),  # 1300 after A's delivery, against the lock's 5000
    (4000, "other_after_lock"),  # the crash's own release as slow as the lock: 5000 against 5000
    (3500, "other_after_lock")])  # 4500 after the delivery: sooner than the lock, but not by half
def test_notebook_06_s_outcome_compares_both_runs_from_a_s_delivery(freed_after_crash_ns, outcome):
    assert share_prediction.crash_outcome(*_share_runs(4, freed_after_crash_ns)) == outcome


@pytest.mark.parametrize("b_got", [0, 2])
def test_notebook_06_where_the_other_consumer_did_not_get_them_all_is_the_lab_s_error(b_got):
    with pytest.raises(LabkitError, match=f"B got {b_got} of the crashed A's 4 records"):
        share_prediction.crash_outcome(*_share_runs(b_got, 300))


def test_labkit_predictions_names_another_folder_unless_a_home_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_PREDICTIONS", str(tmp_path / "mine"))
    lock_in(Q, "two")
    assert (tmp_path / "mine" / "99.json").exists() and locked(Q) == "two"
    lock_in(Q, "one", tmp_path / "home")
    assert locked(Q, tmp_path / "home") == "one" and locked(Q) == "two"  # an explicit home is its own


def _pipeline(events: list[Event]) -> spark_pipeline.PipelineRun:
    history = SimpleNamespace(events=lambda: events)
    return spark_pipeline.PipelineRun(SimpleNamespace(history=history), None, "B", "in", "out", "marker", "ckpt", 2)


def test_notebook_04_finds_the_batch_crashed_at_a_point_or_names_the_crashes_it_saw():
    run = _pipeline(transactional_history())
    assert run.crashed_batch("after_commit").batch_id == 1
    assert run.crashed_batch("mid_produce").batch_id == 0
    with pytest.raises(LabkitError, match=r"0 micro-batches were crashed at 'after_produce' alone.*"
                                          r"\{0: \['mid_produce'\], 1: \['after_commit'\]\}"):
        run.crashed_batch("after_produce")
