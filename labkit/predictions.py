"""Predict, then see: a notebook's opening question as one choice the learner locks in before the first experiment,
and the reveal that sets it beside what the notebook's own run showed (issue 50). Students who predict a
demonstration's outcome first understand it better than those who only watch it (Crouch, Fagen, Callan, Mazur, Am. J.
Phys. 72, 835 (2004)).

A locked-in prediction is kept in the learner's working folder (``<work>/.predictions/<notebook>.json``,
:func:`labkit.workspace.work_dir`): it survives a kernel restart and a reopened notebook, and a later lock-in replaces
it. ``$LABKIT_PREDICTIONS`` (:data:`FOLDER_ENV`) names another folder: the test run gives each of its processes one,
so that two runs of one notebook at once (on two Kafka releases) never read each other's prediction. A lesson states
its :class:`Question` (the choices, and for each wrong one the usual reason behind it) and works
out from its run which choice the broker bore out; :func:`reveal` compares. Nothing here knows a topic.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import ipywidgets as widgets

from labkit import marks
from labkit.jsonfile import write_json
from labkit.workspace import work_dir

#: The folder of the locked-in predictions, under the working folder.
FOLDER = ".predictions"
#: The environment variable naming another folder for them (unset: ``<work>/.predictions``).
FOLDER_ENV = "LABKIT_PREDICTIONS"


@dataclass(frozen=True)
class Question:
    """A notebook's opening question as choices.

    Attributes:
        notebook: the notebook's number, e.g. "00" (the prediction's file name).
        text: the question, one sentence.
        choices: ``{key: label}``, in the order shown; a key is a short identifier, a label what the learner reads.
        reasons: ``{key: sentence}``: for a choice the broker may not bear out, the usual reason behind choosing it
            (the run-sheet's misconceptions); shown after a wrong prediction.
        answered_by: what ran the experiment, as the reveal names it: "the broker" (default), or e.g. "the model
            (MODELLED)" where the behaviour is only proposed and a model ran it.

    Raises (constructor):
        ValueError: fewer than two choices, a key that is no short identifier (:data:`labkit.marks.CHOICE`: the live
            view's reports carry it), or a reason for a key that is not a choice.
    """

    notebook: str
    text: str
    choices: dict[str, str]
    reasons: dict[str, str]
    answered_by: str = "the broker"

    def __post_init__(self) -> None:
        if len(self.choices) < 2:
            raise ValueError(f"a question has at least two choices, not {list(self.choices)}")
        if bad := [key for key in self.choices if not marks.CHOICE.fullmatch(key)]:
            raise ValueError(f"a choice's key is a short identifier ({marks.CHOICE.pattern}), not {bad}")
        if set(self.reasons) - set(self.choices):
            raise ValueError(f"reasons for keys that are no choice: {sorted(set(self.reasons) - set(self.choices))}")


def _file(question: Question, home: Path | None) -> Path:
    """Where ``question``'s prediction is kept: under ``home``'s working folder when ``home`` is given, else in
    ``$LABKIT_PREDICTIONS`` when set, else under ``$LABKIT_HOME``'s working folder."""
    folder = Path(os.environ[FOLDER_ENV]) if home is None and os.environ.get(FOLDER_ENV) else work_dir(home) / FOLDER
    return folder / f"{question.notebook}.json"


def lock_in(question: Question, choice: str, home: Path | None = None) -> str:
    """Keep ``choice`` (a key of ``question.choices``) as the learner's prediction, replacing an earlier one; what the
    Lock in button does. ``home``: the lab's home (default ``$LABKIT_HOME``). Returns ``choice``. Once kept, the
    choice is published as a ``("prediction", choice)`` mark (:mod:`labkit.marks`): on the workshop hub the
    instructor's live view counts it, names hidden.

    Raises:
        ValueError: ``choice`` is not one of the question's keys (the message lists them).
        OSError: the working folder cannot be written.
    """
    if choice not in question.choices:
        raise ValueError(f"{choice!r} is not a choice of notebook {question.notebook}'s question; choose one of "
                         f"{', '.join(repr(k) for k in question.choices)}")
    write_json(_file(question, home), {"choice": choice, "locked_ms": int(time.time() * 1000)})
    marks.publish(marks.PREDICTION, choice)
    return choice


def locked(question: Question, home: Path | None = None) -> str | None:
    """The learner's locked-in prediction for ``question`` (a key of its choices), or None if there is none (or the
    file holds no choice of this question: e.g. one the question no longer offers)."""
    try:
        choice = json.loads(_file(question, home).read_text()).get("choice")
    except (OSError, ValueError, AttributeError):
        return None
    return choice if choice in question.choices else None


@dataclass(frozen=True)
class Reveal:
    """What :func:`reveal` found: ``predicted`` (a key, or None: no prediction locked in), ``observed`` (the key the
    run bore out) and ``message`` (Markdown, shown by the notebook)."""

    predicted: str | None
    observed: str
    message: str

    @property
    def right(self) -> bool:
        """Whether the learner predicted what the run showed."""
        return self.predicted == self.observed

    def _repr_markdown_(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message


def reveal(question: Question, observed: str, home: Path | None = None) -> Reveal:
    """Set the learner's prediction beside ``observed``, the choice the notebook's run bore out (worked out by the
    lesson from the run, never written in): "You predicted X; the broker did Y" (the broker or what
    ``question.answered_by`` names), with the reason behind X when it is wrong. A learner who locked nothing in is told so, not scored.

    Raises:
        ValueError: ``observed`` is not one of the question's keys (the lesson's error, not the learner's).
    """
    if observed not in question.choices:
        raise ValueError(f"the run's outcome {observed!r} is not a choice of notebook {question.notebook}'s question")
    predicted, did = locked(question, home), question.choices[observed]
    if predicted is None:
        text = f"You did not lock in a prediction, so nothing is scored. What {question.answered_by} did: **{did}**."
    elif predicted == observed:
        text = f"✅ You predicted **{did}**, and that is what {question.answered_by} did."
    else:
        text = (f"You predicted **{question.choices[predicted]}**; {question.answered_by} did **{did}**. "
                + question.reasons.get(predicted, ""))
    return Reveal(predicted, observed, text.strip())


class PredictionWidget:
    """The question's choices (radio buttons) and a Lock in button, showing the locked-in prediction if there is one.
    :meth:`lock_in` is what the button does, for a cell to call headless.

    Attributes:
        question: the :class:`Question`. home: the lab's home its lock-ins go to (None: ``$LABKIT_HOME``).
            choices: ``widgets.RadioButtons`` (values are the keys). button: the Lock in
            ``widgets.Button``. status: ``widgets.HTML``: what is locked in. widget: the whole, to display.
    """

    def __init__(self, question: Question, home: Path | None = None) -> None:
        self.question, self.home = question, home
        already = locked(question, home)
        self.choices = widgets.RadioButtons(options=[(label, key) for key, label in question.choices.items()],
                                            value=already, layout=widgets.Layout(width="auto"))
        self.button = widgets.Button(description="Lock in", button_style="primary",
                                     tooltip="Keep this choice as your prediction (lock_in())")
        self.status = widgets.HTML()
        self.button.on_click(lambda _button: self.lock_in(self.choices.value))
        self.widget = widgets.VBox([widgets.HTML(f"<b>Your prediction:</b> {question.text}"), self.choices,
                                    widgets.HBox([self.button, self.status])])
        self._show(already)

    def lock_in(self, choice: str | None) -> str | None:
        """Lock ``choice`` in (:func:`lock_in`) and show it; None (nothing chosen yet) asks for a choice first.

        Raises:
            ValueError: ``choice`` is not one of the question's keys.
        """
        if choice is None:
            self.status.value = "Choose one first."
            return None
        lock_in(self.question, choice, self.home)
        self.choices.value = choice
        self._show(choice)
        return choice

    def _show(self, choice: str | None) -> None:
        self.status.value = ("Nothing locked in yet." if choice is None else
                             f"Locked in: <b>{self.question.choices[choice]}</b>. The summary compares it with the run.")

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def predict(question: Question, home: Path | None = None) -> PredictionWidget:
    """The widget for ``question`` (:class:`PredictionWidget`), to show before the notebook's first experiment."""
    return PredictionWidget(question, home)


def check_reveal(shown: Reveal, question: Question, widget: PredictionWidget | None = None) -> Reveal | None:
    """Check that ``shown`` (:func:`reveal` of ``question``) says what a reveal must: the words of the choice the run
    bore out and what answered (``question.answered_by``), and for the prediction it scored: that none was locked in,
    that it was right, or the usual reason behind the wrong choice. A notebook's claims cell calls it.

    With ``widget`` (the test run, whose CI-only cell locked a prediction in through it): ``shown`` scored the widget's
    choice; then the other kind of prediction (the run's outcome if ``shown``'s was wrong, else the first wrong choice
    that has a reason) is locked in through the widget, revealed again and checked the same way, so that every
    notebook's run checks a right and a wrong reveal.

    Returns:
        The second :class:`Reveal` (with ``widget``), else None.
    Raises:
        AssertionError: a reveal's message lacks what it must say (named), or ``shown`` scored another prediction
            than the widget's.
    """
    def check(r: Reveal) -> None:
        did = question.choices[r.observed]
        must = [did, question.answered_by] + (
            ["did not lock in"] if r.predicted is None else [f"that is what {question.answered_by} did"] if r.right
            else [question.choices[r.predicted], question.reasons.get(r.predicted, "")])
        if missing := [words for words in must if words not in r.message]:
            raise AssertionError(f"the reveal of notebook {question.notebook}'s prediction {r.predicted!r} (the run: "
                                 f"{r.observed!r}) does not say {missing}: {r.message}")

    check(shown)
    if widget is None:
        return None
    if shown.predicted != widget.choices.value:
        raise AssertionError(f"the reveal scored {shown.predicted!r}, not the widget's lock-in {widget.choices.value!r}")
    other = shown.observed if not shown.right else next(k for k in question.reasons if k != shown.observed)
    widget.lock_in(other)
    again = reveal(question, shown.observed, widget.home)
    if again.predicted != other:
        raise AssertionError(f"the second reveal scored {again.predicted!r}, not the lock-in {other!r}")
    check(again)
    return again
