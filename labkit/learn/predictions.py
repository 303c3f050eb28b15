"""Lock in a prediction before the first experiment; reveal it beside the run.

Predict, then see: a notebook's opening question as one choice the learner locks in before the first experiment,
and the reveal that sets it beside what the notebook's own run showed (issue 50). Students who predict a
demonstration's outcome first understand it better than those who only watch it (Crouch, Fagen, Callan, Mazur, Am. J.
Phys. 72, 835 (2004)).

A locked-in prediction is kept in the learner's working folder (``<work>/.predictions/<notebook>.json``,
:func:`labkit.lab.workspace.work_dir`): it survives a kernel restart and a reopened notebook. ``$LABKIT_PREDICTIONS``
(:data:`FOLDER_ENV`) names another folder: the test run gives each of its processes one, so that two runs of one
notebook at once (on two Kafka releases) never read each other's prediction. A lesson states its :class:`Question`
(the choices, and for each wrong one the usual reason behind it) and works out from its run which choice the broker
bore out; :func:`reveal` compares. Nothing here knows a topic.

**Locked means locked** (issue 66). The run starts with the notebook's first experiment: the first ``("experiment",
"started")`` mark the kernel's process published (:func:`labkit.learn.marks.experiment_started_ms`: the lab publishes it
where it creates a topic or runs a model, observed, never a flag the notebook sets), and, kept in the prediction's file
as ``run_ms``, the first one any kernel saw while the question was shown (:func:`predict`) or locked in or revealed. A
choice made before it is the prediction: it replaces an earlier one and is published as a ``("prediction", choice)``
mark. A choice made after it is kept apart, as *chosen after the run*: never scored, never published (so the
instructor's live view counts only predictions locked before the run), and the reveal says it was chosen after the run.
The file: ``{"choice", "locked_ms", "run_ms", "after_run": {"choice", "chosen_ms"}}`` (times in ms since the epoch; each
field absent until known).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import ipywidgets as widgets

from labkit.core.jsonfile import write_json
from labkit.lab.workspace import work_dir
from labkit.learn import marks

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
        ValueError: fewer than two choices, a key that is no short identifier (:data:`labkit.learn.marks.CHOICE`: the
            live view's reports carry it), or a reason for a key that is not a choice.
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


def _now_ms() -> int:
    return int(time.time() * 1000)


def _read(path: Path) -> dict:
    """The prediction file ``path`` as a dict; empty when there is none or it is no JSON object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


#: The prediction files of the questions this process showed, locked in or revealed: the first experiment's start is
#: written into each (:func:`_run_started`).
_watched: set[Path] = set()


def _run_ms(path: Path) -> int | None:
    """When the run began for the prediction in ``path``, in ms since the epoch: the file's ``run_ms``, else this
    process's first experiment (:func:`labkit.learn.marks.experiment_started_ms`), written into the file then; None
    before either. Watches ``path`` from now on."""
    _watched.add(path)
    data = _read(path)
    if isinstance(data.get("run_ms"), int):
        return data["run_ms"]
    started = marks.experiment_started_ms()
    if started is not None:
        write_json(path, {**data, "run_ms": started})
    return started


def _run_started(kind: str, _state: str) -> None:
    """The observer of :mod:`labkit.learn.marks`: at this process's first experiment, write its start into every watched
    prediction file that has none, so that a kernel restarted before the reveal still knows the run began. Never
    raises (it runs inside the lab's call that started the experiment)."""
    if kind != marks.EXPERIMENT:
        return
    for path in list(_watched):
        try:
            _run_ms(path)
        except OSError:
            pass


marks.subscribe(_run_started)


def lock_in(question: Question, choice: str, home: Path | None = None) -> str:
    """Keep ``choice`` (a key of ``question.choices``); what the Lock in button does. ``home``: the lab's home
    (default ``$LABKIT_HOME``). Returns ``choice``.

    Before the run began (the module docstring: the notebook's first experiment) the choice is the prediction: it
    replaces an earlier one and is published as a ``("prediction", choice)`` mark (:mod:`labkit.learn.marks`), which on
    the workshop hub the instructor's live view counts, names hidden. After it, the choice is kept apart as chosen after
    the run (replacing an earlier such choice): the prediction, if any, stays as it was, and nothing is published.

    Raises:
        ValueError: ``choice`` is not one of the question's keys (the message lists them).
        OSError: the working folder cannot be written.
    """
    if choice not in question.choices:
        raise ValueError(f"{choice!r} is not a choice of notebook {question.notebook}'s question; choose one of "
                         f"{', '.join(repr(k) for k in question.choices)}")
    path = _file(question, home)
    run_ms = _run_ms(path)
    data = _read(path)
    if run_ms is not None:
        write_json(path, {**data, "after_run": {"choice": choice, "chosen_ms": _now_ms()}})
        return choice
    write_json(path, {"choice": choice, "locked_ms": _now_ms()})
    marks.publish(marks.PREDICTION, choice)
    return choice


