"""Publish the marks a kernel makes of a learner's progress to who listens.

The marks a notebook's kernel makes of a learner's progress, and who hears them: a tiny observer registry below
every lesson, so that an exercise or a claims cell knows nothing of who listens.

A mark is ``(kind, state)``, published where it is observed:

* ``"exercise"``: an exercise check's outcome (:func:`labkit.learn.exercise.check`): ``"unanswered"`` (the answer cell
  still holds ``...``), ``"wrong"``, ``"right"``, or ``"error"``: the check raised (the broker did not answer, the run
  or the lab failed), which says nothing of the answer;
* ``"claims"``: a notebook's claims cell: ``"held"`` when its assertions ran to its last line
  (:func:`labkit.learn.claims.claims_hold`); ``"failed"`` (an assertion did not hold) and ``"error"`` (the cell raised
  anything else) are seen by whoever watches the cell end, as the workshop hub's kernels do;
* ``"prediction"``: the choice a learner locked in for the notebook's opening question before its first experiment
  started (:func:`labkit.learn.predictions.lock_in`), its key: a short identifier (:data:`CHOICE`), not a fixed state; a
  choice made after that is kept apart and published as no mark;
* ``"participant"``: ``"stalled"``, where the lab observes a participant stuck in a client call past the lab's deadline
  (:attr:`labkit.crashlab.participant.Participant.stalled_in`: the participant's own ``stalled`` event in its
  history, written by its process's watchdog), once per such event;
* ``"kernel"``: ``"busy"`` (a cell runs), ``"idle"`` (the latest cell ended) or ``"raised"`` (the latest cell ended by
  raising: the run failed there), which the lab never publishes: the workshop hub's kernels report them from
  IPython's own cell events (:mod:`labkit.hub.report`);
* ``"experiment"``: ``"started"``, where the lab starts something whose outcome a notebook's opening question asks
  about: a topic created (:func:`labkit.kafka.records.create_topic`: every experiment on a broker writes to topics
  of its own, made before its participants, producers or Spark drivers start) or a model's world run with its
  history (:class:`labkit.models.kip1289.World`). Starting a broker is none: notebooks start theirs before the
  question. :func:`experiment_started_ms` says when this process's first one came; the live view is not told of them
  (:data:`REPORTED`).

Observers are called in the publishing thread, in the order they subscribed; none by default. The workshop hub's
kernels subscribe one (:mod:`labkit.hub.report`), which only queues the mark and never raises. Stdlib only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

#: The kinds of mark an experiment's start, a stalled participant and a kernel's state are.
EXPERIMENT, PARTICIPANT, KERNEL = "experiment", "participant", "kernel"
#: What each kind of mark may say.
STATES = {"exercise": ("unanswered", "wrong", "right", "error"), "claims": ("held", "failed", "error"),
          PARTICIPANT: ("stalled",), KERNEL: ("busy", "idle", "raised"), EXPERIMENT: ("started",)}
#: The kind of mark whose state is a prediction's choice key, and what such a key looks like.
PREDICTION, CHOICE = "prediction", re.compile(r"[a-z][a-z0-9_]{0,31}")
#: Every kind of mark.
KINDS = (*STATES, PREDICTION)
#: The kinds of mark a kernel reports to the workshop hub's live view (:mod:`labkit.hub.report`).
REPORTED = ("exercise", "claims", PREDICTION, PARTICIPANT, KERNEL)
#: Each notebook's opening question's choices, ``{key: the words the learner chose from}`` in the order shown (its
#: lesson's ``QUESTION.choices``: a test holds the two equal), so that the workshop hub's live view, which imports no
#: lesson, takes no other key for a notebook's prediction and shows the room the learners' own words.
CHOICES = {"00": {"gone": "Not in the log: the abort removes them",
                  "nobody": "In the log, but no consumer returns them",
                  "uncommitted_only": "In the log; only a read_uncommitted consumer returns them",
                  "everyone": "In the log, and every consumer returns them"},
           "01": {"two_one": "Two copies without idempotence, one with it",
                  "one_one": "One copy either way",
                  "two_two": "Two copies either way",
                  "none_one": "None without idempotence (the send failed), one with it"},
           "02": {"nothing": "Nothing: once written, it counts",
                  "idempotence": "The idempotent producer: the broker drops it as a duplicate",
                  "fencing": "Fencing: the broker refuses the zombie's transaction, so its output is aborted or never "
                             "written"},
           "03": {"at_once": "At once: the record is in no transaction",
                  "when_ends": "Once the transaction ends, whether it commits or aborts",
                  "if_commits": "Only if the transaction commits"},
           "04": {"two_one": "Two with Spark's Kafka sink, one with the transactional sink",
                  "one_one": "One with either: Spark's checkpoint makes it exactly-once",
                  "two_two": "Two with either: the replay writes the batch again"},
           "05": {"current_only": "The one with B's current epoch; the lower one is refused",
                  "lower_only": "The one with the lower epoch; the current one is refused",
                  "both": "Both",
                  "neither": "Neither: the partition is not B's"},
           "06": {"other_at_once": "B, within moments of the crash",
                  "other_after_lock": "B, once their acquisition locks expire",
                  "nobody": "Nobody: they wait for A to come back"},
           "07": {"lost_only": "Only the lost records",
                  "duplicated_only": "Only the duplicated records",
                  "both": "Both",
                  "neither": "Neither"},
           "08": {"lost": "Lost: its records are gone from the log",
                  "aborted": "Aborted: its records stay in the log, marked aborted, and its input is processed again",
                  "carried_on": "Carried on: the producer goes on and commits it"},
           "09": {"kept": "Kept: the producer was told they committed, so they are in the log for good",
                  "lost": "Lost: the follower that missed them becomes leader, and the old leader, back, drops them",
                  "offline": "Neither, yet: the partition stays offline until the old leader's broker returns"}}


def valid(kind: str, state: object) -> bool:
    """Whether ``(kind, state)`` is a mark: a state of :data:`STATES` for its kind, or a choice key (:data:`CHOICE`)
    for a prediction."""
    if kind == PREDICTION:
        return isinstance(state, str) and CHOICE.fullmatch(state) is not None
    return state in STATES.get(kind, ())


#: An observer: called with ``(kind, state)`` for each mark published in this process.
Observer = Callable[[str, str], None]

_observers: list[Observer] = []
#: When this process published its first ``("experiment", "started")`` mark, ms since the epoch (None: not yet).
_experiment_ms: int | None = None


def experiment_started_ms() -> int | None:
    """When this process's first experiment started (its first ``("experiment", "started")`` mark), in ms since the
    epoch; None if none has. A kernel is one process: this is its notebook's first experiment in this kernel."""
    return _experiment_ms


def subscribe(observer: Observer) -> None:
    """Call ``observer(kind, state)`` for every mark published from now on (once, however often subscribed)."""
    if observer not in _observers:
        _observers.append(observer)


def unsubscribe(observer: Observer) -> None:
    """Stop calling ``observer``; nothing if it was not subscribed."""
    if observer in _observers:
        _observers.remove(observer)


def publish(kind: str, state: str) -> None:
    """Tell every observer of the mark ``(kind, state)``.

    Raises:
        ValueError: ``(kind, state)`` is no mark (:func:`valid`; checked before any observer is called).
    """
    if not valid(kind, state):
        raise ValueError(f"a mark is one of {STATES} or a prediction's choice key ({CHOICE.pattern}), "
                         f"not ({kind!r}, {state!r})")
    global _experiment_ms
    if kind == EXPERIMENT and _experiment_ms is None:
        _experiment_ms = int(time.time() * 1000)
    for observer in list(_observers):
        observer(kind, state)
