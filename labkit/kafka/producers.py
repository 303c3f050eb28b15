"""What the broker knows about producers: idempotent producer state per partition (DescribeProducers,
KIP-664) and transactions by ``transactional.id`` (DescribeTransactions). confluent-kafka has neither
call, so these use kafka-python's admin client."""

from __future__ import annotations

import pandas as pd
from kafka import KafkaAdminClient, TopicPartition

PRODUCER_COLUMNS = ["producer_id", "producer_epoch", "last_sequence", "current_transaction_start_offset"]


def describe_producers(bootstrap: str, topic: str, partition: int = 0) -> pd.DataFrame:
    """The partition leader's active producer state for ``topic``/``partition``: one row per producer
    id that wrote with idempotence, with its epoch and the last sequence number it wrote
    (sequence numbers count records from 0 per producer id and partition). Plain (non-idempotent)
    producers have no producer id and do not appear.

    Raises:
        kafka.errors.KafkaError: the broker refused (e.g. unknown topic).
    """
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        state = admin.describe_producers([TopicPartition(topic, partition)])[TopicPartition(topic, partition)]
    finally:
        admin.close()
    rows = [{c: getattr(p, c) for c in PRODUCER_COLUMNS} for p in state.active_producers]
    return pd.DataFrame(rows, columns=PRODUCER_COLUMNS).sort_values("producer_id", ignore_index=True)


def describe_transaction(bootstrap: str, transactional_id: str) -> dict:
    """The transaction coordinator's view of ``transactional_id``: ``{"state", "producer_id",
    "producer_epoch", "transaction_timeout_ms"}`` (state e.g. "Ongoing", "CompleteCommit", "CompleteAbort").

    Raises:
        kafka.errors.TransactionalIdNotFoundError: no producer ever called ``init_transactions`` with it.
    """
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        d = admin.describe_transactions([transactional_id])[transactional_id]
    finally:
        admin.close()
    return {"state": d.state.value, "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
            "transaction_timeout_ms": d.transaction_timeout_ms}
