"""Notebook 04, an exactly-once pipeline on Spark Structured Streaming: its opening question (:data:`QUESTION`,
answered by :func:`replay_outcome` from parts 2 and 4); the same query with Spark's
at-least-once Kafka sink (A) and with a transactional ``foreachBatch`` sink (B), its driver crashed at
chosen points of micro-batches and restarted from its checkpoint, on ``local[2]`` or a standalone cluster;
and the query in Spark's real-time mode (SPARK-53736, :mod:`labkit.spark.roles.spark_realtime`), crashed at the
same points.

Spark keeps its source offsets in its checkpoint (``offsets/N`` before a micro-batch, ``commits/N`` after its sink:
Spark's ``MicroBatchExecution``), not in Kafka, so KIP-447's ``send_offsets_to_transaction`` does not apply (seed 000
section 1.2 says the same of Flink); seed 002: read-process-write. Sink A's duplicates come from a replayed
micro-batch, not from Kafka retries: Spark's writer (``KafkaWriteTask``/``KafkaDataWriter``) uses a plain, idempotent
by default (KIP-679) producer and no transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from confluent_kafka import ConsumerGroupTopicPartitions

from labkit.broker.probe import admin
from labkit.core.errors import LabkitError
from labkit.core.history import value_id
from labkit.crashlab.check import CheckResult
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import Participant
from labkit.crashlab.timeline import LiveTimeline
from labkit.kafka.records import produce
from labkit.learn.exercise import CheckError, Verdict, marked, unanswered
from labkit.learn.predictions import Question
from labkit.spark.roles.spark_pipeline import SINKS, end_offsets
from labkit.spark.timeline import BatchRow, batch_rows, spark_timeline_figure

#: The lesson's names of the sinks: A, Spark's Kafka writer; B, one Kafka transaction per micro-batch.
SINK_NAMES = {"A": "kafka", "B": "transactional"}


#: The notebook's opening question: copies of a micro-batch's output after a crash between the sink and
#: ``commits/N``, with each sink (answered by part 2's batch 2 and part 4's batch 2).
QUESTION = Question(
    "04", "the driver dies after a micro-batch's output is in the output topic, before Spark has recorded the batch "
          "as done (commits/N). After the restart, how many copies of that output does a read_committed reader find, "
          "with Spark's own Kafka sink and with a sink that writes each micro-batch, with a marker naming the batch, in "
          "one Kafka transaction?",
    {"two_one": "Two with Spark's Kafka sink, one with the transactional sink",
     "one_one": "One with either: Spark's checkpoint makes it exactly-once",
     "two_two": "Two with either: the replay writes the batch again"},
    {"one_one": "Spark's checkpoint has offsets/N but no commits/N for the batch, so the restart replays it with the "
                "same offsets (MicroBatchExecution); Spark's Kafka sink keeps no record of what it wrote and writes "
                "it all again (its producer is idempotent only within one producer session).",
     "two_two": "The transactional sink commits a marker of the batch in the same Kafka transaction as its outputs; "
                "the replay finds the marker committed and skips the batch, writing nothing."})


def replay_outcome(spark_sink: BatchRow, transactional_sink: BatchRow) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from the micro-batch whose driver died after its output was
    in the topic, for each sink (:meth:`PipelineRun.batches`' rows: part 2's ``after_produce`` batch of sink A, part
    4's ``after_commit`` batch of sink B): "two" for a sink where every input of the batch has two copies of its
    output, "one" where every input has one; any other mix (an input with no output, some outputs twice and some
    once or three times) fits no choice.

    Raises:
        LabkitError: a row fits no choice (the lab's failure, named).
    """
    def copies(row: BatchRow) -> str:
        return {1: "one", 2: "two"}.get(next(iter(row.copies)), "some") if len(row.copies) == 1 else "some"

    outcome = f"{copies(spark_sink)}_{copies(transactional_sink)}"
    if outcome not in QUESTION.choices:
        raise LabkitError(f"the run fits no choice: {outcome} (Spark's Kafka sink, then the transactional sink), "
                          f"inputs by copies of their output: batch {spark_sink.batch_id} {dict(spark_sink.copies)}, "
                          f"batch {transactional_sink.batch_id} {dict(transactional_sink.copies)}")
    return outcome


