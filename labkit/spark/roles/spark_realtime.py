"""The real-time mode pipeline participant: the query of :mod:`labkit.spark.roles.spark_pipeline` (Spark's Kafka
source at read_committed, ``v`` becomes ``v>stage``) run with Spark 4.1's real-time trigger (SPARK-53736;
``DataStreamWriter.trigger(realTime=...)``) into Spark's Kafka sink (``writeStream.format("kafka")``), crashed on
purpose inside a batch.

What Spark's Real-time Mode guide (``docs/streaming/real-time-mode.md``) says, and the lab checks: one long-running
task per input partition reads and writes each record as it arrives, for a batch of ``trigger_ms``; Spark writes
``offsets/N`` and ``commits/N`` only at the batch's *end*, after the batch's records are in the sink. A crash
inside a batch therefore replays the whole batch from the previous ``offsets/N``: processing is exactly-once (each
input belongs to one committed batch), the Kafka sink's delivery at-least-once (its records are written again).

Only Spark's Kafka sink: the guide's sinks are Kafka, ``foreach``, console and memory; ``foreachBatch``, which sink B of
the micro-batch pipeline is, fails to start with ``STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST``
(``RealTimeModeAllowlist``). No ``maxOffsetsPerTrigger`` either (``KafkaMicroBatchStream``: "maxOffsetsPerTrigger is not
compatible with real time mode"): a batch reads what arrives within ``trigger_ms``.

Crash points, in the batch the driver starts with (its id is the last ``commits/N`` + 1; with the input already in
the topic, it reads all of it), watched from the driver since the sink runs in Spark's tasks: ``before_produce``
(the query started, none of the batch's outputs in the log), ``mid_produce`` (the batch's first output is in the
log; Spark may have written all of them by the time the driver dies), ``after_produce`` (one output per input of the
batch is in the log; ``offsets/N`` and ``commits/N`` not written yet). A crash SIGKILLs the driver's process group.

Options: :data:`ROLE`'s.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import KafkaException

from labkit.crashlab.loop import Loop, end_with
from labkit.crashlab.registry import REQUIRED, Option, Role
from labkit.kafka.records import high_watermarks
from labkit.spark.roles.spark_pipeline import (SINKS, CheckpointWatcher, end_offsets, kafka_source, last_batch,
                                               run_until_idle)
from labkit.core.waiting import Deadline

#: ``spark.sql.streaming.realTimeMode.minBatchDuration``'s default: a shorter real-time trigger fails to start.
MIN_TRIGGER_MS = 5000


def _check(options: dict, crash_at: str | None) -> None:
    """The trigger must be at least :data:`MIN_TRIGGER_MS` (Spark refuses a shorter one at start with
    ``INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL``)."""
    if options.get("trigger_ms", MIN_TRIGGER_MS) < MIN_TRIGGER_MS:
        raise ValueError(f"a real-time trigger of {options['trigger_ms']} ms is shorter than Spark's minimum, "
                         f"{MIN_TRIGGER_MS} ms (spark.sql.streaming.realTimeMode.minBatchDuration): use "
                         f"trigger_ms >= {MIN_TRIGGER_MS}")


def _total(counts: dict[int, int]) -> int:
    return sum(counts.values())


class BatchWatcher(threading.Thread):
    """Passes the crash points of the batch the driver starts with, from outside Spark: it polls the output
    topic's high watermarks every 5 ms and logs ``batch_written`` once the batch's outputs are all in the log
    (one per input from the last committed ``offsets/N`` to the input's high watermarks: a topic without
    transactions, so read_committed reads up to them).

    Args:
        loop: the participant's loop (its spec's topics; its ``iteration`` becomes the batch id).
        checkpoint: the query's checkpoint folder.
        timeout_s: the watcher gives up after this long, in seconds, without a new output of the batch (counted
            from its start, then from each new output, so a slow machine's late tasks do not use it up; the driver
            then finishes without its planned crash, which ``PipelineRun.run_to_end`` reports).

    ``short`` is set to why, if Spark ended the batch (wrote its ``offsets/N``) before the batch's outputs were all in
    the log while its planned crash point had not come: its tasks started too late to read the whole input within
    ``trigger_ms``; the driver then fails saying so (:func:`run`) instead of crashing in the next batch.
    """

    def __init__(self, loop: Loop, checkpoint: Path, timeout_s: float = 300.0) -> None:
        super().__init__(daemon=True)
        s = loop.spec
        self.loop, self.timeout_s = loop, timeout_s
        done = last_batch(checkpoint, "commits")  # the replay starts where that batch ended
        self.batch = done + 1
        start = end_offsets(checkpoint / "offsets" / str(done), s["topic"]) if done >= 0 else {}
        self.inputs = sum(hw - start.get(p, 0) for p, hw in high_watermarks(s["bootstrap"], s["topic"]).items())
        self.outputs_before = _total(high_watermarks(s["bootstrap"], s["output_topic"]))
        self.checkpoint, self.start_offsets, self.short = checkpoint, start, ""
        loop.iteration = self.batch

    def written(self) -> int:
        """Outputs written since the driver started."""
        return _total(high_watermarks(self.loop.spec["bootstrap"], self.loop.spec["output_topic"])) - self.outputs_before

    def read_by_spark(self) -> int | None:
        """The inputs Spark's batch read, once it has ended the batch (its ``offsets/N`` is complete), else None."""
        if last_batch(self.checkpoint, "offsets") < self.batch:
            return None
        try:
            ends = end_offsets(self.checkpoint / "offsets" / str(self.batch), self.loop.spec["topic"])
        except ValueError:  # Spark still writing it
            return None
        return sum(o - self.start_offsets.get(p, 0) for p, o in ends.items())

    def run(self) -> None:
        loop, first, deadline, seen = self.loop, False, Deadline(self.timeout_s), 0
        while not deadline.expired() and not loop.stopping:
            try:
                n = self.written()
            except KafkaException:  # broker away: look again
                n = 0
            if n > seen:  # progress: the wait starts again
                seen, deadline = n, Deadline(self.timeout_s)
            if n and not first:
                first = True
                loop.step("mid_produce")
            if n >= self.inputs:
                loop.log("batch_written", batch_id=self.batch, topic=loop.spec["output_topic"])
                loop.step("after_produce")
                return
            if loop.crashes_at(loop.spec.get("crash_at") or "") and (read := self.read_by_spark()) is not None:
                self.short = (f"Spark ended real-time batch {self.batch} (offsets/{self.batch}: {read} of its "
                              f"{self.inputs} inputs read) before its outputs were all in the log: its tasks started "
                              f"too late for trigger_ms={loop.spec['trigger_ms']}, so the batch's "
                              f"{loop.spec['crash_at']} crash point never came; use a longer trigger_ms")
                return
            time.sleep(0.005)


