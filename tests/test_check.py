"""The checker on hand-written histories: it catches each anomaly, and raises no false alarm."""

import pytest

from labkit.crashlab.check import ANOMALIES, check
from labkit.history import derived_id
from tests.histories import IN, OUT, H


def clean_transactional():
    h = H()
    h.add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).write("p", "p-2", 1, txn=1).txn("p", 1, "committed")
    h.add("txn_begin", "p", txn=2).write("p", "p-3", 3, txn=2).txn("p", 2, "aborted")
    h.add("consume", "c", topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_committed")
    h.add("consume", "c", topic=OUT, partition=0, offset=1, value_id="p-2", isolation_level="read_committed")
    return h.finals([(0, "p-1"), (1, "p-2")], uncommitted=[(0, "p-1"), (1, "p-2"), (3, "p-3")])


def test_clean_histories_raise_no_alarm():
    assert check(clean_transactional().events, output_topic=OUT).ok
    plain = H().write("p", "p-1", 0).write("p", "p-2", 1).finals([(0, "p-1"), (1, "p-2")])
    assert check(plain.events, output_topic=OUT).counts() == dict.fromkeys(ANOMALIES, 0)
    empty = H().finals([])
    assert check(empty.events, output_topic=OUT).ok


def test_indefinite_write_that_did_not_land_is_not_lost():
    h = H().write("p", "p-1", 0).add("send", "p", topic=OUT, partition=0, value_id="p-2")
    h.add("send_failed", "p", topic=OUT, partition=0, value_id="p-2", error="_MSG_TIMED_OUT", definite=False)
    assert check(h.finals([(0, "p-1")]).events, output_topic=OUT).ok


def test_duplicate():
    h = H().write("p", "p-1", 0).write("p", "p-2", 1).write("p", "p-2", 2).finals([(0, "p-1"), (1, "p-2"), (2, "p-2")])
    result = check(h.events, output_topic=OUT)
    assert result.count("duplicate") == 2 and set(result.table().offset) == {1, 2}
    assert result.counts()["lost write"] == 0


def test_zombie_duplicate_in_consume_transform_produce():
    """Seed 002's A, B, B: two instances both process input in-2."""
    h = H()
    h.write("src", "in-1", 0, topic=IN).write("src", "in-2", 1, topic=IN)
    h.write("i1", derived_id("in-1"), 0).write("i2", derived_id("in-2"), 1).write("i1", derived_id("in-2"), 2)
    h.finals([(0, "in-1"), (1, "in-2")], topic=IN)
    h.finals([(0, "in-1>out"), (1, "in-2>out"), (2, "in-2>out")])
    result = check(h.events, output_topic=OUT, input_topic=IN)
    assert result.count("duplicate") == 2 and set(result.table().value_id) == {"in-2>out"}


def test_lost_write_committed_but_not_visible():
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, "committed").finals([])
    result = check(h.events, output_topic=OUT)
    assert result.count("lost write") == 1 and "transaction committed" in result.anomalies[0].detail


def test_unprocessed_input_with_no_output():
    """An input without output is a liveness failure (the pipeline stopped), not a lost write: nothing acked vanished."""
    h = H().write("src", "in-1", 0, topic=IN).write("src", "in-2", 1, topic=IN).write("p", "in-1>out", 0)
    h.finals([(0, "in-1"), (1, "in-2")], topic=IN).finals([(0, "in-1>out")])
    result = check(h.events, output_topic=OUT, input_topic=IN)
    assert [a.value_id for a in result.anomalies if a.name == "unprocessed"] == ["in-2"]
    assert result.count("lost write") == 0 and result.counts()["unprocessed"] == 1


