"""The share-group checker: KIP-932's promises, and a sink's effects, checked on a history.

It reads the share consumers' events (``delivered``, ``acknowledged``, ``ack_committed``, ``effect``),
the broker's as the observer sampled them (``share_state``, ``share_offsets``), and the writer's
``ack`` events (which offsets the topic holds). Anomalies (:data:`SHARE_ANOMALIES`):

* ``not delivered``: a record the topic holds was never delivered to any consumer (KIP-932 is
  at-least-once: every record is delivered, unless it was archived undelivered, which this lab never does);
* ``not terminal``: at the end a record is neither ACKNOWLEDGED nor ARCHIVED (below the final SPSO
  every record is; above it, the last persisted state batch says);
* ``over delivery limit``: a record delivered more often than the group's delivery count limit
  (``share.delivery.count.limit``); KIP-932 notes counts can be inexact after failures, so this
  counts deliveries the clients saw with a count above the limit;
* ``concurrent delivery``: a record delivered to a second consumer while the first still held its
  acquisition lock (it neither acknowledged it, nor crashed, and less than the lock duration, less a
  slack for the time between the broker's acquisition and the client's poll, had passed);
* ``lost effect``: a record whose ACCEPT was committed (``ack_committed`` without error) has no effect
  in the sink: the framework acknowledged it, then lost it;
* ``duplicate effect``: a record's effect was written more than once (one anomaly per record, its writers
  in the detail).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from labkit.broker.settings import SHARE_LOCK_MS
from labkit.core.history import Event
from labkit.crashlab.check import Anomaly, CheckResult

SHARE_ANOMALIES = ("not delivered", "not terminal", "over delivery limit", "concurrent delivery", "lost effect",
                   "duplicate effect")
TERMINAL = ("ACKNOWLEDGED", "ARCHIVED")


def _at(e: Event, name: str, detail: str) -> Anomaly:
    return Anomaly(name, e.value_id, detail, e.participant, e.topic, e.partition, e.offset)


def check_share(events: Iterable[Event], *, topic: str, delivery_limit: int = 5, lock_ms: int = SHARE_LOCK_MS,
                slack_ms: int = 1000, sink: bool = False) -> CheckResult:
    """Check the share-group part of one experiment's history.

    Args:
        events: the history, with the writer's ``ack`` events for ``topic`` and the observer's
            ``share_state`` / ``share_offsets`` events sampled until the end.
        topic: the topic the share group consumed.
        delivery_limit: the group's ``share.delivery.count.limit`` (Kafka's default 5).
        lock_ms: the acquisition lock duration, ms (``group.share.record.lock.duration.ms``; default the lab broker's,
            :data:`~labkit.broker.settings.SHARE_LOCK_MS`).
        slack_ms: ms of the lock allowed for the delay between the broker's acquisition and the
            client's poll returning (client timestamps are later than the broker's).
        sink: the consumers wrote effects to a sink: check lost and duplicate effects.
    Returns:
        A :class:`~labkit.crashlab.check.CheckResult` whose names are :data:`SHARE_ANOMALIES`.
    """
    events = sorted((e for e in events if e.topic in (topic, None)), key=lambda e: e.mono_ns)
    found: list[Anomaly] = []
    written = {(e.partition, e.offset): e for e in events if e.kind == "ack" and e.offset is not None}
    delivered = [e for e in events if e.kind == "delivered"]
    seen = {(e.partition, e.offset) for e in delivered}
    found += [_at(e, "not delivered", f"offset {e.offset} ({e.value_id}) was never delivered to a consumer")
              for key, e in sorted(written.items()) if key not in seen]
    found += _not_terminal(events, written)
    found += [_at(e, "over delivery limit", f"{e.participant} got offset {e.offset} for the {e.delivery_count}th "
                                            f"time; the limit is {delivery_limit}")
              for e in delivered if (e.delivery_count or 0) > delivery_limit]
    found += _concurrent(events, lock_ms - slack_ms)
    if sink:
        found += _effects(events)
    return CheckResult(found, SHARE_ANOMALIES)


def _not_terminal(events: list[Event], written: dict) -> list[Anomaly]:
    spso: dict[int, int] = {}
    state: dict[tuple, str] = {}
    for e in events:
        if e.kind == "share_offsets":
            spso[e.partition] = e.offset
        elif e.kind == "share_state":
            for offset in range(e.offset, e.last_offset + 1):
                state[e.partition, offset] = e.state
    found = []
    for (partition, offset), w in sorted(written.items()):
        if offset < spso.get(partition, 0):
            continue
        last = state.get((partition, offset))
        if last not in TERMINAL:
            found.append(_at(w, "not terminal", f"offset {offset} ended {last or 'never persisted'} "
                                                f"(SPSO {spso.get(partition, 'unknown')}), not ACKNOWLEDGED or ARCHIVED"))
    return found


def _concurrent(events: list[Event], held_ms: int) -> list[Anomaly]:
    holder: dict[tuple, Event] = {}  # (partition, offset) -> the delivery that holds the lock now
    found = []
    for e in events:
        if e.kind in ("crash", "stop", "fenced", "finished"):  # a member that left releases its records
            holder = {k: d for k, d in holder.items() if d.participant != e.participant}
        elif e.kind in ("acknowledged", "ack_committed"):
            d = holder.get((e.partition, e.offset))
            if d is not None and d.participant == e.participant:
                del holder[e.partition, e.offset]
        elif e.kind == "delivered":
            d = holder.get((e.partition, e.offset))
            if d is not None and d.participant != e.participant and \
                    e.mono_ns - d.mono_ns < held_ms * 1_000_000:
                found.append(_at(e, "concurrent delivery",
                                 f"{e.participant} got offset {e.offset} {(e.mono_ns - d.mono_ns) / 1e9:.2f} s after "
                                 f"{d.participant}, which still held its acquisition lock"))
            holder[e.partition, e.offset] = e
    return found


def _effects(events: list[Event]) -> list[Anomaly]:
    effects = Counter(e.value_id for e in events if e.kind == "effect")
    found = []
    committed = {}
    for e in events:
        if e.kind == "ack_committed" and e.ack_type == "ACCEPT" and e.error is None:
            committed.setdefault(e.value_id, e)
    found += [_at(e, "lost effect", f"{e.participant}'s ACCEPT of {vid} (offset {e.offset}) was committed, but the "
                                    "sink never got its effect") for vid, e in committed.items() if not effects[vid]]
    writers: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.kind == "effect":
            writers[e.value_id].append(e)
    found += [_at(es[1], "duplicate effect", f"{vid}'s effect was written {len(es)} times (by "
                                             f"{', '.join(e.participant for e in es)})")
              for vid, es in writers.items() if len(es) > 1]
    return found
