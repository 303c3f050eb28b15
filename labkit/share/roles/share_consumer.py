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
accepts the previous batch (KIP-932's implicit acknowledgement). ``max_polls`` closes the consumer right after
the work of that many polls with records, without another poll: what ``close()`` does with the last poll's records.

Steps (crash points): after_poll, before_sink, after_sink, after_acknowledge, before_commit, after_commit.

On Kafka's Java client (``client="java"``: ``jvm/participant/.../ShareConsumerRole.java``, a ``KafkaShareConsumer``)
the same loop also has ``renew_ms``: a ``hold`` record's lock is renewed every ``renew_ms`` while it is processed
(``AcknowledgeType.RENEW``, KIP-1222), which confluent-kafka 2.16.1 lacks; the sink is librdkafka's only.
"""

from __future__ import annotations

import time

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from labkit.crashlab.loop import Loop, give_up
from labkit.crashlab.registry import CLIENTS, REQUIRED, Option, Role
from labkit.share.sink import Sink

DECISIONS = ("accept", "release", "reject", "hold")
ORDERS = ("sink_first", "ack_first")
_ACK = {"accept": AcknowledgeType.ACCEPT, "hold": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
        "reject": AcknowledgeType.REJECT}


def _check(options: dict, _crash_at: str | None) -> None:
    """Each decision is one of :data:`DECISIONS`; an ``order`` needs a ``sink``."""
    decisions = list(options.get("decisions", {}).values()) + [options.get("default", "accept")]
    for d in (x for d in decisions for x in ([d] if isinstance(d, str) else d)):
        if d not in DECISIONS:
            raise ValueError(f"unknown decision {d!r}; the decisions are {', '.join(DECISIONS)}")
    if "order" in options and not options.get("sink"):
        raise ValueError("order= needs sink= (the SQLite file the effects go to)")


def decision(spec: dict, value_id: str, delivery_count: int) -> str:
    """What the consumer does with ``value_id`` on its ``delivery_count``-th delivery (1-based)."""
    d = spec["decisions"].get(value_id, spec["default"])
    return d if isinstance(d, str) else d[min(delivery_count, len(d)) - 1]


def run(loop: Loop) -> None:
    """The share consumer loop (see the module docstring and :data:`ROLE`'s options)."""
    s = loop.spec
    explicit = s["ack_mode"] == "explicit"
    consumer = ShareConsumer(loop.client_config(**{
        "group.id": s["group_id"], "client.id": loop.name,
        "share.acknowledgement.mode": "explicit" if explicit else "implicit"}))
    consumer.subscribe([s["topic"]])
    sink = Sink(s["sink"]) if s["sink"] else None
    idle_since, patience, delivered = time.monotonic(), s["first_ms"] / 1000, False
    try:
        while not loop.stopping and time.monotonic() - idle_since <= patience:
            msgs = [m for m in consumer.poll(0.5) if not m.error()]
            if not msgs:
                continue
            patience, delivered = s["idle_ms"] / 1000, True
            loop.iteration += 1
            now = time.monotonic_ns()
            loop.history.append_batch("delivered", loop.name, {
                "mono_ns": [now] * len(msgs), "partition": [m.partition() for m in msgs],
                "offset": [m.offset() for m in msgs], "value_id": [m.value().decode() for m in msgs],
                "delivery_count": [m.delivery_count() for m in msgs]}, topic=s["topic"])
            loop.step("after_poll")
            decided = [(m, decision(s, m.value().decode(), m.delivery_count() or 1)) for m in msgs]
            for _, d in decided:
                time.sleep((s["per_record_ms"] + (s["hold_ms"] if d == "hold" else 0)) / 1000)
            processed = [m for m, d in decided if d in ("accept", "hold")]
            if sink and s["order"] == "sink_first":
                _write_effects(loop, sink, processed)
            if explicit:
                _acknowledge(loop, consumer, decided)
            if sink and s["order"] == "ack_first":
                _write_effects(loop, sink, processed)
            idle_since = time.monotonic()  # idle from the end of the last poll's work: slow work is not idleness
            if s["max_polls"] and loop.iteration >= s["max_polls"]:
                break  # close right after this poll's work: no further poll (implicit mode accepts nothing more)
        if not delivered and not loop.stopping:  # ShareConsumer tells no assignment: first_ms counts from the start
            give_up(loop, f"no record of {s['topic']} was delivered within first_ms ({s['first_ms']} ms) of the start")
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


ROLE = Role(
    name="share_consumer",
    steps=("after_poll", "before_sink", "after_sink", "after_acknowledge", "before_commit", "after_commit"),
    options={
        "group_id": Option(REQUIRED, str, "the share group (group.id)"),
        "ack_mode": Option("explicit", str, "share.acknowledgement.mode (KIP-932)", ("explicit", "implicit")),
        "decisions": Option({}, dict, "{value id: decision, or a list of one per delivery, the last repeating}"),
        "default": Option("accept", (str, list), "the decision for a record not in decisions"),
        "hold_ms": Option(0, int, "how long a 'hold' record is processed (ms), e.g. past the acquisition lock"),
        "per_record_ms": Option(0, int, "processing time per record (ms)"),
        "sink": Option(None, (str, type(None)), "the SQLite file accepted records' effects go to (Sink)",
                       clients=("librdkafka",)),
        "order": Option("sink_first", str, "effect before the acknowledgement, or after its commit", ORDERS,
                        clients=("librdkafka",)),
        "renew_ms": Option(None, (int, type(None)), "while a 'hold' record is processed, renew its acquisition lock "
                           "every renew_ms (AcknowledgeType.RENEW, KIP-1222; confluent-kafka 2.16.1 has no RENEW)",
                           clients=("java",)),
        "max_polls": Option(None, (int, type(None)), "close the consumer right after the work of its max_polls-th "
                            "poll that returned records, without polling again (None: no limit)"),
        "idle_ms": Option(10_000, int, "stop after this long without records, once some came, counted from the "
                          "end of the last poll's work (ms)"),
        "first_ms": Option(30_000, int, "give up if no record came this long after the start (ms; a 'gave_up' "
                           "event says so, the status is 'gave up'): joining a share group takes a few heartbeats, "
                           "and neither client tells its share partitions (KIP-932), so it counts from the start"),
    },
    run=run, check=_check, clients=CLIENTS,
    counters=(("delivered", "delivered"), ("ack_committed", "ack_committed"), ("effects", "effect")))
