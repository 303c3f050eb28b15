"""Notebook 06's opening question (:data:`QUESTION`): who gets the records a crashed share consumer held, and when;
answered by :func:`crash_outcome` from part 3's two runs (a consumer crashed, and the control: one paused)."""

from __future__ import annotations

from labkit.core.errors import LabkitError
from labkit.core.history import Event
from labkit.learn.predictions import Question
from labkit.share.runs import first_ns

QUESTION = Question(
    "06", "consumers A and B of one share group read a single partition, and A is killed (kill -9) while it holds "
          "records it has not acknowledged. Who gets those records, and when?",
    {"other_at_once": "B, within moments of the crash",
     "other_after_lock": "B, once their acquisition locks expire",
     "nobody": "Nobody: they wait for A to come back"},
    {"other_after_lock": "A kill -9 ends the process, not the machine: its operating system closes the connection, "
                         "the broker ends the consumer's share session and releases its records at once "
                         "(ShareSessionCache's disconnect listener, SharePartition.releaseAcquiredRecords). The lock "
                         "is what frees them when nothing closes the connection: a paused consumer, a dead host.",
     "nobody": "A share group hands out records, not partitions: an acquired record belongs to no consumer once its "
               "session ends or its lock expires, and goes to whichever consumer fetches next (KIP-932)."})


def crash_outcome(events: list[Event], crashed: dict, paused: dict) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from the history (``events``) and part 3's two
    :func:`labkit.lessons.share_groups.lock_expiry` runs: ``crashed`` (A SIGKILLed) and ``paused`` (A SIGSTOPped:
    its records wait for the lock, the control). Each run's time is from A's first delivery to its records' first
    AVAILABLE state (ns, the observer's read of ``__share_group_state``), so both include the moment between A's
    delivery and its crash or pause. "other_at_once" if the crashed run's time is under half the control's, else
    "other_after_lock". "nobody" is never the run's answer: B got them, or the run failed.

    Raises:
        LabkitError: B did not get every one of the crashed A's records (the lab's failure, named).
        ValueError: the history lacks a run's delivery or release (:func:`first_ns`).
    """
    got = {e.offset for e in events if e.kind == "delivered" and e.topic == crashed["topic"]
           and e.participant == crashed["b"].name}
    if len(got) < crashed["records"]:
        raise LabkitError(f"the run fits no choice: B got {len(got)} of the crashed A's {crashed['records']} records "
                          "(lock_expiry waits until it has them all)")
    freed = {run["a"].name: first_ns(events, "share_state", topic=run["topic"], state="AVAILABLE")
             - first_ns(events, "delivered", run["a"].name, topic=run["topic"]) for run in (crashed, paused)}
    return "other_at_once" if freed[crashed["a"].name] < freed[paused["a"].name] / 2 else "other_after_lock"
