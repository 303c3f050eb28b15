"""The Spark pipeline participant: option checks, the checkpoint reader (and its thread beside the driver's last
scan), the markers, and a real zombie driver fenced by its replacement (two real drivers, PySpark local[2], the real
broker)."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter

import pytest

from labkit.core.history import History
from labkit.core.history import value_id
from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.loop import Loop
from labkit.crashlab.participant import Participant
from labkit.kafka.records import produce
from labkit.spark.roles.spark_pipeline import ROLE, CheckpointWatcher, caught_up, committed_batch, end_offsets, in_flight

REQUIRED = {"topic": "in", "output_topic": "out", "checkpoint": "/tmp/x"}


def offsets_file(path, ends: dict[int, int], topic: str = "in") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
    path.write_text(f"v1\n{json.dumps(meta)}\n{json.dumps({topic: {str(p): o for p, o in ends.items()}})}")


def test_the_options_are_checked_naming_the_choices():
    assert ROLE.spec({**REQUIRED, "sink": "kafka"}, "mid_produce")["max_offsets"] == 200
    with pytest.raises(ValueError, match="needs topic, output_topic, checkpoint"):
        ROLE.spec({}, None)
    with pytest.raises(ValueError, match="the choices are kafka, transactional"):
        ROLE.spec({**REQUIRED, "sink": "exactly-once"}, None)
    with pytest.raises(ValueError, match="needs marker_topic"):
        ROLE.spec({**REQUIRED, "sink": "transactional"}, None)
    with pytest.raises(ValueError, match="its points are before_produce, mid_produce, after_produce"):
        ROLE.spec({**REQUIRED, "sink": "kafka"}, "after_commit")


def test_participant_refuses_a_crash_point_of_the_other_sink(tmp_path):
    with pytest.raises(ValueError, match="not a crash point of sink 'transactional'"):
        Participant("d", "spark_pipeline", history=History(tmp_path / "h.jsonl"), bootstrap="127.0.0.1:1",
                    crash_at="after_produce", sink="transactional", marker_topic="m", **REQUIRED)


def test_end_offsets_and_in_flight(tmp_path):
    offsets_file(tmp_path / "offsets" / "0", {0: 15, 1: 12})
    assert end_offsets(tmp_path / "offsets" / "0", "in") == {0: 15, 1: 12}
    with pytest.raises(ValueError, match="no offsets of topic 'other'"):
        end_offsets(tmp_path / "offsets" / "0", "other")
    (tmp_path / "offsets" / "1").write_text("v1\n")  # Spark is writing it
    with pytest.raises(ValueError, match="not a complete Spark offsets file"):
        end_offsets(tmp_path / "offsets" / "1", "in")
    assert in_flight(tmp_path)
    (tmp_path / "commits").mkdir()
    for n in ("0", "1"):
        (tmp_path / "commits" / n).write_text("v1\n{}")
    assert not in_flight(tmp_path)


def test_watcher_logs_each_file_once_with_the_batch_ranges(tmp_path):
    history = History(tmp_path / "h.jsonl")
    loop = Loop({"name": "d", "history": str(history.path)})
    ck = tmp_path / "ck"
    offsets_file(ck / "offsets" / "0", {0: 5, 1: 3})
    offsets_file(ck / "offsets" / "1", {0: 9, 1: 3})
    (ck / "commits").mkdir()
    (ck / "commits" / "0").write_text("v1\n{}")
    watcher = CheckpointWatcher(loop, ck, "in")
    watcher.scan()
    watcher.scan()
    ranges = {(e.batch_id, e.partition, e.offset, e.last_offset) for e in history.events() if e.kind == "batch_offsets"}
    assert ranges == {(0, 0, 0, 4), (0, 1, 0, 2), (1, 0, 5, 8), (1, 1, 3, 2)}  # (1, 1): nothing new in partition 1
    assert [e.batch_id for e in history.events() if e.kind == "batch_committed"] == [0]
    # a restarted participant's watcher does not log them again
    CheckpointWatcher(Loop({"name": "d", "history": str(history.path)}), ck, "in").scan()
    assert len([e for e in history.events() if e.kind.startswith("batch")]) == 5


def test_the_drivers_last_scan_and_the_watchers_thread_log_each_file_once(tmp_path):
    """Files appear in the checkpoint as fast as the test writes them (no Spark) while the watcher's thread scans
    it, and the test scans after each batch as the driver does once its query stopped: every batch is logged once,
    the scan that met the thread's included."""
    history = History(tmp_path / "h.jsonl")
    loop = Loop({"name": "d", "history": str(history.path)})
    ck = tmp_path / "ck"
    (ck / "commits").mkdir(parents=True)
    watcher = CheckpointWatcher(loop, ck, "in")
    watcher.start()
    try:
        n, deadline = 0, time.monotonic() + 2
        while time.monotonic() < deadline and n < 300:
            offsets_file(ck / "offsets" / str(n), {0: n + 1})
            (ck / "commits" / str(n)).write_text("v1\n{}")
            watcher.scan()
            n += 1
    finally:
        shutil.rmtree(ck)  # the thread scans on, in the test process: nothing to find
    logged = Counter((e.kind, e.batch_id) for e in history.events())
    assert not [key for key, times in logged.items() if times > 1], "logged more than once"
    assert set(logged) == {(kind, b) for kind in ("batch_offsets", "batch_committed") for b in range(n)}


