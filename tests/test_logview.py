import pandas as pd
import pytest

from labkit.logview import partition_log, plot_log, side_by_side


def acks(offsets, values):
    return pd.DataFrame({"partition": 0, "offset": offsets, "key": None, "value": values})


def test_offsets_no_producer_was_given_are_control_records():
    log = partition_log(8, committed=acks([0, 1, 2], ["c1", "c2", "c3"]), aborted=acks([4, 5, 6], ["a1", "a2", "a3"]))
    assert list(log["kind"]) == ["committed"] * 3 + ["control record"] + ["aborted"] * 3 + ["control record"]
    assert log.loc[log.kind == "control record", "offset"].tolist() == [3, 7]


def test_acks_past_the_high_watermark_or_twice_are_refused():
    with pytest.raises(ValueError, match="past the high watermark 2"):
        partition_log(2, record=acks([2], ["x"]))
    with pytest.raises(ValueError, match="claimed twice"):
        partition_log(3, a=acks([0], ["x"]), b=acks([0], ["y"]))


def test_side_by_side_leaves_unread_offsets_empty():
    table = side_by_side({"rc": acks([0], ["c1"]), "ru": acks([0, 4], ["c1", "a1"])})
    assert table.to_dict("index") == {0: {"rc": "c1", "ru": "c1"}, 4: {"rc": "", "ru": "a1"}}


def test_plot_has_the_log_row_and_a_row_per_reader():
    log = partition_log(4, committed=acks([0, 1, 2], ["c1", "c2", "c3"]))
    fig = plot_log(log, {"read_committed": acks([0, 1, 2], ["c1", "c2", "c3"])})
    rows = {y for trace in fig.data for y in trace.y}
    assert rows == {"log", "read_committed"}
    control = next(t for t in fig.data if t.name == "control record")
    assert list(control.x) == [3]
