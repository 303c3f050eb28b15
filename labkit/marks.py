"""The marks a notebook's kernel makes of a learner's progress, and who hears them: a tiny observer registry below
every lesson, so that an exercise or a claims cell knows nothing of who listens.

A mark is ``(kind, state)``, published where it is observed:

* ``"exercise"``: an exercise check's outcome (:func:`labkit.exercise.check`): ``"unanswered"`` (the answer cell still
  holds ``...``), ``"wrong"``, ``"right"``, or ``"error"``: the check raised (the broker did not answer, the run or the
  lab failed), which says nothing of the answer;
* ``"claims"``: a notebook's claims cell: ``"held"`` when its assertions ran to its last line
  (:func:`labkit.claims.claims_hold`); ``"failed"`` (an assertion did not hold) and ``"error"`` (the cell raised
  anything else) are seen by whoever watches the cell end, as the workshop hub's kernels do;
* ``"prediction"``: the choice a learner locked in for the notebook's opening question before its first experiment
  started (:func:`labkit.predictions.lock_in`), its key: a short identifier (:data:`CHOICE`), not a fixed state; a
  choice made after that is kept apart and published as no mark;
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

#: The kind of mark an experiment's start is.
EXPERIMENT = "experiment"
#: What each kind of mark may say.
STATES = {"exercise": ("unanswered", "wrong", "right", "error"), "claims": ("held", "failed", "error"),
          EXPERIMENT: ("started",)}
#: The kind of mark whose state is a prediction's choice key, and what such a key looks like.
PREDICTION, CHOICE = "prediction", re.compile(r"[a-z][a-z0-9_]{0,31}")
#: Every kind of mark.
KINDS = (*STATES, PREDICTION)
#: The kinds of mark a kernel reports to the workshop hub's live view (:mod:`labkit.hub.report`).
REPORTED = ("exercise", "claims", PREDICTION)
#: The choice keys of each notebook's opening question (its lesson's ``QUESTION``: a test holds the two equal), so
#: that the workshop hub's live view, which imports no lesson, takes no other words for a notebook's prediction.
CHOICES = {"00": ("gone", "nobody", "uncommitted_only", "everyone"),
           "01": ("two_one", "one_one", "two_two", "none_one"),
           "02": ("nothing", "idempotence", "fencing"),
           "03": ("at_once", "when_ends", "if_commits"),
           "04": ("two_one", "one_one", "two_two"),
           "05": ("current_only", "lower_only", "both", "neither"),
           "06": ("other_at_once", "other_after_lock", "nobody"),
           "07": ("lost_only", "duplicated_only", "both", "neither"),
           "08": ("lost", "aborted", "carried_on"),
           "09": ("kept", "lost", "offline")}


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
