"""Open transactions and transaction.timeout.ms, on the real broker with real participant processes."""

from labkit.crashlab.blocking import open_transaction_blocks, timeout_abort
from labkit.crashlab.experiment import Experiment


def test_open_transaction_holds_back_a_later_plain_record(bootstrap, tmp_path):
    r = open_transaction_blocks(Experiment("block", bootstrap, folder=tmp_path), open_s=2.0)
    blocked = (r["commit_ns"] - r["write_ns"]) / 1e9
    rc = (r["seen_ns"]["read_committed"] - r["write_ns"]) / 1e9
    ru = (r["seen_ns"]["read_uncommitted"] - r["write_ns"]) / 1e9
    assert blocked <= rc < blocked + 1.0 and ru < 0.5, (blocked, rc, ru)


def test_coordinator_aborts_a_stalled_transaction(bootstrap, tmp_path):
    exp = Experiment("timeout", bootstrap, folder=tmp_path)
    r = timeout_abort(exp, timeout_ms=2000, paused_s=5)
    assert r["producer"].status == "fenced" and r["error"] == "_FENCED"
    final = r["samples"].iloc[-1]
    assert final.lso == final.high_watermark == 3  # 2 records and the coordinator's ABORT marker
    assert exp.check(r["topic"]).ok
