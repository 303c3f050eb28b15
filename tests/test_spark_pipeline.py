"""The notebook 04 lesson's functions: their errors, and where_offsets_live on a real broker. The pipeline runs
themselves (sinks A and B crashed at every point, and on a standalone cluster) are notebook 04's assertion cells."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from labkit.kafka.records import high_watermarks
from labkit.lessons import spark_pipeline as sp
from tests.test_spark_role import offsets_file


def test_unknown_sink_is_refused(bootstrap):
    with pytest.raises(ValueError, match="the sinks are A"):
        sp.pipeline(bootstrap, "C")


def test_pipeline_writes_its_inputs_and_checks_the_crash_plan(bootstrap):
    run = sp.pipeline(bootstrap, "A", records=10, partitions=2)
    assert run.records == 10 and run.pipeline.spec["sink"] == "kafka"
    assert high_watermarks(bootstrap, run.input_topic) == {0: 5, 1: 5}
    with pytest.raises(ValueError, match="'after_commit' is not a crash point of sink A"):
        run.run_to_end([("after_commit", 1)])
    assert run.pipeline.status == "not started"  # refused before anything ran


def test_where_offsets_live_shows_the_checkpoint_and_any_group_offsets(bootstrap):
    run = sp.pipeline(bootstrap, "B", records=10, partitions=2)
    offsets_file(run.checkpoint / "offsets" / "0", {0: 5, 1: 5}, run.input_topic)
    table = sp.where_offsets_live(run)
    assert table.iloc[0].to_dict() == {"where": "Spark checkpoint", "file": "offsets/0", "partition 0": 5, "partition 1": 5}
    assert table.iloc[-1]["file"] == "no group has committed offsets of the input topic"
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(run.input_topic, 1, 3)], asynchronous=False)
    consumer.close()
    table = sp.where_offsets_live(run)
    row = table[table["file"] == f"group {group}"].iloc[0]
    assert row["where"] == "Kafka (__consumer_offsets)" and row["partition 1"] == 3


def test_live_timeline_redraws_the_run(bootstrap):
    import plotly.graph_objects as go

    run = sp.pipeline(bootstrap, "B", records=10, partitions=2)
    offsets_file(run.checkpoint / "offsets" / "0", {0: 5, 1: 5}, run.input_topic)
    run.experiment.history.append("batch_start", "driver", batch_id=0)
    live = run.live(0.1)
    widget = live.start()
    live.stop()
    assert isinstance(widget, go.FigureWidget) and widget.layout.title.text == "sink B, live"
    assert "sink run: running" in {t.name for t in widget.data}  # batch 0's sink has started, not ended
