"""Notebook 00's exercise: predict what each isolation level returns of a partition, then check on the broker."""

from __future__ import annotations

from labkit.exercise import Verdict, unanswered
from labkit.kafka.records import create_topic, produce, read_topic

LEVELS = ("read_committed", "read_uncommitted")


def quiz_topic(bootstrap: str) -> str:
    """A fresh one-partition topic holding, in this order: a transaction of ``x1, x2`` that commits, a plain
    (non-transactional) record ``p1``, and a transaction of ``y1, y2`` that aborts. Returns its name."""
    topic = create_topic(bootstrap, "tour-quiz")
    produce(bootstrap, topic, ["x1", "x2"], transactional_id=f"quiz-{topic}", outcome="commit")
    produce(bootstrap, topic, ["p1"])
    produce(bootstrap, topic, ["y1", "y2"], transactional_id=f"quiz-{topic}", outcome="abort")
    return topic


def check_prediction(bootstrap: str, topic: str, answer: object) -> "Verdict":
    """Check ``answer``, ``{"read_committed": [values], "read_uncommitted": [values]}`` in log order, against
    what consumers at each isolation level really read from ``topic`` (see :func:`quiz_topic`)."""
    if (v := unanswered(answer, 'a dict {"read_committed": [...], "read_uncommitted": [...]} of values')):
        return v
    if not isinstance(answer, dict) or set(answer) != set(LEVELS):
        return Verdict(False, 'The answer is a dict with exactly two keys, "read_committed" and "read_uncommitted".')
    real = {level: list(read_topic(bootstrap, topic, level).value) for level in LEVELS}
    wrong = [level for level in LEVELS if list(answer[level]) != real[level]]
    if not wrong:
        return Verdict(True, f"read_committed returned {real['read_committed']} and read_uncommitted "
                             f"{real['read_uncommitted']}: the aborted records are in the log, only read_committed "
                             "skips them, and nobody reads the two control records.")
    hints = {"read_committed": "read_committed returns every committed record and every non-transactional one, "
                               "and skips what an aborted transaction wrote.",
             "read_uncommitted": "read_uncommitted returns every record in the log, aborted ones included; only "
                                 "the control records (COMMIT/ABORT markers) are never returned."}
    return Verdict(False, f"Your {' and '.join(wrong)} list{'s are' if len(wrong) > 1 else ' is'} not what the "
                          f"broker returned. " + " ".join(hints[level] for level in wrong))
