"""An experiment's final reads on the real broker: the read_uncommitted one is the log, each record with its batch's
producer id and epoch and its transaction's outcome as the log's control records give it; the checker uses that
outcome for a transaction its producer never ended."""

import uuid

import pytest

from labkit.core.errors import TopicNotFoundError
from labkit.crashlab.experiment import Experiment
from labkit.kafka.producers import describe_producers


@pytest.fixture
def exp(bootstrap, tmp_path):
    return Experiment("fr", bootstrap, folder=tmp_path)


def test_the_read_uncommitted_final_read_is_the_log_with_its_producer_ids_and_outcomes(bootstrap, exp):
    """tx1 commits its transaction 1 (offsets 0, 1; COMMIT at 2), is SIGKILLed before committing transaction 2
    (offsets 3, 4, acknowledged), and the coordinator aborts it after transaction.timeout.ms (ABORT at 5)."""
    topic = exp.topic("out")
    p = exp.participant("tx1", "producer", topic=topic, mode="transactional", transactional_id=f"fr-{uuid.uuid4()}",
                        iterations=3, batch=2, crash_at="before_commit", crash_iteration=2,
                        config={"transaction.timeout.ms": 2000})
    p.start().wait(60)
    assert [e.step for e in exp.history.events() if e.kind == "crash"] == ["before_commit"]
    exp.final_reads(topic)
    events = exp.history.events()
    log = [e for e in events if e.kind == "final_read" and e.isolation_level == "read_uncommitted" and e.value_id]
    committed = [e for e in events if e.kind == "final_read" and e.isolation_level == "read_committed" and e.value_id]
    assert [(e.offset, e.value_id, e.outcome) for e in log] == \
        [(0, "tx1-1", "committed"), (1, "tx1-2", "committed"), (3, "tx1-3", "aborted"), (4, "tx1-4", "aborted")]
    assert [(e.offset, e.value_id, e.outcome) for e in committed] == [(0, "tx1-1", None), (1, "tx1-2", None)]
    described = describe_producers(bootstrap, topic)
    assert {e.producer_id for e in log} == set(described.producer_id) and len(described) == 1
    assert all(e.producer_epoch <= described.producer_epoch.iloc[0] for e in log)
    # tx1 never ended transaction 2 (no txn_end): only the log says it aborted. A read_committed read of offset 3
    # (written here by hand: Kafka never returns it) is an aborted read by the log's ABORT marker.
    assert not any(e.kind == "txn_end" and e.txn == 2 for e in events)
    assert exp.check(topic).ok
    exp.history.append("consume", "c", topic=topic, partition=0, offset=3, value_id="tx1-3",
                       isolation_level="read_committed")
    result = exp.check(topic)
    assert [(a.name, a.participant, a.offset) for a in result.anomalies] == [("aborted read", "c", 3)]
    assert "tx1's transaction 2" in result.anomalies[0].detail


def test_a_final_read_of_a_missing_topic_is_an_error(exp):
    with pytest.raises(TopicNotFoundError):
        exp.final_reads(f"no-such-topic-{uuid.uuid4().hex[:8]}")
