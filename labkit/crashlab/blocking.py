"""Transactions and read_committed consumers on the real broker: an open transaction holds back
every record after it in the partition, and ``transaction.timeout.ms`` lets the coordinator abort a
transaction whose producer stopped (KIP-98)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer

from labkit.broker.probe import KAFKA_LOG
from labkit.crashlab.experiment import Experiment
from labkit.isolation import OffsetSampler
from labkit.waiting import wait_for


def _when(exp: Experiment, participant: str, kind: str, value_id: str | None = None) -> int | None:
    """``mono_ns`` of the first such event, or ``None``."""
    return next((e.mono_ns for e in exp.history.events() if e.participant == participant and e.kind == kind
                 and (value_id is None or e.value_id == value_id)), None)


def _write(exp: Experiment, producer: Producer, name: str, topic: str, vid: str, txn: int | None = None) -> None:
    exp.history.append("send", name, topic=topic, partition=0, value_id=vid, txn=txn)
    producer.produce(topic, vid.encode(), partition=0, on_delivery=lambda err, msg: exp.history.append(
        "ack", name, topic=topic, partition=0, offset=msg.offset(), value_id=vid, txn=txn, definite=True))
    producer.flush(30)


def open_transaction_blocks(exp: Experiment, open_s: float = 3.0) -> dict:
    """A transaction stays open ``open_s`` seconds. Half a second after it opened, a
    non-transactional producer writes record ``plain-1`` to the same partition. A read_committed and
    a read_uncommitted consumer (participants) read the partition all along.

    Returns:
        ``{"topic", "samples", "marks", "write_ns", "commit_ns", "seen_ns": {level: ns}}``:
        offset samples (high watermark, LSO), and when plain-1 was written, when the transaction
        committed, and when each consumer got plain-1. Final reads are recorded.
    """
    topic = exp.topic("blocked")
    consumers = {level: exp.participant(f"consumer-{level}", "consumer", topic=topic, isolation_level=level,
                                        group_id=f"{topic}-{level}", idle_ms=int(open_s * 1000) + 8000).start()
                 for level in ("read_committed", "read_uncommitted")}
    plain = Producer({"bootstrap.servers": exp.bootstrap, "logger": KAFKA_LOG, "enable.idempotence": True})
    _write(exp, plain, "plain-producer", topic, "warm-up-1")
    for c in consumers.values():
        wait_for(lambda c=c: _when(exp, c.name, "consume", "warm-up-1"), f"{c.name} never read the first record")
    txn = Producer({"bootstrap.servers": exp.bootstrap, "logger": KAFKA_LOG,
                    "transactional.id": f"{topic}-{uuid.uuid4().hex[:6]}"})
    txn.init_transactions(30)
    with OffsetSampler(exp.bootstrap, topic) as sampler:
        txn.begin_transaction()
        exp.history.append("txn_begin", "txn-producer", txn=1)
        _write(exp, txn, "txn-producer", topic, "txn-1", txn=1)
        opened = time.monotonic()
        time.sleep(0.5)
        _write(exp, plain, "plain-producer", topic, "plain-1")
        time.sleep(max(0.0, open_s - (time.monotonic() - opened)))
        exp.history.append("txn_commit_start", "txn-producer", txn=1)
        txn.commit_transaction(30)
        exp.history.append("txn_end", "txn-producer", txn=1, outcome="committed", definite=True)
        for c in consumers.values():
            wait_for(lambda c=c: _when(exp, c.name, "consume", "plain-1"), f"{c.name} never read plain-1")
        time.sleep(0.3)
    for c in consumers.values():
        c.stop()
    exp.final_reads(topic)
    marks = {"transaction opens": _when(exp, "txn-producer", "txn_begin"),
             "plain-1 written": _when(exp, "plain-producer", "ack", "plain-1"),
             "commit": _when(exp, "txn-producer", "txn_end")}
    return {"topic": topic, "samples": sampler.samples, "marks": marks, "write_ns": marks["plain-1 written"],
            "commit_ns": marks["commit"],
            "seen_ns": {level: _when(exp, c.name, "consume", "plain-1") for level, c in consumers.items()}}


def timeout_abort(exp: Experiment, timeout_ms: int = 3000, paused_s: float = 8.0) -> dict:
    """A transactional producer participant (``transaction.timeout.ms=timeout_ms``) writes two
    records, then is paused (SIGSTOP) before it commits, for ``paused_s`` seconds. The transaction
    coordinator aborts the transaction once it times out; then the producer resumes and tries to commit.

    Returns:
        ``{"topic", "producer", "samples", "marks", "error"}``: the participant, offset samples,
        marks (label to mono_ns) and the error its commit got. Final reads are recorded.
    """
    topic = exp.topic("timeout")
    p = exp.participant("stalled-producer", "producer", topic=topic, mode="transactional",
                        transactional_id=f"{topic}-{uuid.uuid4().hex[:6]}", iterations=1, batch=2,
                        sleep_at={"before_commit": 2000}, config={"transaction.timeout.ms": timeout_ms})
    with OffsetSampler(exp.bootstrap, topic) as sampler:
        p.start()
        wait_for(lambda: p.counters()["acked"] == 2, "the producer wrote nothing")
        p.pause()
        time.sleep(paused_s)
        p.resume()
        p.wait(60)
        time.sleep(0.5)
    exp.final_reads(topic)
    events = [e for e in exp.history.events() if e.participant == p.name]
    error = next((e.error for e in events if e.error), None)
    marks = {"paused": _when(exp, p.name, "pause"), "resumed": _when(exp, p.name, "resume")}
    return {"topic": topic, "producer": p, "samples": sampler.samples, "marks": marks, "error": error}
