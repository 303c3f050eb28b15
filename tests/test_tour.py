"""Notebook 00's lesson on the real broker: ``begin_transaction`` writes nothing to ``__transaction_state``; the
first record of the transaction does (ONGOING); the release's protocol has no BeginTransaction request. (The
exercise's check: tests/test_exercise.py.)"""

from labkit.kafka import records
from labkit.lessons import tour


def test_begin_transaction_is_local_and_the_first_send_starts_the_transaction(bootstrap):
    topic = records.create_topic(bootstrap, "tour-begin")
    seen = tour.begin_then_send(bootstrap, topic, f"tour-{topic}", wait_s=0.5)
    assert seen == {"after init_transactions": ["EMPTY"], "after begin_transaction": ["EMPTY"],
                    "after the first send": ["EMPTY", "ONGOING"]}
    assert records.read_topic(bootstrap, topic, "read_committed").empty  # it was aborted


def test_the_release_has_no_begin_transaction_request():
    names = tour.transaction_requests()
    assert {"InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn",
            "WriteTxnMarkers"} <= set(names)
    assert not [n for n in names if n.startswith("Begin")]