@dataclass
class PipelineRun:
    """One pipeline experiment: its topics, checkpoint and participant; after :meth:`finish`, its check.

    Attributes:
        experiment: the :class:`~labkit.crashlab.experiment.Experiment` (history, topics).
        pipeline: the ``spark_pipeline`` (or, in real-time mode, ``spark_realtime``)
            :class:`~labkit.crashlab.participant.Participant`: the driver.
        sink: "A" or "B". input_topic, output_topic, marker_topic: topic names (no marker topic in real-time
            mode). checkpoint: Spark's checkpoint folder.
        records: input records written. realtime: the query runs in real-time mode (sink A only).
        result: the checker's verdict, after :meth:`finish`.
    """

    experiment: Experiment
    pipeline: Participant
    sink: str
    input_topic: str
    output_topic: str
    marker_topic: str | None
    checkpoint: Path
    records: int
    realtime: bool = False
    result: CheckResult | None = field(default=None, repr=False)

    def run_to_end(self, crash_plan: list[tuple[str, int]] = (), timeout_s: float = 300.0) -> "PipelineRun":
        """Start the driver and let it process every input; for each ``(crash point, batch id)`` of
        ``crash_plan`` in turn, the driver crashes there (a SIGKILL of its process group) and is restarted
        from its checkpoint with the next point. Returns self, once the driver finished (idle).

        Raises:
            ValueError: a crash point that the sink does not have (the message lists them).
            TimeoutError: a driver still running after ``timeout_s`` seconds.
            RuntimeError: the driver exited otherwise than planned (its stderr log is named).
        """
        for step, batch in crash_plan:
            if step not in SINKS[SINK_NAMES[self.sink]]:
                raise ValueError(f"{step!r} is not a crash point of sink {self.sink}; its points are "
                                 f"{', '.join(SINKS[SINK_NAMES[self.sink]])}")
        for step, batch in [*crash_plan, (None, None)]:
            self.pipeline.spec.update(crash_at=step, crash_iteration=batch)
            self.pipeline.start()
            status = self.pipeline.wait(timeout_s)
            expected = "crashed" if step else "finished"
            if status != expected:
                raise RuntimeError(f"the driver {status}, expected {expected} (crash plan {step} at batch {batch}); "
                                   f"see {self.pipeline.stderr_log}")
        return self

    @property
    def crashes(self) -> int:
        """The driver's crashes so far, planned or not (a crash point, the panel's button, ``pipeline.crash()``),
        from the history."""
        return sum(e.kind == "crash" and e.participant == self.pipeline.name for e in self.experiment.history.events())

    def finish(self) -> CheckResult:
        """Record the final reads (read_committed and read_uncommitted) of the input and output topics and
        check the history: ``duplicate`` counts each output read more than once (once, however many copies);
        ``unprocessed`` an input with no output; ``lost write`` a committed output that vanished."""
        self.experiment.final_reads(self.input_topic, self.output_topic)
        self.result = self.experiment.check(self.output_topic, input_topic=self.input_topic)
        return self.result

    def batches(self) -> list[BatchRow]:
        """The micro-batches as the history tells them (:func:`~labkit.spark.timeline.batch_rows`)."""
        return batch_rows(self.experiment.history.events(), self.input_topic, self.output_topic)

    def crashed_batch(self, point: str) -> BatchRow:
        """The micro-batch whose only driver crash was at crash point ``point`` (e.g. "after_produce").

        Raises:
            LabkitError: no batch, or more than one, was crashed at ``point`` alone (the crash points each batch
                saw are named).
        """
        rows = self.batches()
        found = [r for r in rows if [p for _, p in r.crashes] == [point]]
        if len(found) != 1:
            seen = {r.batch_id: [p for _, p in r.crashes] for r in rows if r.crashes}
            raise LabkitError(f"{self.label}: {len(found)} micro-batches were crashed at {point!r} alone, not one; "
                              f"the crashes by batch: {seen or 'none'}")
        return found[0]

    def batch_table(self) -> pd.DataFrame:
        """One row per micro-batch: sink runs and their outcomes, inputs, inputs with an output (``once``: read once
        or more), extra copies, inputs with none (``missing``)."""
        return pd.DataFrame([{"batch": r.batch_id, "sink runs": " → ".join(o for _, _, o in r.runs),
                              "inputs": r.inputs, "once": r.once, "extra copies": r.extra, "missing": r.missing}
                             for r in self.batches()])

    def live(self, interval_s: float = 1.0) -> LiveTimeline:
        """A :class:`~labkit.crashlab.timeline.LiveTimeline` of the micro-batches, redrawn every ``interval_s``
        seconds while the pipeline runs (``.start()`` returns the widget to display, ``.stop()`` ends it)."""
        return LiveTimeline(self.experiment.history, interval_s, title=f"{self.label}, live",
                            draw=partial(spark_timeline_figure, input_topic=self.input_topic,
                                         output_topic=self.output_topic))

    @property
    def label(self) -> str:
        """What runs: "sink A", "sink B" or "real-time mode, Spark's Kafka sink"."""
        return "real-time mode, Spark's Kafka sink" if self.realtime else f"sink {self.sink}"

    def figure(self, title: str | None = None) -> go.Figure:
        """The micro-batch timeline (:func:`~labkit.spark.timeline.spark_timeline_figure`)."""
        what = {"A": "sink A, Spark's Kafka writer (at-least-once)", "B": "sink B, one transaction per micro-batch",
                "real-time": "real-time mode, Spark's Kafka sink (at-least-once)"}["real-time" if self.realtime else self.sink]
        return spark_timeline_figure(self.experiment.history.events(), self.input_topic, self.output_topic,
                                     title=title or f"{what}: {self.crashes} driver crash(es)")


