"""Notebook 03's experiments on the real broker with real participant processes."""

import uuid

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.lessons.isolation import open_transaction_blocks, read_with_client_defaults, timeout_abort, txn_throughput
from labkit.records import create_topic, produce


def test_client_defaults_differ(bootstrap):
    topic = create_topic(bootstrap, "defaults")
    produce(bootstrap, topic, ["a"], transactional_id=f"d-{uuid.uuid4()}", outcome="abort")
    produce(bootstrap, topic, ["p"])
    assert read_with_client_defaults(bootstrap, topic) == {"confluent-kafka": ["p"], "kafka-python": ["a", "p"]}


def test_bigger_transactions_cost_less_per_record(bootstrap):
    table = txn_throughput(bootstrap, (1, 100), min_records=100, min_txns=2)
    assert list(table.records_per_txn) == [1, 100] and list(table.records) == [100, 200]
    assert table.txn_rec_per_s.iloc[1] > 5 * table.txn_rec_per_s.iloc[0]
    assert (table.ratio < 1).all()


def test_open_transaction_holds_back_a_later_plain_record(bootstrap, tmp_path):
    exp = Experiment("block", bootstrap, folder=tmp_path)
    r = open_transaction_blocks(exp, open_s=2.0)
    # read_uncommitted (the control) got plain-1 while the transaction was open; read_committed only
    # once its commit had started, although plain-1 is not in the transaction.
    assert r["write_ns"] < r["seen_ns"]["read_uncommitted"] < r["commit_start_ns"] <= r["seen_ns"]["read_committed"]
    s = r["samples"]
    assert ((s.lso < s.high_watermark) & (s.mono_ns > r["write_ns"]) & (s.mono_ns < r["commit_start_ns"])).any()
    assert exp.check(r["topic"]).ok


def test_open_transaction_must_stay_open_long_enough(bootstrap, tmp_path):
    with pytest.raises(ValueError, match="at least 1 s"):
        open_transaction_blocks(Experiment("block", bootstrap, folder=tmp_path), open_s=0.2)


def test_coordinator_aborts_a_stalled_transaction(bootstrap, tmp_path):
    exp = Experiment("timeout", bootstrap, folder=tmp_path)
    r = timeout_abort(exp, timeout_ms=2000)
    assert r["producer"].status == "fenced" and r["error"] == "_FENCED"
    # aborted while the producer was paused, and not before transaction.timeout.ms had passed
    assert r["marks"]["paused"] < r["aborted_ns"] < r["marks"]["resumed"]
    assert r["aborted_ns"] - r["begin_ns"] >= 2000 * 1_000_000
    final = r["samples"].iloc[-1]
    assert final.lso == final.high_watermark == 3  # 2 records and the coordinator's ABORT marker
    assert exp.check(r["topic"]).ok