def test_committed_batch_reads_only_committed_markers(bootstrap):
    exp = Experiment("markers", bootstrap)
    topic = exp.topic("markers", config={"cleanup.policy": "compact"})
    assert committed_batch(bootstrap, topic, "q") == -1
    produce(bootstrap, topic, ["0", "1"], key="q", transactional_id=f"{topic}-t")
    produce(bootstrap, topic, ["2"], key="q", transactional_id=f"{topic}-t", outcome="abort")
    produce(bootstrap, topic, ["7"], key="other", transactional_id=f"{topic}-t")
    assert committed_batch(bootstrap, topic, "q") == 1


def test_a_paused_driver_is_fenced_by_its_replacement(bootstrap, tmp_path):
    """Driver 1 is paused (SIGSTOP, its JVM too) inside batch 0's transaction; driver 2 starts on the same
    checkpoint: its init_transactions fences driver 1 and aborts the open transaction, and it replays the batch.
    Driver 1, resumed, is fenced at commit_transaction and writes nothing that read_committed sees."""
    exp = Experiment("spark-zombie", bootstrap, folder=tmp_path)
    src, out = exp.topic("input", 2), exp.topic("output", 2)
    markers = exp.topic("markers", config={"cleanup.policy": "compact"})
    for p in (0, 1):
        produce(bootstrap, src, [value_id("source", p * 100 + i) for i in range(1, 101)], partition=p)
    common = dict(topic=src, output_topic=out, marker_topic=markers, sink="transactional",
                  checkpoint=str(tmp_path / "checkpoint"), max_offsets=100, idle_ms=3000)
    one = exp.participant("driver-1", "spark_pipeline", sleep_at={"before_commit": 5000}, **common).start()
    wait_for(lambda: exp.history.first("batch_written", "driver-1"), "driver 1 never wrote batch 0", 180)
    one.pause()
    two = exp.participant("driver-2", "spark_pipeline", **common).start()
    assert two.wait(240) == "finished"
    one.resume()
    assert one.wait(120) == "fenced"
    exp.final_reads(src, out)
    result = exp.check(out, src)
    assert result.ok, result.table()
    fenced = [e for e in exp.history.events() if e.kind == "fenced" and e.participant == "driver-1"]
    assert fenced and fenced[0].error in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    ends = {e.participant: e.outcome for e in exp.history.events() if e.kind == "txn_end"}
    assert ends == {"driver-2": "committed"}  # driver 1's transaction never ended by its own hand


def test_caught_up_compares_the_last_offsets_with_the_high_watermarks(bootstrap, tmp_path):
    exp = Experiment("caught-up", bootstrap, folder=tmp_path)
    topic = exp.topic("in", 2)
    produce(bootstrap, topic, ["a", "b"], partition=0)
    ck = tmp_path / "ck"
    assert not caught_up(ck, bootstrap, topic)  # nothing read yet
    offsets_file(ck / "offsets" / "0", {0: 1, 1: 0}, topic)
    (ck / "commits").mkdir()
    (ck / "commits" / "0").write_text("v1\n{}")
    assert not caught_up(ck, bootstrap, topic)  # one record of partition 0 not read
    offsets_file(ck / "offsets" / "1", {0: 2, 1: 0}, topic)
    assert not caught_up(ck, bootstrap, topic)  # batch 1 in flight
    (ck / "commits" / "1").write_text("v1\n{}")
    assert caught_up(ck, bootstrap, topic)