def run(loop: Loop) -> None:
    """The participant's loop: start the real-time query, pass the crash points of its first batch, let it run
    until ``idle_ms`` passes caught up with the input (or SIGTERM)."""
    from labkit.spark import spark_session

    s = loop.spec
    checkpoint = Path(s["checkpoint"])
    spark = spark_session(s["master"], app_name=f"labkit-{loop.name}")
    out = kafka_source(spark, s).select("key", "value", "partition")
    batch = BatchWatcher(loop, checkpoint)
    query = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", s["bootstrap"])
             .option("topic", s["output_topic"]).option("checkpointLocation", str(checkpoint))
             .outputMode("update").trigger(realTime=f"{s['trigger_ms']} milliseconds").start())
    if batch.inputs:  # a restart with nothing left to read has no batch to crash in
        loop.log("batch_start", batch_id=batch.batch)
        loop.step("before_produce")
        batch.start()
    watcher = CheckpointWatcher(loop, checkpoint, s["topic"])
    watcher.start()
    try:
        run_until_idle(loop, query, checkpoint)
    finally:
        watcher.scan()
        spark.stop()
    if batch.short:
        end_with(loop, batch.short, batch_id=batch.batch)


ROLE = Role(
    name="spark_realtime",
    steps=SINKS["kafka"],
    options={
        "output_topic": Option(REQUIRED, str, "where the outputs go"),
        "checkpoint": Option(REQUIRED, str, "the query's checkpoint folder (checkpointLocation)"),
        "master": Option(None, (str, type(None)), "the Spark master (default labkit.spark.spark_master())"),
        "trigger_ms": Option(MIN_TRIGGER_MS, int, "the real-time trigger's batch duration (ms), at least 5 000"),
        "idle_ms": Option(15_000, int, "stop after this long caught up with the input topic (ms)"),
        "stage": Option("out", str, "the output's suffix: input 'v' gives output 'v>stage'"),
    },
    run=run, check=_check,
    counters=(("batches", "batch_start"), ("batches_done", "batch_committed")))