@dataclass(frozen=True)
class Kept:
    """What a prediction file holds for a question: ``predicted`` (the choice locked in before the run, or None),
    ``locked_ms``, ``run_ms`` (when the run began, None before), ``after_run`` (a choice made after the run began, or
    None) and ``chosen_ms``; times in ms since the epoch."""

    predicted: str | None = None
    locked_ms: int | None = None
    run_ms: int | None = None
    after_run: str | None = None
    chosen_ms: int | None = None


def kept(question: Question, home: Path | None = None) -> Kept:
    """What is kept for ``question`` (:class:`Kept`): a choice the question does not offer (any more) is left out, and
    a choice whose lock-in time is after the run's start counts as chosen after the run.

    Raises:
        OSError: the run began in this process and its start could not be written into the file.
    """
    path = _file(question, home)
    run_ms = _run_ms(path)
    data = _read(path)
    choice, at = data.get("choice"), data.get("locked_ms")
    late = data.get("after_run") if isinstance(data.get("after_run"), dict) else {}
    after, chosen_ms = late.get("choice"), late.get("chosen_ms")
    if choice not in question.choices or not isinstance(at, int):
        choice, at = None, None
    elif run_ms is not None and at > run_ms:  # locked in after the run began: a late choice, however written (in
        # the same ms as the run's start it was lock_in's own choice, made while no run had begun: a prediction)
        if after is None:
            after, chosen_ms = choice, at
        choice, at = None, None
    if after not in question.choices or not isinstance(chosen_ms, int):
        after, chosen_ms = None, None
    return Kept(choice, at, run_ms, after, chosen_ms)


def locked(question: Question, home: Path | None = None) -> str | None:
    """The learner's prediction for ``question``: the choice locked in before the run began (a key of its choices), or
    None if there is none (a choice made after the run is no prediction: :func:`kept` has it)."""
    try:
        return kept(question, home).predicted
    except OSError:
        return None


