"""The Spark pipeline participant: a Structured Streaming query (PySpark) that reads a Kafka topic at
read_committed, applies a stateless transform (value ``v`` becomes ``v>out``, same key and partition) and
writes a Kafka topic, with one of two sinks, crashed on purpose inside a micro-batch.

Spark keeps the source offsets in its own checkpoint, not in Kafka (seed 000, section 1.2): it writes
``offsets/N`` before micro-batch N runs and ``commits/N`` after the sink returns; a restarted query re-runs
batch N with the same batch id and the same offsets when ``commits/N`` is missing. So the sink decides:

* ``sink="kafka"`` (A): Spark's own Kafka writer (``DataFrame.write.format("kafka")``, the KafkaWriter the
  streaming sink ``writeStream.format("kafka")`` runs too), called from ``foreachBatch`` so the lab can
  crash at exact points. At-least-once (Spark's docs; SPARK-28908 was never merged): a replayed batch
  writes its records again.
* ``sink="transactional"`` (B): ``foreachBatch`` with a transactional producer whose ``transactional.id``
  is stable for the query (``labkit-spark-<query id>``), so ``init_transactions`` on restart fences the
  crashed driver and aborts its open transaction (KIP-98). Each batch's records and a marker (key: the
  query id, value: the batch id, on a compacted topic) go into one transaction; a batch whose marker is
  committed is skipped. The batch is collected to the driver (fine for the lab's micro-batches of a few
  hundred records).

Crash points (``crash_at``; ``crash_iteration`` is the batch id): ``before_produce`` (``offsets/N`` written,
nothing produced), ``mid_produce`` (A: as soon as the batch's first output is in the log, which Spark's writer
may have finished by then; B: half the batch produced and acked, in the open transaction), ``after_produce``
(A: the writer returned, ``commits/N`` not written), ``before_commit`` and ``after_commit`` (B: around
``commit_transaction``; after it, ``commits/N`` is not written yet). A crash SIGKILLs the driver's process
group, its JVM included (the JVM alone outlives a killed Python driver by 1 to 4 s, long enough for a sink in
the JVM to finish the batch).

Options: :data:`ROLE`'s.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer

from labkit.core.waiting import wait_until
from labkit.crashlab.loop import Fenced, Loop
from labkit.crashlab.registry import REQUIRED, Option, Role
from labkit.kafka.records import high_watermarks, read_topic

SINKS = {"kafka": ("before_produce", "mid_produce", "after_produce"),
         "transactional": ("before_produce", "mid_produce", "before_commit", "after_commit")}


def _check(options: dict, crash_at: str | None) -> None:
    """Sink B needs a ``marker_topic``; ``crash_at`` must be a crash point of the chosen sink (:data:`SINKS`)."""
    sink = options.get("sink", "kafka")
    if sink == "transactional" and not options.get("marker_topic"):
        raise ValueError("sink 'transactional' needs marker_topic (a compacted topic for the batch markers)")
    if crash_at is not None and crash_at not in SINKS[sink]:
        raise ValueError(f"{crash_at!r} is not a crash point of sink {sink!r}; its points are {', '.join(SINKS[sink])}")


def _mono_of(path: Path) -> int:
    """``time.monotonic_ns()`` at the moment ``path`` was last modified (its mtime, moved to the monotonic clock)."""
    return time.monotonic_ns() - (time.time_ns() - path.stat().st_mtime_ns)


class CheckpointWatcher(threading.Thread):
    """Logs ``batch_offsets`` and ``batch_committed`` as Spark writes ``offsets/N`` and ``commits/N`` (polled
    every 50 ms, timed by the files' mtimes); files logged by an earlier run of the participant are skipped.
    A scan runs under a lock: the driver's last scan, once the query stopped, meets the thread's, and each must
    find the files the other logged in ``seen`` (else both log them)."""

    def __init__(self, loop: Loop, checkpoint: Path, topic: str) -> None:
        super().__init__(daemon=True)
        self.loop, self.root, self.topic = loop, checkpoint, topic
        done = [(e.kind, e.batch_id) for e in loop.history.events() if e.participant == loop.name and e.batch_id is not None]
        self.seen = {(k, b) for k, b in done if k in ("batch_offsets", "batch_committed")}
        self._scanning = threading.Lock()

    def run(self) -> None:
        while True:
            self.scan()
            time.sleep(0.05)

    def scan(self) -> None:
        """Log what is new in ``offsets/`` and ``commits/`` (under the lock)."""
        with self._scanning:
            for kind, sub in (("batch_offsets", "offsets"), ("batch_committed", "commits")):
                self._scan(kind, self.root / sub)

    def _scan(self, kind: str, folder: Path) -> None:
        """Log the files of ``folder`` not in ``seen`` as events of ``kind`` (the caller holds the lock)."""
        ids = sorted(int(f.name) for f in folder.glob("[0-9]*")) if folder.exists() else []
        for n in ids:
            if (kind, n) in self.seen:
                continue
            path = folder / str(n)
            try:
                mono = _mono_of(path)
                if kind == "batch_committed":
                    self.loop.history.append_batch(kind, self.loop.name, {"mono_ns": [mono]}, batch_id=n)
                else:
                    self._log_offsets(n, path, mono)
            except (OSError, ValueError):
                continue  # being written: next scan
            self.seen.add((kind, n))

    def _log_offsets(self, n: int, path: Path, mono: int) -> None:
        ends = end_offsets(path, self.topic)
        starts = end_offsets(path.with_name(str(n - 1)), self.topic) if n else {}
        parts = sorted(ends)
        self.loop.history.append_batch("batch_offsets", self.loop.name, {
            "mono_ns": [mono] * len(parts), "partition": parts, "offset": [starts.get(p, 0) for p in parts],
            "last_offset": [ends[p] - 1 for p in parts]}, batch_id=n, topic=self.topic)


def end_offsets(path: Path, topic: str) -> dict[int, int]:
    """The end offsets (exclusive) of ``topic`` in a Spark checkpoint's ``offsets/N`` file: ``{partition: offset}``.

    Raises:
        OSError: no such file. ValueError: not a complete offsets file (Spark's format: ``v1``, the batch
            metadata, then one JSON line per source).
    """
    lines = path.read_text().splitlines()
    if len(lines) < 3 or lines[0] != "v1":
        raise ValueError(f"{path} is not a complete Spark offsets file")
    for line in lines[2:]:
        source = json.loads(line)
        if topic in source:
            return {int(p): int(o) for p, o in source[topic].items()}
    raise ValueError(f"{path} has no offsets of topic {topic!r}")


def last_batch(checkpoint: Path, sub: str) -> int:
    """The highest batch id in the checkpoint's ``sub`` folder ("offsets" or "commits"), or -1."""
    return max((int(f.name) for f in (checkpoint / sub).glob("[0-9]*")), default=-1)


def in_flight(checkpoint: Path) -> bool:
    """Whether a micro-batch is planned and not done: an ``offsets/N`` without its ``commits/N``."""
    return last_batch(checkpoint, "offsets") > last_batch(checkpoint, "commits")


def caught_up(checkpoint: Path, bootstrap: str, topic: str) -> bool:
    """Whether the query is done with everything in ``topic`` so far: no micro-batch in flight, and the last
    ``offsets/N`` reaches the high watermark of every partition (a topic without transactions: no control
    records, so Spark's read_committed end offsets reach the high watermark)."""
    if in_flight(checkpoint):
        return False
    n = last_batch(checkpoint, "offsets")
    ends = end_offsets(checkpoint / "offsets" / str(n), topic) if n >= 0 else {}
    return all(ends.get(p, 0) >= hw for p, hw in high_watermarks(bootstrap, topic).items())


def _caught_up_now(checkpoint: Path, bootstrap: str, topic: str) -> bool:
    try:
        return caught_up(checkpoint, bootstrap, topic)
    except (KafkaException, OSError, ValueError):  # broker away, or Spark writing offsets/N: not done
        return False


def committed_batch(bootstrap: str, marker_topic: str, qid: str) -> int:
    """The highest batch id whose marker for query ``qid`` is committed in ``marker_topic`` (read at
    read_committed to its end), or -1."""
    read = read_topic(bootstrap, marker_topic, "read_committed", 30)
    ids = [int(v) for k, v in zip(read.key, read.value) if k == qid]
    return max(ids, default=-1)


class KafkaSink:
    """Sink A: Spark's Kafka writer, at-least-once."""

    def __init__(self, loop: Loop) -> None:
        self.loop = loop

    def __call__(self, batch, batch_id: int) -> None:
        loop, s = self.loop, self.loop.spec
        loop.step("before_produce")
        if loop.crashes_at("mid_produce"):
            self._crash_on_first_output()
        batch.select("key", "value", "partition").write.format("kafka") \
            .option("kafka.bootstrap.servers", s["bootstrap"]).option("topic", s["output_topic"]).save()
        loop.log("batch_written", batch_id=batch_id, topic=s["output_topic"])
        loop.step("after_produce")

    def _crash_on_first_output(self) -> None:
        bootstrap, topic = self.loop.spec["bootstrap"], self.loop.spec["output_topic"]
        before = sum(high_watermarks(bootstrap, topic).values())

        def watch() -> None:  # gives up after 60 s: a batch that writes nothing is not crashed
            if wait_until(lambda: sum(high_watermarks(bootstrap, topic).values()) != before, 60, 0.005):
                self.loop.step("mid_produce")

        threading.Thread(target=watch, daemon=True).start()


class TransactionalSink:
    """Sink B: one Kafka transaction per micro-batch, its records plus the batch's marker; idempotent on replay."""

    def __init__(self, loop: Loop, qid: str) -> None:
        self.loop, self.qid, s = loop, qid, loop.spec
        self.transactional_id = f"labkit-spark-{qid}"
        self.producer = Producer(loop.client_config(**{"transactional.id": self.transactional_id}))
        # fences the crashed driver's epoch and aborts its open transaction
        loop.call("init_transactions", self.producer.init_transactions)
        self.committed = committed_batch(s["bootstrap"], s["marker_topic"], qid)
        self.fenced: str | None = None

    def __call__(self, batch, batch_id: int) -> None:
        loop, s = self.loop, self.loop.spec
        if batch_id <= self.committed:
            loop.log("batch_skipped", batch_id=batch_id, topic=s["marker_topic"])
            return
        rows = batch.select("partition", "offset", "input", "value").collect()
        loop.history.append_batch("consume", loop.name, {
            "mono_ns": [time.monotonic_ns()] * len(rows), "partition": [r.partition for r in rows],
            "offset": [r.offset for r in rows], "value_id": [r.input for r in rows]},
            topic=s["topic"], isolation_level="read_committed")
        try:
            self._write(rows, batch_id)
        except Fenced as exc:
            self.fenced = str(exc)
            raise

    def _write(self, rows: list, batch_id: int) -> None:
        loop, s, producer = self.loop, self.loop.spec, self.producer
        producer.begin_transaction()
        loop.txn += 1
        loop.log("txn_begin", txn=loop.txn, transactional_id=self.transactional_id, batch_id=batch_id)
        loop.step("before_produce")
        half = len(rows) // 2
        for r in rows[:half]:
            loop.send(producer, s["output_topic"], r.partition, [r.value])
        loop.flush(producer)
        loop.step("mid_produce")
        for r in rows[half:]:
            loop.send(producer, s["output_topic"], r.partition, [r.value])
        loop.send(producer, s["marker_topic"], 0, [str(batch_id)], key=self.qid)
        loop.flush(producer)
        loop.log("batch_written", batch_id=batch_id, topic=s["output_topic"], txn=loop.txn)
        if not loop.commit(producer):
            raise RuntimeError(f"the transaction of batch {batch_id} did not commit: the query stops so the batch "
                               "is replayed on restart")
        self.committed = batch_id


def kafka_source(spark, spec: dict, **options: object):
    """The query's input and transform, shared by this role and ``spark_realtime``: the ``topic`` of ``spec`` read
    from the earliest offsets at read_committed with Spark's Kafka source (plus ``options``, e.g.
    ``maxOffsetsPerTrigger``), each value ``v`` turned into ``v>stage``. Columns: key, value, partition, offset,
    input (the input value)."""
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", spec["topic"]).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().selectExpr("CAST(key AS STRING) key",
                                    f"concat(CAST(value AS STRING), '>{spec['stage']}') value", "partition", "offset",
                                    "CAST(value AS STRING) input")


