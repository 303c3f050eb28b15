"""The checker on hand-written histories: it catches each anomaly, and raises no false alarm."""

import pytest

from labkit.core.history import derived_id
from labkit.crashlab.check import ANOMALIES, check
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
    assert result.count("duplicate") == 1 and list(result.table().offset) == [1]
    assert "2 times (offsets 0:1, 0:2)" in result.anomalies[0].detail and result.counts()["lost write"] == 0


def test_a_duplicate_is_counted_once_per_record_written_more_than_once():
    """20 records written twice (and one three times) are 21 duplicates, not 41 copies."""
    h, final = H(), []
    for n in range(1, 21):
        for offset in (n - 1, 20 + n - 1):
            h.write("p", f"p-{n}", offset)
            final.append((offset, f"p-{n}"))
    h.write("p", "p-1", 40)
    result = check(h.finals(sorted(final + [(40, "p-1")])).events, output_topic=OUT)
    assert result.count("duplicate") == 20
    assert "3 times" in result.table().set_index("value_id").detail["p-1"]


def test_zombie_duplicate_in_consume_transform_produce():
    """Seed 002's A, B, B: two instances both process input in-2."""
    h = H()
    h.write("src", "in-1", 0, topic=IN).write("src", "in-2", 1, topic=IN)
    h.write("i1", derived_id("in-1"), 0).write("i2", derived_id("in-2"), 1).write("i1", derived_id("in-2"), 2)
    h.finals([(0, "in-1"), (1, "in-2")], topic=IN)
    h.finals([(0, "in-1>out"), (1, "in-2>out"), (2, "in-2>out")])
    result = check(h.events, output_topic=OUT, input_topic=IN)
    assert result.count("duplicate") == 1 and set(result.table().value_id) == {"in-2>out"}


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
    assert result.counts() == {**dict.fromkeys(ANOMALIES, 0), "duplicate": 2}


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


# -- two copies of one value id are two writes (issue 35): a read is matched to the write it read -----------------

def copies(first: str, second: str) -> H:
    """p's transaction 1 writes p-1 at offset 0 and ends ``first``; its transaction 2 writes p-1 again at offset 2
    (a rewrite after a restart, a zombie's B, a replayed micro-batch) and ends ``second``."""
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, first)
    return h.add("txn_begin", "p", txn=2).write("p", "p-1", 2, txn=2).txn("p", 2, second)


def consume(h: H, offset: int, vid: str = "p-1", who: str = "c") -> H:
    return h.add("consume", who, topic=OUT, partition=0, offset=offset, value_id=vid, isolation_level="read_committed")


def test_a_read_of_the_aborted_copy_is_caught_when_a_later_copy_committed():
    """Keyed by value id, the committed copy at offset 2 hid the aborted one at offset 0 that c read."""
    h = consume(copies("aborted", "committed"), 0).finals([(2, "p-1")], uncommitted=[(0, "p-1"), (2, "p-1")])
    result = check(h.events, output_topic=OUT)
    assert result.counts() == {**dict.fromkeys(ANOMALIES, 0), "aborted read": 1}
    assert result.anomalies[0].offset == 0 and "transaction 1" in result.anomalies[0].detail


def test_a_read_of_the_committed_copy_is_clean_when_a_later_copy_aborted():
    """Keyed by value id, the aborted copy at offset 2 made c's clean read of offset 0 an aborted read."""
    h = consume(copies("committed", "aborted"), 0).finals([(0, "p-1")], uncommitted=[(0, "p-1"), (2, "p-1")])
    assert check(h.events, output_topic=OUT).ok


def test_precommitted_read_is_judged_against_the_copy_read():
    """c reads transaction 2's copy (offset 2) after transaction 1 committed but before transaction 2's commit
    started: a precommitted read; d reads transaction 1's copy at the same moment: clean."""
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, "committed")
    h.add("txn_begin", "p", txn=2).write("p", "p-1", 2, txn=2)
    consume(consume(h, 2), 0, who="d").txn("p", 2, "committed")
    result = check(h.finals([(0, "p-1"), (2, "p-1")]).events, output_topic=OUT)
    assert result.count("precommitted read") == 1
    assert (result.anomalies[-1].participant, result.anomalies[-1].offset) == ("c", 2)
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1)
    consume(h, 0).txn("p", 1, "committed").add("txn_begin", "p", txn=2).write("p", "p-1", 2, txn=2)
    consume(h, 2, who="d").txn("p", 2, "committed")  # c read its copy before commit 1, d before commit 2
    result = check(h.finals([(0, "p-1"), (2, "p-1")]).events, output_topic=OUT)
    assert sorted((a.participant, a.offset) for a in result.anomalies if a.name == "precommitted read") == \
        [("c", 0), ("d", 2)]


