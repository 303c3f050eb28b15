import pandas as pd
import pytest

from labkit.core.waiting import wait_until
from labkit.kafka import records
from labkit.kafka.logbatches import LOG_COLUMNS, read_log
from labkit.lab.logview import partition_log, plot_log, side_by_side


def acks(offsets, values):
    return pd.DataFrame({"partition": 0, "offset": offsets, "key": None, "value": values})


def batches(*rows):
    """A frame shaped like read_log's: rows of (offset, producer_id, transactional, control, marker, value, outcome)."""
    columns = dict(zip(["offset", "producer_id", "transactional", "control", "marker", "value", "outcome"], zip(*rows)))
    columns["producer_epoch"] = [0 if pid >= 0 else -1 for pid in columns["producer_id"]]
    columns["base_offset"] = columns["offset"]
    return pd.DataFrame({c: pd.Series(columns[c], dtype=object if c in ("marker", "value", "outcome") else None)
                         for c in LOG_COLUMNS})


TWO_TRANSACTIONS = batches(
    (0, 7, True, False, None, "c1", "committed"), (1, 7, True, False, None, "c2", "committed"),
    (2, 7, True, False, None, "c3", "committed"), (3, 7, True, True, "COMMIT", None, None),
    (4, 7, True, False, None, "a1", "aborted"), (5, 7, True, False, None, "a2", "aborted"),
    (6, 7, True, False, None, "a3", "aborted"), (7, 7, True, True, "ABORT", None, None))


def test_control_records_are_the_ones_the_batches_mark():
    log = partition_log(TWO_TRANSACTIONS)
    assert list(log["kind"]) == ["committed"] * 3 + ["control record"] + ["aborted"] * 3 + ["control record"]
    control = log[log.kind == "control record"]
    assert list(zip(control.offset, control.marker)) == [(3, "COMMIT"), (7, "ABORT")]
    assert control.value.tolist() == [None, None]


def test_an_offset_the_log_lacks_is_not_called_a_marker():
    # offset 1 is not in the log read (e.g. removed by compaction): no entry is inferred for it; the old
    # partition_log(high_watermark, ...) called every offset no producer was given a control record
    log = partition_log(batches((0, -1, False, False, None, "p1", None), (2, -1, False, False, None, "p2", None)))
    assert list(log.offset) == [0, 2] and list(log.kind) == ["record", "record"]


def test_an_open_transaction_is_open():
    log = partition_log(batches((0, 3, True, False, None, "o1", None), (1, -1, False, False, None, "p1", None)))
    assert list(log.kind) == ["open", "record"]


def test_a_frame_that_is_not_a_log_read_is_refused():
    with pytest.raises(ValueError, match="lacks columns"):
        partition_log(acks([0], ["x"]))


def test_side_by_side_leaves_unread_offsets_empty():
    table = side_by_side({"rc": acks([0], ["c1"]), "ru": acks([0, 4], ["c1", "a1"])})
    assert table.to_dict("index") == {0: {"rc": "c1", "ru": "c1"}, 4: {"rc": "", "ru": "a1"}}


def test_plot_has_the_log_row_and_a_row_per_reader():
    fig = plot_log(partition_log(TWO_TRANSACTIONS), {"read_committed": acks([0, 1, 2], ["c1", "c2", "c3"])})
    rows = {y for trace in fig.data for y in trace.y}
    assert rows == {"log", "read_committed"}
    control = next(t for t in fig.data if t.name == "control record")
    assert list(control.x) == [3, 7] and list(control.text) == ["COMMIT", "ABORT"]


def test_on_the_broker_the_markers_follow_each_transaction(bootstrap):
    topic = records.create_topic(bootstrap, "logview")
    records.produce(bootstrap, topic, ["c1", "c2", "c3"], transactional_id=f"lv-{topic}", outcome="commit")
    records.produce(bootstrap, topic, ["a1", "a2", "a3"], transactional_id=f"lv-{topic}", outcome="abort")
    assert wait_until(lambda: len(read_log(bootstrap, topic)) == 8, 10)  # the ABORT marker comes after EndTxn's answer
    log = partition_log(read_log(bootstrap, topic))
    assert list(log.kind) == ["committed"] * 3 + ["control record"] + ["aborted"] * 3 + ["control record"]
    assert list(log.marker.iloc[[3, 7]]) == ["COMMIT", "ABORT"]
