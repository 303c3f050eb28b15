"""Notebook 00's lesson on the real broker: ``begin_transaction`` writes nothing to ``__transaction_state``; the
first record of the transaction does (ONGOING); the broker accepts no BeginTransaction request (its ApiVersions
answer). (The exercise's check: tests/test_exercise.py.)"""

from labkit.kafka import records
from labkit.lessons import tour


def test_begin_transaction_is_local_and_the_first_send_starts_the_transaction(bootstrap):
    topic = records.create_topic(bootstrap, "tour-begin")
    seen = tour.begin_then_send(bootstrap, topic, f"tour-{topic}", wait_s=0.5)
    assert seen == {"after init_transactions": ["EMPTY"], "after begin_transaction": ["EMPTY"],
                    "after the first send": ["EMPTY", "ONGOING"]}
    assert records.read_topic(bootstrap, topic, "read_committed").empty  # it was aborted


def test_the_broker_accepts_no_begin_transaction_request(bootstrap):
    """The broker's ApiVersions answer, every key named: the transaction requests, and none that begins one."""
    requests = tour.transaction_requests(bootstrap)
    names = list(requests.request)
    assert {"InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn",
            "WriteTxnMarkers", "DescribeTransactions", "ListTransactions"} <= set(names)
    assert not [n for n in names if n.startswith("Begin")] and not requests.attrs["unnamed"]
    assert list(requests.api_key) == sorted(requests.api_key) and requests.attrs["supported"] > 50
    end_txn = requests.set_index("request").loc["EndTxn"]
    assert end_txn.api_key == 26 and end_txn.versions.startswith("0-")


def test_the_quiz_verdict_names_the_control_records_the_log_holds(bootstrap):
    topic = tour.quiz_topic(bootstrap)  # x1 x2 committed, p1 plain, y1 y2 aborted
    verdict = tour.check_prediction(bootstrap, topic, {"read_committed": ["x1", "x2", "p1"],
                                                       "read_uncommitted": ["x1", "x2", "p1", "y1", "y2"]})
    assert verdict.ok and "(COMMIT at offset 2, ABORT at offset 6)" in verdict.message, verdict.message