def _input(bootstrap: str, name: str, records: int, partitions: int) -> tuple[Experiment, str, str, int]:
    """A new experiment with an input topic holding ``records`` records ("source-1", ...; spread evenly over
    ``partitions`` partitions) and an output topic: (experiment, input topic, output topic, records written)."""
    exp = Experiment(name, bootstrap)
    src, out = exp.topic("input", partitions), exp.topic("output", partitions)
    per = records // partitions
    for p in range(partitions):
        produce(bootstrap, src, [value_id("source", p * per + i) for i in range(1, per + 1)], partition=p)
    return exp, src, out, per * partitions


def _checkpoint(exp: Experiment) -> Path:
    return exp.history.path.with_name(f"{exp.history.path.stem}.checkpoint")


def pipeline(bootstrap: str, sink: str, *, records: int = 600, partitions: int = 2, max_offsets: int = 200,
             master: str | None = None, idle_ms: int = 2000) -> PipelineRun:
    """Make a pipeline experiment: an input topic holding ``records`` records ("source-1", ...; spread
    evenly over ``partitions`` partitions), an output topic, a compacted marker topic, and the driver
    participant (not started).

    Args:
        bootstrap: broker address "host:port".
        sink: "A" (Spark's Kafka writer) or "B" (transactional ``foreachBatch``).
        records: input records; max_offsets: input records per micro-batch (``maxOffsetsPerTrigger``).
        master: Spark master URL; default ``local[2]`` or ``SPARK_MASTER``.
        idle_ms: the driver stops once it has read the whole input topic, finished its last micro-batch and
            seen no new input for this long, in ms.
    Raises:
        ValueError: ``sink`` is neither "A" nor "B".
    """
    if sink not in SINK_NAMES:
        raise ValueError(f"unknown sink {sink!r}; the sinks are A (Spark's Kafka writer) and B (transactional)")
    exp, src, out, written = _input(bootstrap, f"spark-{sink}", records, partitions)
    markers = exp.topic("markers", 1, config={"cleanup.policy": "compact"})
    checkpoint = _checkpoint(exp)
    driver = exp.participant("driver", "spark_pipeline", topic=src, output_topic=out, marker_topic=markers,
                             sink=SINK_NAMES[sink], checkpoint=str(checkpoint), max_offsets=max_offsets,
                             idle_ms=idle_ms, **({"master": master} if master else {}))
    return PipelineRun(exp, driver, sink, src, out, markers, checkpoint, written)


