"""Notebook 03's experiments on the real broker with real participant processes. The runs notebook 03 makes (client
defaults, an open transaction holding back a plain record, the coordinator aborting a stalled transaction) are
checked by its own claims cell, not run again here."""

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.lessons.isolation import open_transaction_blocks, txn_throughput


def test_bigger_transactions_cost_less_per_record(bootstrap):
    table = txn_throughput(bootstrap, (1, 100), min_records=100, min_txns=2)
    assert list(table.records_per_txn) == [1, 100] and list(table.records) == [100, 200]
    # 100 records a transaction: over twice the records a second of 1 a transaction (a quiet machine: well over 5x; a
    # fresh-clone run at load 10.7 on 2 cores: 4.4x, 613 against 138 records/s)
    assert table.txn_rec_per_s.iloc[1] > 2 * table.txn_rec_per_s.iloc[0]
    assert (table.ratio < 1).all()


def test_open_transaction_must_stay_open_long_enough(bootstrap, tmp_path):
    with pytest.raises(ValueError, match="at least 1 s"):
        open_transaction_blocks(Experiment("block", bootstrap, folder=tmp_path), open_s=0.2)




def test_an_open_transaction_ends_with_a_commit_or_an_abort_only(bootstrap, tmp_path):
    with pytest.raises(ValueError, match='end=\'rollback\': a transaction ends with a "commit" or an "abort"'):
        open_transaction_blocks(Experiment("block", bootstrap, folder=tmp_path), end="rollback")


def test_an_experiment_runs_the_open_transaction_once(bootstrap, tmp_path):
    exp = Experiment("block", bootstrap, folder=tmp_path)
    exp.history.append("txn_begin", "txn-producer", txn=1)  # as a first run leaves it
    with pytest.raises(ValueError, match="has run this already: give each run an Experiment of its own"):
        open_transaction_blocks(exp, end="abort")
