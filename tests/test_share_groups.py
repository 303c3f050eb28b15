"""Notebook 06's experiments refuse what they cannot show (the notebook runs each of them whole)."""

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.lessons.share_groups import (LOCK_MS, framework_sink, handovers, held, implicit_acknowledgement,
                                         lock_expiry, playground, rewind, slow_record, slow_record_summary)
from labkit.core.waiting import wait_for
from labkit.share.reset import alter_share_group_offsets
from labkit.share.runs import deliveries, persisted, share_offsets


def test_unknown_order_and_fault_are_refused_before_anything_runs(tmp_path):
    exp = Experiment("share", "127.0.0.1:1", folder=tmp_path)
    with pytest.raises(ValueError, match="unknown order 'both'; the orders are ack_first, sink_first"):
        framework_sink(exp, "both")
    with pytest.raises(ValueError, match="how must be 'pause' or 'crash', not 'stop'"):
        lock_expiry(exp, "stop")
    with pytest.raises(ValueError, match="hold_ms must exceed the lock"):
        slow_record(exp, hold_ms=LOCK_MS)
    with pytest.raises(ValueError, match="renew_ms \\+ per_record_ms stay within it"):
        slow_record(exp, renew_ms=LOCK_MS - 500, per_record_ms=500)
    assert exp.history.events() == []


def test_a_slow_record_is_renewed_on_java_and_redelivered_on_librdkafka(bootstrap, tmp_path):
    """The same processing (1 s per delivery, 8 s more for the first) on both clients: the Java consumer RENEWs
    (KIP-1222) and keeps its one delivery; librdkafka's lock expires and its ACCEPT is refused. Each delivery's
    per_record_ms counts once on Java too, not again at each renewal: the first ACCEPT comes as late on both."""
    exp = Experiment("slow", bootstrap, folder=tmp_path)
    summary = slow_record_summary(exp, slow_record(exp, hold_ms=8000, renew_ms=2000, per_record_ms=1000))
    java, rdk = summary.loc["java"], summary.loc["librdkafka"]
    assert (java.deliveries, java.acknowledgements) == ([1], ["RENEW"] * 3 + ["ACCEPT"]), java
    assert (java.state, java.delivery_count) == ("ACKNOWLEDGED", 1) and "AVAILABLE" not in java["broker states"]
    assert (rdk.deliveries, rdk.acknowledgements) == ([1, 2], ["ACCEPT: INVALID_RECORD_STATE", "ACCEPT"]), rdk
    assert (rdk.state, rdk.delivery_count) == ("ACKNOWLEDGED", 2), rdk
    assert java.processed_s >= 9 and rdk.processed_s >= 9, summary
    assert abs(java.processed_s - rdk.processed_s) < 1.5, summary  # 3 s apart if renewals re-added per_record_ms


def test_a_reset_start_offset_delivers_acknowledged_records_again_only_to_an_empty_group(bootstrap, tmp_path):
    """AlterShareGroupOffsets on the real broker: refused (NON_EMPTY_GROUP) while a consumer is in the group; once it
    left, the start offset 0 wipes the records' states (the lag counts all 4 again) and a new consumer gets every
    acknowledged record again, its delivery count restarted at 1."""
    exp = Experiment("rewind", bootstrap, folder=tmp_path)
    done = implicit_acknowledgement(exp, records=4)
    assert set(persisted(exp, done["topic"]).state) == {"ACKNOWLEDGED"}
    back = rewind(exp, done)
    assert back["refused"]["error"] == "NON_EMPTY_GROUP" and not back["refused"]["partitions"], back["refused"]
    assert back["accepted"]["error"] is None and back["accepted"]["partitions"] == {(done["topic"], 0): None}, back
    assert back["before"] == (0, 0) and back["after"] == (0, 4), back  # the SPSO lags; the lag counts the 4 again
    again = deliveries(exp, done["topic"]).query("consumer == @back['consumer'].name")
    assert sorted(again.offset) == [0, 1, 2, 3] and set(again.delivery_count) == {1}, again
    final = persisted(exp, done["topic"])
    assert set(final.state) == {"ACKNOWLEDGED"} and set(final.delivery_count) == {1}, final
    assert share_offsets(bootstrap, done["group"], done["topic"])[1] == 0