def realtime_pipeline(bootstrap: str, *, records: int = 800, partitions: int = 2, trigger_ms: int = 30_000,
                      master: str | None = None, idle_ms: int = 2000) -> PipelineRun:
    """Make the same pipeline in Spark's real-time mode (``trigger(realTime=...)``, Spark 4.1+, SPARK-53736) with
    Spark's Kafka sink, the one sink of the lab that real-time mode runs (:mod:`labkit.spark.roles.spark_realtime`):
    input and output topics as :func:`pipeline`'s, and the driver participant (not started). Its crash points
    are sink A's (``SINKS["kafka"]``), in the batch the driver starts with.

    Args:
        bootstrap, records, partitions, master, idle_ms: as for :func:`pipeline`.
        trigger_ms: the batch duration (Spark checkpoints at each batch's end), at least 5 000 ms. The batch's tasks
            read until the driver's planning time plus this (``RealTimeStreamScanExec``), so on a busy machine whose
            tasks start seconds late (a restarted driver's, more than 10 s on a slow machine running the test suite)
            a short batch ends before it has read the whole input: 30 s by default. A driver whose planned crash
            point never came because its batch ended early fails saying so.
    Raises:
        ValueError: ``trigger_ms`` below Spark's minimum (``spark.sql.streaming.realTimeMode.minBatchDuration``).
    """
    exp, src, out, written = _input(bootstrap, "spark-realtime", records, partitions)
    checkpoint = _checkpoint(exp)
    driver = exp.participant("driver", "spark_realtime", topic=src, output_topic=out, checkpoint=str(checkpoint),
                             trigger_ms=trigger_ms, idle_ms=idle_ms, **({"master": master} if master else {}))
    return PipelineRun(exp, driver, "A", src, out, None, checkpoint, written, realtime=True)


def where_offsets_live(run: PipelineRun) -> pd.DataFrame:
    """Where the pipeline's input offsets are kept: one row per ``offsets/N`` and ``commits/N`` file of
    Spark's checkpoint (end offsets per partition), and the consumer groups' committed offsets that Kafka
    holds for the input topic (Spark's Kafka source never commits any: it reads with a generated
    ``spark-kafka-source-*`` group and its own offsets)."""
    rows = []
    for f in sorted((run.checkpoint / "offsets").glob("[0-9]*"), key=lambda f: int(f.name)):
        ends = end_offsets(f, run.input_topic)
        done = (run.checkpoint / "commits" / f.name).exists()
        rows.append({"where": "Spark checkpoint", "file": f"offsets/{f.name}" + (f" + commits/{f.name}" if done else ""),
                     **{f"partition {p}": o for p, o in sorted(ends.items())}})
    client = admin(run.experiment.bootstrap)
    groups = [g.group_id for g in client.list_consumer_groups().result(15).valid]
    for gid in groups:
        committed = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)])[gid].result(15)
        parts = {f"partition {tp.partition}": tp.offset for tp in committed.topic_partitions
                 if tp.topic == run.input_topic and tp.offset >= 0}
        if parts:
            rows.append({"where": "Kafka (__consumer_offsets)", "file": f"group {gid}", **parts})
    if not any(r["where"].startswith("Kafka") for r in rows):
        rows.append({"where": "Kafka (__consumer_offsets)", "file": "no group has committed offsets of the input topic"})
    return pd.DataFrame(rows)


@marked
def check_skip_point(answer: object, rows: list[BatchRow]) -> Verdict:
    """Notebook 04's exercise: ``answer`` names sink B's crash point (``SINKS["transactional"]``) after which the
    restarted driver *skipped* the replayed micro-batch. Checked against the run's rows (``run.batches()``):
    the crash points of the batches whose replay was skipped.

    Raises:
        CheckError: no replay was skipped in ``rows`` (the run did not show what the question is about).
    """
    points = SINKS["transactional"]
    if (v := unanswered(answer, f"one of {', '.join(map(repr, points))}")):
        return v
    if answer not in points:
        return Verdict("wrong", f"The answer is one of {', '.join(map(repr, points))}.")
    skipped = {step: r.batch_id for r in rows if any(o == "skipped" for _, _, o in r.runs) for _, step in r.crashes}
    if not skipped:  # the run the notebook made crashes after the Kafka commit: the lab's failure, not the answer's
        raise CheckError("No replay was skipped in this run, so no answer can be judged against it: run sink B with a "
                         "crash after its Kafka commit (part 4's run_to_end).")
    if answer in skipped:
        n = skipped[answer]
        return Verdict("right", f"Batch {n}: the driver died after the batch's Kafka transaction committed "
                                f"(outputs and marker together) and before Spark wrote commits/{n}. Spark replayed "
                                f"batch {n}; the sink found its marker committed and wrote nothing.")
    return Verdict("wrong", "A replay is skipped only when the batch's marker, committed in the same Kafka transaction "
                            "as its outputs, is already there. Which crash point comes after the Kafka commit but "
                            "before Spark's commits/N?")