def run_until_idle(loop: Loop, query, checkpoint: Path) -> None:
    """Let ``query`` run until it has been caught up with the input topic for ``idle_ms`` (or SIGTERM, or the
    query ends), then stop it. Raises the query's ``StreamingQueryException`` if it failed."""
    s = loop.spec
    idle_s, last_busy = s["idle_ms"] / 1000, time.monotonic()
    while query.isActive and not loop.stopping:
        query.awaitTermination(0.5)
        if not _caught_up_now(checkpoint, s["bootstrap"], s["topic"]):
            last_busy = time.monotonic()
        elif time.monotonic() - last_busy > idle_s:
            break
    query.stop()
    query.awaitTermination()


def run(loop: Loop) -> None:
    """The participant's loop: start the query, let it run until ``idle_ms`` passes without input (or SIGTERM)."""
    from pyspark.errors import StreamingQueryException

    from labkit.spark import spark_session

    s = loop.spec
    checkpoint = Path(s["checkpoint"])
    spark = spark_session(s["master"], app_name=f"labkit-{loop.name}")
    out = kafka_source(spark, s, maxOffsetsPerTrigger=s["max_offsets"])
    sink_ready, state = threading.Event(), {}

    def on_batch(batch, batch_id: int) -> None:  # Spark calls it only for batches with input
        if not sink_ready.wait(60):
            raise TimeoutError("the sink was not ready within 60 s (see the participant's stderr log)")
        loop.iteration = batch_id
        loop.log("batch_start", batch_id=batch_id)
        state["sink"](batch, batch_id)

    query = out.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(checkpoint)) \
        .trigger(processingTime=f"{s['trigger_ms']} milliseconds").start()
    # query.id is Spark's id of the query, kept in the checkpoint: the same after a restart
    state["sink"] = TransactionalSink(loop, query.id) if s["sink"] == "transactional" else KafkaSink(loop)
    sink_ready.set()
    watcher = CheckpointWatcher(loop, checkpoint, s["topic"])
    watcher.start()
    try:
        run_until_idle(loop, query, checkpoint)
    except StreamingQueryException:
        if getattr(state["sink"], "fenced", None):
            raise Fenced(state["sink"].fenced) from None
        raise
    finally:
        watcher.scan()
        spark.stop()


ROLE = Role(
    name="spark_pipeline",
    steps=("before_produce", "mid_produce", "after_produce", "before_commit", "after_commit"),
    options={
        "output_topic": Option(REQUIRED, str, "where the outputs go"),
        "checkpoint": Option(REQUIRED, str, "the query's checkpoint folder (checkpointLocation)"),
        "sink": Option("kafka", str, "'kafka' (A, Spark's Kafka writer) or 'transactional' (B)", tuple(SINKS)),
        "marker_topic": Option(None, (str, type(None)), "sink B: the compacted topic of the batch markers"),
        "master": Option(None, (str, type(None)), "the Spark master (default labkit.spark.spark_master())"),
        "max_offsets": Option(200, int, "records per micro-batch at most (maxOffsetsPerTrigger)"),
        "trigger_ms": Option(500, int, "the processing-time trigger's interval (ms)"),
        "idle_ms": Option(15_000, int, "stop after this long caught up with the input topic (ms)"),
        "stage": Option("out", str, "the output's suffix: input 'v' gives output 'v>stage'"),
    },
    run=run, check=_check,
    counters=(("batches", "batch_start"), ("batches_done", "batch_committed"), ("skipped", "batch_skipped"),
              ("committed", "committed")))
