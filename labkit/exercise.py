"""Exercises with automatic checks (nbgrader's idea, without its server). A notebook's exercise cell sets
``answer``; its check cell calls the lesson's ``check_...`` function, which compares the answer with what really
happened (on the broker, or in the run the notebook just made) and returns a :class:`Verdict`, shown as right,
or as not yet with a hint. A check never raises on a wrong or missing answer, so a notebook with its exercises
unanswered still runs headless. The reference solutions and a wrong answer per exercise are in
``instructor/solutions.py``; ``tests/test_exercise.py`` runs every check with both. On the workshop hub, each verdict
made reaches the instructor's live view (:func:`labkit.hub.report.verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.hub import report

#: What an exercise cell holds until the learner answers: ``answer = ...``.
UNANSWERED = ...


@dataclass(frozen=True)
class Verdict:
    """A check's outcome: ``ok`` (right or not), ``message`` (why; a hint when not right)."""

    ok: bool
    message: str

    def __post_init__(self) -> None:
        report.verdict(self.ok)  # to the instructor's live view, in a kernel on the workshop hub only

    def _repr_markdown_(self) -> str:
        return ("✅ **Right.** " if self.ok else "❌ **Not yet.** ") + self.message

    def __repr__(self) -> str:
        return ("RIGHT: " if self.ok else "NOT YET: ") + self.message


def unanswered(answer: object, shape: str) -> Verdict | None:
    """A :class:`Verdict` asking for an answer if ``answer`` is still :data:`UNANSWERED` (``shape``: what to
    write, e.g. ``"a dict of producer configs"``), else ``None``."""
    if answer is UNANSWERED:
        return Verdict(False, f"Write your answer ({shape}) in the cell above in place of `...`, run it, then "
                              "run this cell again.")
    return None


def compare(expected: object, answer: object, right: str, hint: str) -> Verdict:
    """:class:`Verdict` of ``answer == expected``: ``right`` if equal, else ``hint`` (which should say why, not
    give the answer away)."""
    return Verdict(True, right) if answer == expected else Verdict(False, hint)
