"""The real-time mode participant: its option check, and what PySpark 4.2's real-time mode refuses, on the real
thing (a local[2] session, the real broker). Its crashes are notebook 04's part 7."""

from __future__ import annotations

import subprocess
import sys

import pytest

from labkit.crashlab.registry import load

REQUIRED = {"topic": "in", "output_topic": "out", "checkpoint": "/tmp/x"}


def test_a_trigger_below_sparks_minimum_is_refused_naming_the_fix():
    role = load("spark_realtime")
    assert role.spec(REQUIRED, "after_produce")["trigger_ms"] == 5000
    with pytest.raises(ValueError, match=r"minBatchDuration\): use trigger_ms >= 5000"):
        role.spec({**REQUIRED, "trigger_ms": 1000}, None)
    with pytest.raises(ValueError, match="its steps are before_produce, mid_produce, after_produce"):
        role.spec(REQUIRED, "before_commit")


def test_real_time_mode_refuses_foreach_batch_and_max_offsets(bootstrap, tmp_path):
    """Why sink B (``foreachBatch``) has no real-time version: Spark refuses the sink when the query starts
    (RealTimeModeAllowlist); and why a real-time batch is not 200 records: the query fails on ``maxOffsetsPerTrigger``
    (KafkaMicroBatchStream). (The Kafka sink runs: notebook 04's part 7.)"""
    from labkit.kafka.records import create_topic

    topic = create_topic(bootstrap, "rtm")
    job = f"""
from labkit.spark import spark_session
s = spark_session(app_name="rtm")
def attempt(name, sink, **source):
    df = (s.readStream.format("kafka").option("kafka.bootstrap.servers", {bootstrap!r}).option("subscribe", {topic!r})
          .options(**source).load().selectExpr("CAST(value AS STRING) value"))
    w = df.writeStream.option("checkpointLocation", {str(tmp_path)!r} + "/" + name).outputMode("update")
    try:
        q = sink(w).trigger(realTime="5 seconds").start()
        if not q.awaitTermination(120):  # the source's options are checked when the first batch is planned
            q.stop()
            print(name, "ran")
    except Exception as exc:
        print(name, "refused:", str(exc).splitlines()[0])
kafka = lambda w: w.format("kafka").option("kafka.bootstrap.servers", {bootstrap!r}).option("topic", {topic!r} + "-out")
attempt("foreachBatch", lambda w: w.foreachBatch(lambda batch, n: None))
attempt("maxOffsetsPerTrigger", kafka, maxOffsetsPerTrigger="10")
"""
    done = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.split(" ")[0] in ("foreachBatch", "maxOffsetsPerTrigger")]
    assert lines[0].startswith("foreachBatch refused: [STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST]")
    assert "ForeachBatchSink is not in the sink allowlist" in lines[0]
    assert lines[1].startswith("maxOffsetsPerTrigger refused: [STREAM_FAILED]"), lines
    assert "maxOffsetsPerTrigger is not compatible with real time mode" in lines[1]


@pytest.mark.parametrize("crash_at", ["mid_produce", "after_produce"])
def test_a_batch_spark_ended_before_its_planned_crash_point_is_reported_not_crashed_later(bootstrap, tmp_path, crash_at):
    """A real-time batch ends when its ``trigger_ms`` is up, read or not: on a busy machine whose tasks start late,
    Spark wrote ``offsets/0`` after 2 of 800 inputs, and the watcher passed ``after_produce`` in batch 1 labelled batch 0.
    Here the checkpoint is the test's (no Spark): the batch ended having read 2 of 10 inputs, no output in the log
    yet. The watcher says so, naming the fix, instead of passing the crash point; with no crash planned it does not."""
    from labkit.crashlab.loop import Loop
    from labkit.kafka.records import create_topic, produce
    from labkit.spark.roles.spark_realtime import BatchWatcher

    src, out = create_topic(bootstrap, "rt-in", partitions=2), create_topic(bootstrap, "rt-out")
    produce(bootstrap, src, [f"v{n}" for n in range(10)], partition=0)
    spec = {"name": "driver", "history": str(tmp_path / "h.jsonl"), "bootstrap": bootstrap, "topic": src,
            "output_topic": out, "trigger_ms": 5000, "crash_at": crash_at, "crash_iteration": 0}
    ck = tmp_path / "ck"
    watcher = BatchWatcher(Loop(spec), ck)
    assert (watcher.batch, watcher.inputs) == (0, 10)
    (ck / "offsets").mkdir(parents=True)
    (ck / "offsets" / "0").write_text(f'v1\n{{}}\n{{"{src}": {{"0": 2, "1": 0}}}}')
    watcher.run()
    assert watcher.short.startswith("Spark ended real-time batch 0 (offsets/0: 2 of its 10 inputs read) before its "
                                    "outputs were all in the log")
    assert watcher.short.endswith(f"so the batch's {crash_at} crash point never came; use a longer trigger_ms")
    assert not any(e.kind == "crash" for e in watcher.loop.history.events())

    calm = BatchWatcher(Loop({**spec, "crash_at": None}), ck)  # the final run: no crash planned, nothing to report
    assert (calm.batch, calm.inputs) == (0, 10) and calm.read_by_spark() == 2
    calm.timeout_s = 1
    calm.run()
    assert calm.short == ""