def logged(h: H, records: list[tuple], committed: list[tuple]) -> H:
    """Final reads where the read_uncommitted one is the log: (offset, value id, producer id, epoch, outcome)."""
    h.final(OUT, "read_committed", committed)
    for offset, vid, pid, epoch, outcome in records:
        h.add("final_read", "lab", topic=OUT, partition=0, offset=offset, value_id=vid, isolation_level="read_uncommitted",
              producer_id=pid, producer_epoch=epoch, outcome=outcome)
    return h.add("final_read", "lab", topic=OUT, isolation_level="read_uncommitted")


def test_an_unacknowledged_write_is_matched_by_the_log():
    """p crashed before its acknowledgements were recorded: p-1 (offset 0) and p-2 (offset 1) are in the log with no
    ack; the coordinator aborted that transaction (the log's ABORT marker at 2). The restarted p (epoch 1) wrote both
    again in its transaction 2, committed (offsets 3, 4). c read the crashed instance's p-1: an aborted read, though
    p-1's committed copy exists; the reads of the new copies are clean."""
    h = H().add("txn_begin", "p", txn=1)
    for vid in ("p-1", "p-2"):
        h.add("send", "p", topic=OUT, partition=0, value_id=vid, txn=1)
    h.add("crash", "p").add("txn_begin", "p", txn=2).write("p", "p-1", 3, txn=2).write("p", "p-2", 4, txn=2)
    h.txn("p", 2, "committed")
    consume(consume(consume(h, 0), 3), 4, "p-2")
    logged(h, [(0, "p-1", 7, 0, "aborted"), (1, "p-2", 7, 0, "aborted"), (3, "p-1", 7, 1, "committed"),
               (4, "p-2", 7, 1, "committed")], [(3, "p-1"), (4, "p-2")])
    result = check(h.events, output_topic=OUT)
    assert result.counts() == {**dict.fromkeys(ANOMALIES, 0), "aborted read": 1}
    assert (result.anomalies[0].participant, result.anomalies[0].offset) == ("c", 0)
    assert "p's transaction 1" in result.anomalies[0].detail


def test_an_unacknowledged_write_of_another_producer_is_told_apart_by_its_producer_epoch():
    """A zombie (i1, epoch 0) and its successor (i2, epoch 1) both write in-2>out; i1's write was never acked and its
    transaction aborted (the log says so), i2's committed. A read of i1's copy is an aborted read; of i2's, clean."""
    h = H().add("txn_begin", "i1", txn=1).add("send", "i1", topic=OUT, partition=0, value_id="in-2>out", txn=1)
    h.add("txn_begin", "i2", txn=1).write("i2", "in-1>out", 1, txn=1).write("i2", "in-2>out", 2, txn=1)
    h.txn("i2", 1, "committed")
    consume(consume(h, 0, "in-2>out"), 2, "in-2>out", who="d")
    logged(h, [(0, "in-2>out", 5, 0, "aborted"), (1, "in-1>out", 5, 1, "committed"), (2, "in-2>out", 5, 1, "committed")],
           [(1, "in-1>out"), (2, "in-2>out")])
    result = check(h.events, output_topic=OUT)
    assert [(a.name, a.participant, a.offset) for a in result.anomalies] == [("aborted read", "c", 0)]


def test_a_replayed_micro_batch_is_two_writes():
    """Spark's sink B: micro-batch 0 written in transaction 1, the driver crashed before the commit (the log aborts
    it); the replay of batch 0 in transaction 2 commits. A consumer that read the first attempt's record read
    an aborted transaction; the replay's copy is clean, and the final read holds one copy: no duplicate."""
    h = H().add("txn_begin", "spark", txn=1, batch_id=0).write("spark", "in-1>out", 0, txn=1)
    h.add("crash", "spark").add("txn_begin", "spark", txn=2, batch_id=0).write("spark", "in-1>out", 2, txn=2)
    h.txn("spark", 2, "committed")
    consume(consume(h, 0, "in-1>out"), 2, "in-1>out", who="d")
    logged(h, [(0, "in-1>out", 9, 0, "aborted"), (2, "in-1>out", 9, 1, "committed")], [(2, "in-1>out")])
    result = check(h.events, output_topic=OUT)
    assert [(a.name, a.participant, a.offset) for a in result.anomalies] == [("aborted read", "c", 0)]
