"""The micro-batch timeline on hand-written histories: it draws what the history says."""

from labkit.crashlab.check import check
from labkit.spark.timeline import batch_rows, spark_timeline_figure
from tests.histories import H

IN, OUT = "in", "out"


def history():
    """Sink A, two batches of two inputs; the driver crashes after batch 1's writer returned, is restarted,
    and batch 1 runs again: its outputs are in the log twice."""
    h = H().add("start", "d")
    h.add("batch_offsets", "d", batch_id=0, topic=IN, partition=0, offset=0, last_offset=1)
    h.add("batch_start", "d", batch_id=0).add("batch_written", "d", batch_id=0).add("batch_committed", "d", batch_id=0)
    h.add("batch_offsets", "d", batch_id=1, topic=IN, partition=0, offset=2, last_offset=3)
    h.add("batch_start", "d", batch_id=1).add("batch_written", "d", batch_id=1)
    h.add("crash", "d", step="after_produce").add("start", "d")
    h.add("batch_start", "d", batch_id=1).add("batch_written", "d", batch_id=1).add("batch_committed", "d", batch_id=1)
    h.final(IN, "read_committed", [(i, f"s-{i}") for i in range(4)])
    h.final(IN, "read_uncommitted", [(i, f"s-{i}") for i in range(4)])
    out = [(0, "s-0>out"), (1, "s-1>out"), (2, "s-2>out"), (3, "s-3>out"), (4, "s-2>out"), (5, "s-3>out")]
    return h.finals(out).events


def transactional_history():
    """Sink B: batch 0 crashes mid-transaction (the restart aborts it), replays and commits; batch 1 commits, the
    driver dies before commits/1, and the replay is skipped."""
    h = H().add("start", "d")
    h.add("batch_offsets", "d", batch_id=0, topic=IN, partition=0, offset=0, last_offset=0)
    h.add("batch_start", "d", batch_id=0).add("txn_begin", "d", txn=1, batch_id=0)
    h.add("crash", "d", step="mid_produce").add("start", "d")
    h.add("batch_start", "d", batch_id=0).add("txn_begin", "d", txn=2, batch_id=0).add("batch_written", "d", batch_id=0, txn=2)
    h.txn("d", 2, "committed").add("batch_committed", "d", batch_id=0)
    h.add("batch_offsets", "d", batch_id=1, topic=IN, partition=0, offset=1, last_offset=1)
    h.add("batch_start", "d", batch_id=1).add("txn_begin", "d", txn=3, batch_id=1).txn("d", 3, "committed")
    h.add("crash", "d", step="after_commit").add("start", "d")
    h.add("batch_start", "d", batch_id=1).add("batch_skipped", "d", batch_id=1).add("batch_committed", "d", batch_id=1)
    h.final(IN, "read_committed", [(0, "s-0"), (1, "s-1")]).final(IN, "read_uncommitted", [(0, "s-0"), (1, "s-1")])
    return h.finals([(1, "s-0>out"), (4, "s-1>out")]).events


def test_rows_follow_the_history():
    rows = batch_rows(history(), IN, OUT)
    assert [r.batch_id for r in rows] == [0, 1]
    assert [o for _, _, o in rows[0].runs] == ["written"] and [o for _, _, o in rows[1].runs] == ["written", "written"]
    assert [step for _, step in rows[1].crashes] == ["after_produce"] and rows[0].crashes == []
    assert (rows[0].inputs, rows[0].once, rows[0].extra) == (2, 2, 0)
    assert (rows[1].inputs, rows[1].once, rows[1].extra, rows[1].missing) == (2, 2, 2, 0)
    assert all(r.offsets_s is not None and r.commits_s is not None for r in rows)


def test_extra_copies_agree_with_the_checker():
    events = history()
    result = check(events, output_topic=OUT, input_topic=IN)
    duplicated = {a.value_id for a in result.anomalies if a.name == "duplicate"}
    assert sum(r.extra for r in batch_rows(events, IN, OUT)) == len(duplicated) == 2


def test_transactional_runs_crashes_and_skips():
    rows = batch_rows(transactional_history(), IN, OUT)
    assert [o for _, _, o in rows[0].runs] == ["crashed", "committed"]
    assert [o for _, _, o in rows[1].runs] == ["committed", "skipped"]
    assert [s for _, s in rows[0].crashes] == ["mid_produce"] and [s for _, s in rows[1].crashes] == ["after_commit"]
    assert rows[0].kafka_commit_s is not None and rows[1].kafka_commit_s < rows[1].commits_s
    assert all((r.once, r.extra, r.missing) == (1, 0, 0) for r in rows)


def test_missing_output_is_counted():
    events = history()
    events = [e for e in events if not (e.kind == "final_read" and e.value_id == "s-0>out")]
    assert batch_rows(events, IN, OUT)[0].missing == 1


def test_figure_draws_the_rows():
    events = transactional_history()
    fig = spark_timeline_figure(events, IN, OUT, title="t")
    names = {t.name for t in fig.data}
    assert {"sink run: crashed", "sink run: committed", "sink run: skipped", "offsets/N written", "commits/N written",
            "Kafka transaction committed", "once", "crash (lab)", "restart (lab)"} <= names
    crashed = next(t for t in fig.data if t.name == "sink run: crashed")
    assert set(crashed.y) - {None} == {"batch 0"}  # the crashed run is drawn on batch 0's row only
    once = next(t for t in fig.data if t.name == "once")
    assert list(once.x) == [1, 1] and list(once.y) == ["batch 0", "batch 1"]
    labels = next(t for t in fig.data if t.mode == "text")
    assert sorted(labels.text) == ["skipped ▸", "✕ after_commit", "✕ mid_produce"]
    where = dict(zip(labels.text, labels.textposition))  # batch 1's crash and skip: one above, one below the row
    assert where["✕ after_commit"].startswith("top") and where["skipped ▸"].startswith("bottom")
    assert [a.text for a in fig.layout.annotations[2:]] == ["crash → restart d"] * 2  # the first start is no restart
    assert [s.line.dash for s in fig.layout.shapes] == ["longdash", "longdash", "solid", "solid"]  # crashes on top
    assert list(fig.layout.yaxis.categoryarray) == ["batch 1", "batch 0"]


def test_empty_history_draws_an_empty_figure():
    assert batch_rows([], IN, OUT) == []
    assert spark_timeline_figure([], IN, OUT).data == ()


def test_the_copies_panel_is_drawn_once_the_output_was_read_and_never_empty():
    """Issue 48: the live figure, redrawn while the pipeline ran (before the lab's final reads), showed an empty
    right panel; the book recorded it so. Until the read, the timeline alone, the whole width."""
    events = history()
    running = [e for e in events if e.kind != "final_read"]
    fig = spark_timeline_figure(running, IN, OUT)
    assert "xaxis2" not in fig.layout.to_plotly_json() and list(fig.layout.xaxis.domain) == [0, 1]
    assert [a.text for a in fig.layout.annotations if a.xref == "paper"] == ["micro-batches over time"]
    assert not [t for t in fig.data if t.type == "bar"]
    read = spark_timeline_figure(events, IN, OUT)
    assert read.layout.xaxis.domain[1] < read.layout.xaxis2.domain[0]
    bars = {t.name: list(t.x) for t in read.data if t.type == "bar"}
    assert bars == {"once": [2, 2], "extra copies": [0, 2], "missing": [0, 0]}
