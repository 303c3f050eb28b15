"""labkit.predictions: a locked-in prediction survives the kernel (read back by another process), a later one replaces
it, a wrong choice is refused and writes nothing; the reveal scores right, wrong (with its reason) and no prediction;
the widget's Lock in button does what lock_in does. Notebooks 00's and 01's outcomes are read from the run: each of
their choices from hand-written reads or checker verdicts, and a run that fits none is the lab's error."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from labkit.crashlab.check import Anomaly, CheckResult
from labkit.errors import LabkitError
from labkit.lessons import idempotence, tour
from labkit.predictions import PredictionWidget, Question, lock_in, locked, reveal

Q = Question("99", "how many copies?", {"one": "One copy", "two": "Two copies", "none": "None"},
             {"two": "A retry is written once when the producer is idempotent.", "none": "The first send succeeded."})


def test_a_locked_in_prediction_outlives_the_kernel_and_a_later_one_replaces_it(tmp_path):
    assert locked(Q, tmp_path) is None
    assert lock_in(Q, "two", tmp_path) == "two"
    read_back = [sys.executable, "-c", "import sys; from pathlib import Path; from tests.test_predictions import Q; "
                 "from labkit.predictions import locked; print(locked(Q, Path(sys.argv[1])))", str(tmp_path)]
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


def test_the_reveal_scores_right_wrong_with_its_reason_and_no_prediction_as_unscored(tmp_path):
    nothing = reveal(Q, "one", tmp_path)
    assert nothing.predicted is None and not nothing.right
    assert "did not lock in" in nothing.message and "One copy" in nothing.message
    lock_in(Q, "two", tmp_path)
    wrong = reveal(Q, "one", tmp_path)
    assert (wrong.predicted, wrong.observed, wrong.right) == ("two", "one", False)
    assert "You predicted **Two copies**; the broker did **One copy**" in wrong.message
    assert Q.reasons["two"] in wrong.message
    lock_in(Q, "one", tmp_path)
    right = reveal(Q, "one", tmp_path)
    assert right.right and "You predicted **One copy**, and that is what the broker did" in right.message
    assert Q.reasons["two"] not in right.message
    with pytest.raises(ValueError, match="not a choice"):
        reveal(Q, "many", tmp_path)


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