@dataclass(frozen=True)
class Reveal:
    """What :func:`reveal` found: ``predicted`` (a key, or None: no prediction locked in before the run), ``observed``
    (the key the run bore out), ``message`` (Markdown, shown by the notebook) and ``after_run`` (a choice made after
    the run began, shown as such and never scored; None if there is none)."""

    predicted: str | None
    observed: str
    message: str
    after_run: str | None = None

    @property
    def right(self) -> bool:
        """Whether the learner predicted what the run showed."""
        return self.predicted == self.observed

    def _repr_markdown_(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message


#: How a reveal names a choice made after the run began.
AFTER_RUN = "chosen after the run"


def _span(ms: int) -> str:
    """``ms`` milliseconds in words: "40 s", "3 min 5 s", "2 h 10 min"."""
    s = max(0, round(ms / 1000))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60} s" if s < 3600 else f"{s // 3600} h {s % 3600 // 60} min"


def _when(at_ms: int, run_ms: int | None) -> str:
    """When ``at_ms`` was, relative to the run's start ``run_ms`` (ms since the epoch)."""
    if run_ms is None:
        return f"at {time.strftime('%H:%M:%S', time.localtime(at_ms / 1000))}, before any experiment of this notebook"
    return f"{_span(run_ms - at_ms)} before the run began" if at_ms <= run_ms else \
        f"{_span(at_ms - run_ms)} after the run began"


def reveal(question: Question, observed: str, home: Path | None = None) -> Reveal:
    """Set the learner's prediction beside ``observed``, the choice the notebook's run bore out (worked out by the
    lesson from the run, never written in): "You predicted X (locked in 2 min 5 s before the run began); the broker
    did Y" (the broker or what ``question.answered_by`` names), with the reason behind X when it is wrong. Only a
    prediction locked in before the run began is scored (:func:`lock_in`); a learner who locked nothing in then is told
    so, and a choice made after the run began is shown as :data:`AFTER_RUN` with when it was made, not scored (with the
    reason behind it when it is wrong).

    Raises:
        ValueError: ``observed`` is not one of the question's keys (the lesson's error, not the learner's).
        OSError: the run began in this process and its start could not be written into the prediction's file.
    """
    if observed not in question.choices:
        raise ValueError(f"the run's outcome {observed!r} is not a choice of notebook {question.notebook}'s question")
    k, did = kept(question, home), question.choices[observed]
    if k.predicted is None:
        text = (f"You did not lock in a prediction before the run, so nothing is scored. What {question.answered_by} "
                f"did: **{did}**.")
    elif k.predicted == observed:
        text = (f"✓ You predicted **{did}** (locked in {_when(k.locked_ms, k.run_ms)}), and that is what "
                f"{question.answered_by} did.")
    else:
        text = (f"You predicted **{question.choices[k.predicted]}** (locked in {_when(k.locked_ms, k.run_ms)}); "
                f"{question.answered_by} did **{did}**. " + question.reasons.get(k.predicted, ""))
    if k.after_run is not None:
        text = (text.strip() + f"\n\nYou also chose **{question.choices[k.after_run]}**, {AFTER_RUN} "
                f"({_when(k.chosen_ms, k.run_ms)}): not scored as a prediction. "
                + ("" if k.after_run == observed else question.reasons.get(k.after_run, "")))
    return Reveal(k.predicted, observed, text.strip(), k.after_run)


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
        now = kept(question, home)
        already = now.after_run or now.predicted
        self.choices = widgets.RadioButtons(options=[(label, key) for key, label in question.choices.items()],
                                            value=already, layout=widgets.Layout(width="auto"))
        self.button = widgets.Button(description="Lock in", button_style="primary",
                                     tooltip="Keep this choice as your prediction (lock_in())")
        self.status = widgets.HTML()
        self.button.on_click(lambda _button: self.lock_in(self.choices.value))
        self.widget = widgets.VBox([widgets.HTML(f"<b>Your prediction:</b> {question.text}"), self.choices,
                                    widgets.HBox([self.button, self.status])])
        self._show(now)

    def lock_in(self, choice: str | None) -> str | None:
        """Lock ``choice`` in (:func:`lock_in`: after the run began, it is kept as chosen after the run) and show it;
        None (nothing chosen yet) asks for a choice first.

        Raises:
            ValueError: ``choice`` is not one of the question's keys.
            OSError: the working folder cannot be written.
        """
        if choice is None:
            self.status.value = "Choose one first."
            return None
        lock_in(self.question, choice, self.home)
        self.choices.value = choice
        self._show(kept(self.question, self.home))
        return choice

    def _show(self, now: Kept) -> None:
        words = self.question.choices
        said = (f"Locked in: <b>{words[now.predicted]}</b>, before the run. The summary compares it with the run."
                if now.predicted else "Nothing locked in yet." if now.run_ms is None else
                "Nothing was locked in before the run began: no prediction to score.")
        if now.after_run:
            said += f" Chosen after the run: <b>{words[now.after_run]}</b> (not scored as a prediction)."
        elif now.run_ms is not None:
            said += " The run has begun: a choice now is kept as chosen after the run, not scored."
        self.status.value = said

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def predict(question: Question, home: Path | None = None) -> PredictionWidget:
    """The widget for ``question`` (:class:`PredictionWidget`), to show before the notebook's first experiment: only a
    choice locked in before that experiment started is a prediction (:func:`lock_in`).

    Raises:
        OSError: the run began in this process and its start could not be written into the prediction's file.
    """
    return PredictionWidget(question, home)


def check_reveal(shown: Reveal, question: Question, widget: PredictionWidget | None = None) -> Reveal | None:
    """Check that ``shown`` (:func:`reveal` of ``question``) says what a reveal must: the words of the choice the run
    bore out and what answered (``question.answered_by``); for the prediction it scored: that none was locked in before
    the run, that it was right, or the usual reason behind the wrong choice; and for a choice made after the run began:
    its words, that it was :data:`AFTER_RUN`, and the reason behind it when it is wrong. A notebook's claims cell
    calls it.

    With ``widget`` (the test run, whose CI-only cell locked a prediction in through it before the first experiment):
    ``shown`` scored what is kept as the prediction locked before the run (:func:`kept`); then a wrong choice that has a
    reason (another than a choice made after the run that ``shown`` showed, if one can be) is chosen through the widget,
    now after the run, revealed again and checked the same way: it must be shown as chosen after the run, and the
    scored prediction must not change.

    Returns:
        The second :class:`Reveal` (with ``widget``), else None.
    Raises:
        AssertionError: a reveal's message lacks what it must say (named), ``shown`` scored another prediction than
            the one kept, or a choice made after the run was scored.
        OSError: the working folder cannot be written (with ``widget``).
    """
    def check(r: Reveal) -> None:
        did = question.choices[r.observed]
        must = [did, question.answered_by] + (
            ["did not lock in"] if r.predicted is None else [f"that is what {question.answered_by} did"] if r.right
            else [question.choices[r.predicted], question.reasons.get(r.predicted, "")])
        if r.after_run is not None:
            must += [question.choices[r.after_run], AFTER_RUN] + (
                [] if r.after_run == r.observed else [question.reasons.get(r.after_run, "")])
        if missing := [words for words in must if words not in r.message]:
            raise AssertionError(f"the reveal of notebook {question.notebook}'s prediction {r.predicted!r} (the run: "
                                 f"{r.observed!r}, chosen after it: {r.after_run!r}) does not say {missing}: "
                                 f"{r.message}")

    check(shown)
    if widget is None:
        return None
    now = kept(question, widget.home)
    if (shown.predicted, shown.after_run) != (now.predicted, now.after_run):
        raise AssertionError(f"the reveal scored {shown.predicted!r} (chosen after the run: {shown.after_run!r}), not "
                             f"the prediction kept: {now.predicted!r} (chosen after the run: {now.after_run!r})")
    wrong = [k for k in question.reasons if k != shown.observed]
    other = next((k for k in wrong if k != shown.after_run), wrong[0])
    widget.lock_in(other)
    again = reveal(question, shown.observed, widget.home)
    if (again.predicted, again.after_run) != (shown.predicted, other):
        raise AssertionError(f"a choice made after the run ({other!r}) was revealed as predicted {again.predicted!r}, "
                             f"chosen after the run {again.after_run!r}: it must be kept apart, not scored")
    check(again)
    return again
