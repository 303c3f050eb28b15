"""Notebook 00: its opening question (:data:`QUESTION`, answered by :func:`aborted_outcome` from the run), where a
transaction's state lives (``__transaction_state``, read when ``begin_transaction`` and the first send happen), and its
exercise: predict what each isolation level returns of a partition, then check on the broker."""

from __future__ import annotations

import time

import pandas as pd
from confluent_kafka import KafkaException, Producer

from labkit.broker.probe import KAFKA_LOG
from labkit.core.errors import LabkitError
from labkit.kafka.api_versions import API_NAMES, api_name, broker_api_versions
from labkit.kafka.logbatches import read_log
from labkit.kafka.records import create_topic, produce, read_topic
from labkit.kafka.txnlog import transaction_log
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.learn.predictions import Question

LEVELS = ("read_committed", "read_uncommitted")

#: The notebook's opening question: where an aborted transaction's records are and who reads them (KIP-98).
QUESTION = Question(
    "00", "a producer writes three records in a transaction, then aborts it. Where are those records, and who reads "
          "them?",
    {"gone": "Not in the log: the abort removes them",
     "nobody": "In the log, but no consumer returns them",
     "uncommitted_only": "In the log; only a read_uncommitted consumer returns them",
     "everyone": "In the log, and every consumer returns them"},
    {"gone": "An abort deletes nothing: the log is append-only, so the records stay and the transaction coordinator "
             "has an ABORT marker (a control record) written after them (KIP-98).",
     "nobody": "The broker keeps and serves aborted records like any other; the consumer's isolation.level decides: "
               "read_uncommitted returns them, read_committed skips them.",
     "everyone": "A read_committed consumer skips them: with each fetch the partition leader lists the aborted "
                 "transactions in what it returns (FetchResponse's AbortedTransactions, KIP-98), and the consumer "
                 "drops their records."})


