"""The share consumer participant (KIP-932): a ``confluent_kafka.ShareConsumer`` in its own process.

Each poll's records are logged as ``delivered`` (with their delivery count); a per-record decision
(``decisions`` by value id, else ``default``; a list gives one decision per delivery, the last one
repeating) says what the consumer does with each:

* ``accept``: process it, ``acknowledge(ACCEPT)``;
* ``release``: ``acknowledge(RELEASE)``: back to AVAILABLE, delivered again (count + 1), until the
  group's delivery count limit archives it;
* ``reject``: ``acknowledge(REJECT)``: ARCHIVED (on Kafka 4.4 with a DLQ: ARCHIVING, then to the DLQ);
* ``hold``: process it for ``hold_ms`` (longer than the acquisition lock), then ``acknowledge(ACCEPT)``:
  the lock has expired, the broker refuses the late acknowledgement (INVALID_RECORD_STATE).

With ``sink`` (a SQLite file, :class:`Sink`), accepted records have an effect written there, as a
framework would, either before the acknowledgement (``order="sink_first"``) or after its commit
(``order="ack_first"``). ``ack_mode="implicit"`` acknowledges nothing explicitly: the next poll
accepts the previous batch (KIP-932's implicit acknowledgement).

Steps (crash points): after_poll, before_sink, after_sink, after_acknowledge, before_commit, after_commit.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from labkit.crashlab.roles import Loop

DECISIONS = ("accept", "release", "reject", "hold")
ORDERS = ("sink_first", "ack_first")
_ACK = {"accept": AcknowledgeType.ACCEPT, "hold": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
        "reject": AcknowledgeType.REJECT}


class Sink:
    """A framework's own state store: one SQLite table ``effects(value_id, written_ns)``; every
    :meth:`write` is its own SQLite transaction. Duplicates are kept (they are the lesson).

    Args:
        path: the SQLite file (created if missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with sqlite3.connect(self.path, timeout=30) as db:
            db.execute("CREATE TABLE IF NOT EXISTS effects (value_id TEXT NOT NULL, written_ns INTEGER NOT NULL)")

    def write(self, value_ids: list[str]) -> None:
        """Write one effect per value id, committed before this returns."""
        with sqlite3.connect(self.path, timeout=30) as db:
            db.executemany("INSERT INTO effects VALUES (?, ?)", [(v, time.monotonic_ns()) for v in value_ids])

    def effects(self) -> list[str]:
        """Every effect's value id, in the order written."""
        with sqlite3.connect(self.path, timeout=30) as db:
            return [row[0] for row in db.execute("SELECT value_id FROM effects ORDER BY rowid")]


def validate(options: dict) -> None:
    """Check a share consumer's settings before its process starts.

    Raises:
        ValueError: an unknown decision, order or ack mode, or a sink order without a sink (the
            message lists the choices).
    """
    decisions = list(options.get("decisions", {}).values()) + [options.get("default", "accept")]
    for d in (x for d in decisions for x in ([d] if isinstance(d, str) else d)):
        if d not in DECISIONS:
            raise ValueError(f"unknown decision {d!r}; the decisions are {', '.join(DECISIONS)}")
    if options.get("order", "sink_first") not in ORDERS:
        raise ValueError(f"unknown order {options['order']!r}; the orders are {', '.join(ORDERS)}")
    if options.get("ack_mode", "explicit") not in ("explicit", "implicit"):
        raise ValueError(f"ack_mode must be 'explicit' or 'implicit', not {options['ack_mode']!r}")
    if "order" in options and not options.get("sink"):
        raise ValueError("order= needs sink= (the SQLite file the effects go to)")


def decision(spec: dict, value_id: str, delivery_count: int) -> str:
    """What the consumer does with ``value_id`` on its ``delivery_count``-th delivery (1-based)."""
    d = spec.get("decisions", {}).get(value_id, spec.get("default", "accept"))
    return d if isinstance(d, str) else d[min(delivery_count, len(d)) - 1]


def run_share_consumer(loop: Loop) -> None:
    """The share consumer loop; spec keys: ``topic``, ``group_id``, ``ack_mode`` ("explicit" default,
    or "implicit"), ``decisions`` ({value id: decision}), ``default`` (decision, "accept"), ``hold_ms``,
    ``per_record_ms``, ``sink`` (SQLite path), ``order`` ("sink_first"/"ack_first"), ``idle_ms`` (stop
    after this long without records, once some came), ``first_ms`` (stop if none came this long after
    the start: joining a share group takes a few heartbeats; default 30 000)."""
    s = loop.spec
    explicit = s.get("ack_mode", "explicit") == "explicit"
    consumer = ShareConsumer(loop.client_config(**{
        "group.id": s["group_id"], "client.id": loop.name,
        "share.acknowledgement.mode": "explicit" if explicit else "implicit"}))
    consumer.subscribe([s["topic"]])
    sink = Sink(s["sink"]) if s.get("sink") else None
    idle_since, patience = time.monotonic(), s.get("first_ms", 30_000) / 1000
    try:
        while not loop.stopping and time.monotonic() - idle_since <= patience:
            msgs = [m for m in consumer.poll(0.5) if not m.error()]
            if not msgs:
                continue
            patience = s.get("idle_ms", 10_000) / 1000
            loop.iteration += 1
            idle_since = time.monotonic()
            now = time.monotonic_ns()
            loop.history.append_batch("delivered", loop.name, {
                "mono_ns": [now] * len(msgs), "partition": [m.partition() for m in msgs],
                "offset": [m.offset() for m in msgs], "value_id": [m.value().decode() for m in msgs],
                "delivery_count": [m.delivery_count() for m in msgs]}, topic=s["topic"])
            loop.step("after_poll")
            decided = [(m, decision(s, m.value().decode(), m.delivery_count() or 1)) for m in msgs]
            for _, d in decided:
                time.sleep((s.get("per_record_ms", 0) + (s.get("hold_ms", 0) if d == "hold" else 0)) / 1000)
            processed = [m for m, d in decided if d in ("accept", "hold")]
            if sink and s.get("order", "sink_first") == "sink_first":
                _write_effects(loop, sink, processed)
            if explicit:
                _acknowledge(loop, consumer, decided)
            if sink and s.get("order") == "ack_first":
                _write_effects(loop, sink, processed)
    finally:
        consumer.close()


def _write_effects(loop: Loop, sink: Sink, msgs: list) -> None:
    loop.step("before_sink")
    sink.write([m.value().decode() for m in msgs])
    for m in msgs:
        loop.log("effect", topic=m.topic(), partition=m.partition(), offset=m.offset(), value_id=m.value().decode())
    loop.step("after_sink")


def _acknowledge(loop: Loop, consumer: ShareConsumer, decided: list) -> None:
    """Acknowledge each record as decided, then ``commit_sync`` and log each record's result (the
    result is per partition; a partition missing from it is logged as error "NO_RESULT"). Each kind
    of event is written as one history line for the whole poll."""
    topic = loop.spec["topic"]
    columns = {"partition": [m.partition() for m, _ in decided], "offset": [m.offset() for m, _ in decided],
               "value_id": [m.value().decode() for m, _ in decided], "ack_type": [_ACK[d].name for _, d in decided]}
    for m, d in decided:
        consumer.acknowledge(m, _ACK[d])
    loop.history.append_batch("acknowledged", loop.name, {"mono_ns": [time.monotonic_ns()] * len(decided), **columns},
                              topic=topic)
    loop.step("after_acknowledge")
    loop.step("before_commit")
    try:
        committed = loop.call("commit_sync", consumer.commit_sync)
        results = {tp.partition: (exc.args[0].name() if exc else None) for tp, exc in committed.items()}
    except KafkaException as exc:
        results = {m.partition(): exc.args[0].name() for m, _ in decided}
    loop.history.append_batch("ack_committed", loop.name, {
        "mono_ns": [time.monotonic_ns()] * len(decided), **columns,
        "error": [results.get(m.partition(), "NO_RESULT") for m, _ in decided]}, topic=topic, definite=True)
    loop.step("after_commit")
