"""``__transaction_state`` read and decoded on the real broker: one record per state change of a
``transactional.id``, in order, with its producer id, epoch and partitions; tombstones and unknown versions."""

import struct

import pytest

from labkit.kafka import records
from labkit.kafka.txnlog import decode, transaction_log


def test_a_commit_and_an_abort_are_state_records_of_the_coordinator(bootstrap):
    topic = records.create_topic(bootstrap, "txnlog", partitions=2)
    tid = f"txnlog-{topic}"
    records.produce(bootstrap, topic, ["c1"], transactional_id=tid, outcome="commit", partition=1)
    records.produce(bootstrap, topic, ["a1"], transactional_id=tid, outcome="abort", partition=0)
    log = transaction_log(bootstrap, tid)
    assert list(log.state) == ["EMPTY", "ONGOING", "PREPARE_COMMIT", "COMPLETE_COMMIT",
                               "EMPTY", "ONGOING", "PREPARE_ABORT", "COMPLETE_ABORT"]
    assert list(log.producer_epoch) == [0] * 4 + [1] * 4 and log.producer_id.nunique() == 1
    assert log.partitions[1] == [f"{topic}-1"] and log.partitions[5] == [f"{topic}-0"]
    assert log.offset.is_monotonic_increasing
    assert transaction_log(bootstrap, f"never-used-{topic}").empty


def test_tombstones_and_formats_labkit_does_not_read():
    key = struct.pack(">hh", 0, 3) + b"tid"
    assert decode(key, None) is None
    with pytest.raises(ValueError, match="TransactionLogValue version 2"):
        decode(key, struct.pack(">h", 2) + bytes(30))
    with pytest.raises(ValueError, match="TransactionLogKey version 1"):
        decode(struct.pack(">hh", 1, 3) + b"tid", None)