def test_a_reset_of_an_unknown_topic_is_refused_for_its_partition(bootstrap):
    result = alter_share_group_offsets(bootstrap, "no-such-share-group", {"no-such-topic": {0: 0}})
    assert result == {"error": None, "message": None, "partitions": {("no-such-topic", 0): "UNKNOWN_TOPIC_OR_PART"}}


def test_held_and_handovers_follow_each_record_from_consumer_to_consumer(tmp_path):
    exp = Experiment("hand", "127.0.0.1:1", folder=tmp_path)
    for kind, who, ns, topic, offset, count in [("delivered", "a", 1, "t", 0, 1), ("delivered", "a", 1, "t", 1, 1),
                                                ("ack_committed", "a", 2, "t", 0, None), ("delivered", "b", 3, "t", 1, 2),
                                                ("delivered", "a", 4, "u", 5, 1)]:
        extra = {"delivery_count": [count]} if kind == "delivered" else {"ack_type": ["ACCEPT"]}
        exp.history.append_batch(kind, who, {"mono_ns": [ns], "offset": [offset], **extra}, topic=topic)
    assert held(exp, "a", "t") == {1} and held(exp, "b", "t") == {1} and held(exp, "a", "u") == {5}
    assert held(exp, "a", "t", min_s=1e9) == set()  # delivered less than min_s ago
    log = handovers(exp, "t")
    assert log[["consumer", "offset", "delivery_count", "previous"]].fillna("-").values.tolist() == [
        ["a", 0, 1, "-"], ["a", 1, 1, "-"], ["b", 1, 2, "a"]]


def test_the_playground_refuses_a_size_that_would_move_records_unpressed(tmp_path):
    exp = Experiment("play", "127.0.0.1:1", folder=tmp_path)
    with pytest.raises(ValueError, match=r"a poll's work \(2 x 4000 ms\) must take at most half the lock"):
        playground(exp, per_record_ms=4000, poll_records=2, lock_ms=15_000)
    with pytest.raises(ValueError, match="idle_ms \\(20000\\) must exceed the lock"):
        playground(exp, idle_ms=20_000)
    with pytest.raises(ValueError, match="at least 1"):
        playground(exp, records=0)
    assert exp.history.events() == []


def test_the_playground_left_alone_delivers_each_record_once_and_keeps_it(bootstrap, tmp_path):
    """Notebook 06's playground unpressed, on the real broker: its 16 records each go to one player, once (delivery
    count 1), and are accepted by it; the panel's counters count each record once, the two players' adding up to
    the records. (The old playground, one produce batch of 40 records and the broker's 5 s lock, gave all 40 to
    each player in turn, every acknowledgement refused.)"""
    exp = Experiment("play", bootstrap, folder=tmp_path)
    play = playground(exp)
    players, topic, records = play["players"], play["topic"], 16
    try:
        wait_for(lambda: sum(p.counters()["ack_committed"] for p in players) >= records,
                 "the players never acknowledged every record", 180)
        wait_for(lambda: set(persisted(exp, topic).state) == {"ACKNOWLEDGED"} and len(persisted(exp, topic)) == records,
                 "the broker never persisted every record ACKNOWLEDGED", 30)
    finally:
        exp.stop_all()
        play["observer"].stop()
    log = handovers(exp, topic)
    assert sorted(log.offset) == list(range(records)) and set(log.delivery_count) == {1}, log
    assert log.previous.isna().all() and log.consumer.nunique() == 2, log
    assert not [e for e in exp.history.events() if e.kind == "ack_committed" and e.error]
    counters = [p.counters() for p in players]
    assert all(c["ack_committed"] == c["delivered"] <= records for c in counters), counters
    assert sum(c["delivered"] for c in counters) == records, counters
    assert set(persisted(exp, topic).delivery_count) == {1}
