"""Check an exercise's answer against what really happened.

Exercises with automatic checks (nbgrader's idea, without its server). A notebook's exercise cell sets
``answer``; its check cell calls the lesson's ``check_...`` function, which compares the answer with what really
happened (on the broker, or in the run the notebook just made) and returns a :class:`Verdict`: unanswered (the cell
still holds ``...``), wrong (with a hint) or right. A check never raises on a wrong or missing answer, so a notebook
with its exercises unanswered still runs headless; it raises when it could not judge the answer (the broker did not
answer, the run or the lab failed): that error is the lab's, shown as an error, never as the learner's mistake.

Every ``check_...`` is decorated with :func:`marked`, which publishes its outcome as a mark (:mod:`labkit.learn.marks`:
``("exercise", state)``, ``"error"`` when it raised) for whoever listens; a :class:`Verdict` itself is a value and does
nothing. The reference solutions and wrong answers are in ``instructor/solutions.py``; ``tests/test_exercise.py`` runs
every check with them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from labkit.core.errors import LabkitError
from labkit.learn import marks

#: What an exercise cell holds until the learner answers: ``answer = ...``.
UNANSWERED = ...
#: A verdict's states (a check that raised is the fourth mark, ``"error"``: :func:`marked`).
VERDICTS = ("unanswered", "wrong", "right")
#: How a notebook shows each state, before the verdict's message (Markdown): an unanswered exercise is no mistake.
SHOWN = {"unanswered": "✎ **Your answer first.** ", "wrong": "✗ **Not yet.** ", "right": "✓ **Right.** "}
#: Added to an exception a check raises: whose failure it is.
ERROR_NOTE = ("labkit: the check could not judge your answer: the error above is the lab's (the broker or the run), "
              "not your answer's. Run the check again; if it fails again, ask the instructor.")


class CheckError(LabkitError):
    """A check's run did not show what the lesson's question is about (e.g. no replay was skipped), so no answer can
    be judged against it: the lab's failure, not the learner's."""


@dataclass(frozen=True)
class Verdict:
    """A check's outcome: ``state`` (one of :data:`VERDICTS`), ``message`` (why; a hint when wrong, what to write
    when unanswered).

    Raises (constructor):
        ValueError: ``state`` is not one of :data:`VERDICTS`.
    """

    state: str
    message: str

    def __post_init__(self) -> None:
        if self.state not in VERDICTS:
            raise ValueError(f"a verdict's state is one of {', '.join(VERDICTS)}, not {self.state!r}")

    @property
    def ok(self) -> bool:
        """Whether the answer is right."""
        return self.state == "right"

    def _repr_markdown_(self) -> str:
        return SHOWN[self.state] + self.message

    def __repr__(self) -> str:
        return {"right": "RIGHT: ", "wrong": "NOT YET: ", "unanswered": "UNANSWERED: "}[self.state] + \
            self.message


def marked(fn: Callable[..., Verdict]) -> Callable[..., Verdict]:
    """Decorator of a lesson's exercise check: call ``fn``, publish ``("exercise", verdict.state)`` and return its
    :class:`Verdict`; when ``fn`` raises an :class:`Exception`, publish ``("exercise", "error")`` and raise it again,
    with :data:`ERROR_NOTE` added (an interrupt, a ``BaseException``, publishes nothing)."""

    @functools.wraps(fn)
    def checked(*args: object, **kwargs: object) -> Verdict:
        try:
            verdict = fn(*args, **kwargs)
        except Exception as exc:
            exc.add_note(ERROR_NOTE)
            marks.publish("exercise", "error")
            raise
        marks.publish("exercise", verdict.state)
        return verdict

    return checked


def unanswered(answer: object, shape: str) -> Verdict | None:
    """An unanswered :class:`Verdict` asking for an answer if ``answer`` is still :data:`UNANSWERED` (``shape``: what
    to write, e.g. ``"a dict of producer configs"``), else ``None``."""
    if answer is UNANSWERED:
        return Verdict("unanswered", f"Write your answer ({shape}) in the cell above in place of `...`, run it, then "
                                     "run this cell again.")
    return None


def compare(expected: object, answer: object, right: str, hint: str) -> Verdict:
    """:class:`Verdict` of ``answer == expected``: right with ``right`` if equal, else wrong with ``hint`` (which
    should say why, not give the answer away)."""
    return Verdict("right", right) if answer == expected else Verdict("wrong", hint)
