"""Notebook 06's opening question (:data:`QUESTION`): who gets the records a crashed share consumer held, and when;
answered by :func:`crash_outcome` from part 3's two runs (a consumer crashed, and the control: one paused)."""

from __future__ import annotations

from labkit.errors import LabkitError
from labkit.history import Event
from labkit.lessons.share_groups import first_ns
from labkit.predictions import Question

QUESTION = Question(
    "06", "three consumers of one share group read a single partition, and one is killed (kill -9) while it holds "
          "records it has not acknowledged. Who gets those records, and when?",
    {"other_at_once": "Another consumer, within moments of the crash",
     "other_after_lock": "Another consumer, once their acquisition locks expire",
     "nobody": "Nobody: they wait for the crashed consumer to come back"},
    {"other_after_lock": "A kill -9 ends the process, not the machine: its operating system closes the connection, "
                         "the broker ends the consumer's share session and releases its records at once "
                         "(ShareSessionCache's disconnect listener, SharePartition.releaseAcquiredRecords). The lock "
                         "is what frees them when nothing closes the connection: a paused consumer, a dead host.",
     "nobody": "A share group hands out records, not partitions: an acquired record belongs to no consumer once its "
               "session ends or its lock expires, and goes to whichever consumer fetches next (KIP-932)."})


def crash_outcome(events: list[Event], crashed: dict, paused: dict) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from the history (``events``) and part 3's two
    :func:`labkit.lessons.share_groups.lock_expiry` runs: ``crashed`` (A SIGKILLed) and ``paused`` (A SIGSTOPped:
    its records wait for the lock, the control). "nobody" if B got none of the crashed A's records; else
    "other_at_once" if they were AVAILABLE again sooner after the crash than the paused A's were after it got them
    (the lock's way), "other_after_lock" if not.

    Raises:
        LabkitError: B got some of the records but not all (the lab's failure, named).
        ValueError: the history lacks a run's delivery, crash or release (:func:`first_ns`).
    """
    got = {e.offset for e in events if e.kind == "delivered" and e.topic == crashed["topic"]
           and e.participant == crashed["b"].name}
    if not got:
        return "nobody"
    if len(got) < crashed["records"]:
        raise LabkitError(f"the run fits no choice: B got {len(got)} of the crashed A's {crashed['records']} records")
    after_crash = (first_ns(events, "share_state", topic=crashed["topic"], state="AVAILABLE")
                   - first_ns(events, "crash", crashed["a"].name))
    after_lock = (first_ns(events, "share_state", topic=paused["topic"], state="AVAILABLE")
                  - first_ns(events, "delivered", paused["a"].name))
    return "other_at_once" if after_crash < after_lock else "other_after_lock"
