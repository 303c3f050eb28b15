"""Set up a share group's run and read what became of its records.

A run here is an :class:`~labkit.crashlab.experiment.Experiment`'s topic and share group, with share consumer
participants (:mod:`labkit.share.roles.share_consumer`) and a :class:`~labkit.share.observer.ShareObserver` writing
to its history: ``delivered`` events are what each consumer got, ``share_state`` events what the broker persisted in
``__share_group_state`` (KIP-932). Times are the history's monotonic clock, in ns.
"""

from __future__ import annotations

import uuid

import pandas as pd

from labkit.core.history import Event
from labkit.crashlab.experiment import Experiment
from labkit.kafka.share_state import describe_share_group_offsets
from labkit.share.group_config import configure_group


def share_group(exp: Experiment, label: str, records: int, **config: object) -> tuple[str, str]:
    """Make a fresh one-partition topic holding ``records`` records (``source-<label>-1``..) and a fresh share group.

    Args:
        exp: the experiment; the topic is ``exp.topic(label)``, written by a producer participant
            ``source-<label>`` in one batch.
        label: names the topic, the producer and the group (``<experiment>-<label>-<6 hex digits>``).
        records: how many records.
        config: the group's configs, passed to :func:`~labkit.share.group_config.configure_group`.
    Returns:
        ``(topic, group_id)``.
    Raises:
        TimeoutError: the producer did not finish within 60 s.
        LabkitError: see :func:`~labkit.share.group_config.configure_group`.
    """
    topic = exp.topic(label)
    exp.participant(f"source-{label}", "producer", topic=topic, iterations=1, batch=records).start().wait(60)
    group = f"{exp.name}-{label}-{uuid.uuid4().hex[:6]}"
    configure_group(exp.bootstrap, group, **config)
    return topic, group


def deliveries(exp: Experiment, topic: str) -> pd.DataFrame:
    """List every delivery of ``topic``'s records, in time order: consumer, offset, value_id, delivery_count."""
    rows = [(e.participant, e.offset, e.value_id, e.delivery_count) for e in exp.history.events()
            if e.kind == "delivered" and e.topic == topic]
    return pd.DataFrame(rows, columns=["consumer", "offset", "value_id", "delivery_count"])


def first_ns(events: list[Event], kind: str, participant: str | None = None, topic: str | None = None,
             **match: object) -> int:
    """Return the monotonic time (ns) of the first of ``events`` of ``kind`` that matches.

    Args:
        participant, topic: the event's, when given.
        match: other fields the event must equal (e.g. ``state="AVAILABLE"``).
    Raises:
        ValueError: no event matches.
    """
    return min(e.mono_ns for e in events if e.kind == kind and participant in (None, e.participant)
               and topic in (None, e.topic) and all(getattr(e, k) == v for k, v in match.items()))


def persisted(exp: Experiment, topic: str) -> pd.DataFrame:
    """Tabulate the last state the broker persisted for each offset of ``topic`` (partition 0).

    Read from the observer's ``share_state`` events (``__share_group_state``, KIP-932): one row per offset with
    offset, state, delivery_count and ``history`` (every state it went through, ``" → "``-joined).
    """
    last, seen = {}, {}
    for e in exp.history.events():
        if e.kind == "share_state" and e.topic == topic:
            for offset in range(e.offset, e.last_offset + 1):
                last[offset] = (e.state, e.delivery_count)
                seen.setdefault(offset, []).append(e.state)
    return pd.DataFrame([(o, *last[o], " → ".join(seen[o])) for o in sorted(last)],
                        columns=["offset", "state", "delivery_count", "history"])


def share_offsets(bootstrap: str, group: str, topic: str) -> tuple[int, int] | None:
    """Ask the broker for ``(SPSO, lag)`` of ``group`` on ``topic``'s partition 0, ``None`` if the group has none there.

    DescribeShareGroupOffsets (KIP-932); the lag (KIP-1226) counts the records from the SPSO on not yet ACKNOWLEDGED
    or ARCHIVED, in records.

    Raises:
        labkit.core.errors.BrokerUnreachableError, labkit.kafka.wire.WireError: see
            :func:`~labkit.kafka.share_state.describe_share_group_offsets`.
    """
    rows = [(r["start_offset"], r["lag"]) for r in describe_share_group_offsets(bootstrap, group)
            if r["topic"] == topic and r["partition"] == 0 and not r["error"]]
    return rows[0] if rows else None