def aborted_outcome(log: pd.DataFrame, reads: dict[str, pd.DataFrame], aborted: list[str]) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from what it read: ``log`` the partition's records
    (:func:`labkit.kafka.logbatches.read_log`), ``reads`` ``{isolation level: read_topic's frame}`` of the same
    partition, ``aborted`` the aborted transaction's values.

    Raises:
        LabkitError: the run shows none of the choices (e.g. read_committed returned an aborted record but
            read_uncommitted did not): the lab's failure, named.
    """
    in_log = set(aborted) <= set(log.value[~log.control])
    seen = {level: bool(set(aborted) & set(reads[level].value)) for level in LEVELS}
    outcome = {(False, False, False): "gone", (True, False, False): "nobody", (True, False, True): "uncommitted_only",
               (True, True, True): "everyone"}.get((in_log, seen["read_committed"], seen["read_uncommitted"]))
    if outcome is None:
        raise LabkitError(f"the run fits no choice: aborted records in the log {in_log}, returned by {seen}")
    return outcome


def begin_then_send(bootstrap: str, topic: str, transactional_id: str, wait_s: float = 1.0,
                    timeout_s: float = 30.0) -> dict[str, list[str]]:
    """The states the transaction coordinator has written to ``__transaction_state`` for ``transactional_id``
    (a fresh one) at three moments of one transaction on a confluent-kafka producer: after
    ``init_transactions()``, ``wait_s`` (s) after ``begin_transaction()``, and once the transaction's first
    record (to ``topic``, partition 0) is acknowledged. The transaction is then aborted.

    ``begin_transaction`` is local to the client (librdkafka ``rd_kafka_txn_op_begin_transaction`` only sets
    its own state; Kafka's protocol has no BeginTransaction request): the coordinator learns of the transaction
    from the first AddPartitionsToTxn, sent with the first record.

    Returns:
        ``{"after init_transactions": [...], "after begin_transaction": [...], "after the first send": [...]}``,
        each the list of state names (``labkit.kafka.txnlog.STATES``) in log order.
    Raises:
        confluent_kafka.KafkaException: the producer failed (e.g. the broker is unreachable).
    """
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "logger": KAFKA_LOG})
    seen = {}

    def states(moment: str) -> None:
        seen[moment] = list(transaction_log(bootstrap, transactional_id).state)

    producer.init_transactions(timeout_s)
    states("after init_transactions")
    producer.begin_transaction()
    time.sleep(wait_s)
    states("after begin_transaction")
    errors = []
    producer.produce(topic, value=b"b1", partition=0, on_delivery=lambda err, msg: err and errors.append(err))
    if producer.flush(timeout_s) or errors:
        raise KafkaException(errors[0] if errors else f"the first record to {topic} unacknowledged after {timeout_s:g} s")
    states("after the first send")
    producer.abort_transaction(timeout_s)
    return seen


def transaction_requests(bootstrap: str, timeout_s: float = 5.0) -> pd.DataFrame:
    """The requests that take part in a transaction, as the broker at ``bootstrap`` answers an ApiVersions request
    (:func:`labkit.kafka.api_versions.broker_api_versions`): InitProducerId, and every request whose name says Txn or
    Transaction (KIP-98, KIP-664), named by Kafka's ``ApiKeys`` (:data:`labkit.kafka.api_versions.API_NAMES`).

    Returns:
        One row per request, by API key: ``request``, ``api_key``, ``versions`` ("min-max" the broker accepts).
        ``attrs["supported"]`` counts every API key the broker answered; ``attrs["unnamed"]`` lists those the name
        table does not know (a later release's), which could hide any request, a BeginTransaction too.
    Raises:
        labkit.core.errors.BrokerUnreachableError: no answer within ``timeout_s`` (s).
        labkit.kafka.wire.WireError: the broker answered ApiVersions with an error.
    """
    apis = broker_api_versions(bootstrap, timeout_s)
    rows = [{"request": api_name(key), "api_key": key, "versions": f"{low}-{high}"}
            for key, (low, high) in apis.items()
            if api_name(key) == "InitProducerId" or "Txn" in api_name(key) or "Transaction" in api_name(key)]
    frame = pd.DataFrame(rows, columns=["request", "api_key", "versions"])
    frame.attrs.update(supported=len(apis), unnamed=[key for key in apis if key not in API_NAMES])
    return frame


def quiz_topic(bootstrap: str, timeout_s: float = 30.0) -> str:
    """A fresh one-partition topic holding, in this order: a transaction of ``x1, x2`` that commits (its COMMIT
    marker at offset 2), a plain (non-transactional) record ``p1``, and a transaction of ``y1, y2`` that aborts (its
    ABORT marker at offset 6). Each transaction's marker is waited for (up to ``timeout_s`` s): the coordinator writes
    it after answering the producer's EndTxn. Returns its name.

    Raises:
        TimeoutError: a marker was not in the partition within ``timeout_s``.
    """
    topic = create_topic(bootstrap, "tour-quiz")
    produce(bootstrap, topic, ["x1", "x2"], transactional_id=f"quiz-{topic}", outcome="commit", timeout_s=timeout_s,
            wait_marker=True)
    produce(bootstrap, topic, ["p1"])
    produce(bootstrap, topic, ["y1", "y2"], transactional_id=f"quiz-{topic}", outcome="abort", timeout_s=timeout_s,
            wait_marker=True)
    return topic


@marked
def check_prediction(bootstrap: str, topic: str, answer: object) -> "Verdict":
    """Check ``answer``, ``{"read_committed": [values], "read_uncommitted": [values]}`` in log order, against
    what consumers at each isolation level really read from ``topic`` (see :func:`quiz_topic`). A right answer's
    verdict names the control records as the partition's batches hold them
    (:func:`labkit.kafka.logbatches.read_log`)."""
    if (v := unanswered(answer, 'a dict {"read_committed": [...], "read_uncommitted": [...]} of values')):
        return v
    if not isinstance(answer, dict) or set(answer) != set(LEVELS):
        return Verdict("wrong", 'The answer is a dict with exactly two keys, "read_committed" and "read_uncommitted".')
    if not all(isinstance(answer[level], (list, tuple)) for level in LEVELS):
        return Verdict("wrong", "Each key's value is a list of values in log order, e.g. [\"x1\", \"x2\"].")
    real = {level: list(read_topic(bootstrap, topic, level).value) for level in LEVELS}
    wrong = [level for level in LEVELS if list(answer[level]) != real[level]]
    if not wrong:
        log = read_log(bootstrap, topic)
        markers = ", ".join(f"{m} at offset {o}" for o, m in zip(log.offset[log.control], log.marker[log.control]))
        return Verdict("right", f"read_committed returned {real['read_committed']} and read_uncommitted "
                                f"{real['read_uncommitted']}: the aborted records are in the log, only read_committed "
                                f"skips them, and nobody reads the control records the partition's batches hold "
                                f"({markers}).")
    hints = {"read_committed": "read_committed returns every committed record and every non-transactional one, "
                               "and skips what an aborted transaction wrote.",
             "read_uncommitted": "read_uncommitted returns every record in the log, aborted ones included; only "
                                 "the control records (COMMIT/ABORT markers) are never returned."}
    return Verdict("wrong", f"Your {' and '.join(wrong)} list{'s are' if len(wrong) > 1 else ' is'} not what the "
                            f"broker returned. " + " ".join(hints[level] for level in wrong))