def test_lost_output_of_a_processed_input_is_a_lost_write_not_unprocessed():
    """The processor's committed output vanished: a lost write, and its input is unprocessed too."""
    h = H().write("src", "in-1", 0, topic=IN).add("txn_begin", "p", txn=1).write("p", "in-1>out", 0, txn=1)
    h.txn("p", 1, "committed").finals([(0, "in-1")], topic=IN).finals([])
    result = check(h.events, output_topic=OUT, input_topic=IN)
    assert (result.count("lost write"), result.count("unprocessed")) == (1, 1)


def test_aborted_read():
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, "aborted")
    h.add("consume", "c", topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_committed")
    result = check(h.finals([], uncommitted=[(0, "p-1")]).events, output_topic=OUT)
    assert result.counts()["aborted read"] == 1 and result.anomalies[0].participant == "c"


def test_aborted_records_read_uncommitted_are_no_anomaly():
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, "aborted")
    h.add("consume", "c", topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_uncommitted")
    assert check(h.finals([], uncommitted=[(0, "p-1")]).events, output_topic=OUT).ok


def test_precommitted_read():
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1)
    h.add("consume", "c", topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_committed")
    h.txn("p", 1, "committed").finals([(0, "p-1")])
    result = check(h.events, output_topic=OUT)
    assert result.counts() == {**dict.fromkeys(ANOMALIES, 0), "precommitted read": 1}


def test_gap_poll_skip():
    h = H().write("p", "p-1", 0).write("p", "p-2", 1).write("p", "p-3", 2)
    for offset in (0, 2):
        h.add("consume", "c", topic=OUT, partition=0, offset=offset, value_id=f"p-{offset + 1}",
              isolation_level="read_committed")
    result = check(h.finals([(0, "p-1"), (1, "p-2"), (2, "p-3")]).events, output_topic=OUT)
    assert result.count("gap") == 1 and result.anomalies[0].offset == 1


def test_no_gap_over_control_records_or_what_another_member_read():
    h = H().write("p", "p-1", 0).write("p", "p-2", 2).write("p", "p-3", 3)  # offset 1: a control record
    h.add("consume", "c1", topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_committed")
    h.add("consume", "c2", topic=OUT, partition=0, offset=2, value_id="p-2", isolation_level="read_committed")
    h.add("consume", "c1", topic=OUT, partition=0, offset=3, value_id="p-3", isolation_level="read_committed")
    assert check(h.finals([(0, "p-1"), (2, "p-2"), (3, "p-3")]).events, output_topic=OUT).ok


def test_out_of_order():
    h = H().write("p", "p-1", 0).write("p", "p-3", 1).write("p", "p-2", 2)
    result = check(h.finals([(0, "p-1"), (1, "p-3"), (2, "p-2")]).events, output_topic=OUT)
    assert result.count("out-of-order") == 1 and result.anomalies[0].value_id == "p-2"


def test_a_resent_batch_is_duplicates_not_reordering():
    h = H().write("p", "p-1", 0).write("p", "p-2", 1).write("p", "p-1", 2).write("p", "p-2", 3).write("p", "p-3", 4)
    result = check(h.finals([(0, "p-1"), (1, "p-2"), (2, "p-1"), (3, "p-2"), (4, "p-3")]).events, output_topic=OUT)
    assert result.counts() == {**dict.fromkeys(ANOMALIES, 0), "duplicate": 4}


def test_missing_final_read_and_bad_names_are_errors():
    with pytest.raises(ValueError, match="no read_committed final_read of 'out'"):
        check(H().write("p", "p-1", 0).events, output_topic=OUT)
    with pytest.raises(ValueError, match="unknown anomaly 'dupe'"):
        check(H().finals([]).events, output_topic=OUT).count("dupe")


def test_result_renders_a_table():
    result = check(H().write("p", "p-1", 0).finals([]).events, output_topic=OUT)
    assert "lost write" in result._repr_html_()
    assert list(result.table().columns)[:2] == ["anomaly", "value_id"]
    assert "No anomalies" in check(H().finals([]).events, output_topic=OUT)._repr_html_()
