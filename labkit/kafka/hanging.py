"""Hanging transactions, found and aborted as an operator would with ``kafka-transactions.sh find-hanging``
and ``abort`` (KIP-664).

A transaction hangs on a partition when the partition leader still holds it open (DescribeProducers: the
producer's ``current_transaction_start_offset`` >= 0, so the last stable offset (LSO) stays at that offset, below
the high watermark, and read_committed consumers stop there) while its transaction coordinator has no open
transaction of that producer on that partition (DescribeTransactions: the ``transactional.id`` is complete,
empty, of another producer id or epoch, or does not list the partition). No marker will ever come; only an
administrative abort (WriteTxnMarkers with an ABORT marker, sent to the partition leader) lets the LSO move on,
and it aborts the records, even those of a transaction whose ``commit_transaction`` returned.

confluent-kafka has none of these requests; kafka-python's admin client does.
"""

from __future__ import annotations

import time

import pandas as pd
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import AbortTransactionSpec

from labkit.kafka.records import high_watermarks, last_stable_offsets

HANGING_COLUMNS = ["topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch", "start_offset",
                   "last_stable_offset", "high_watermark", "transactional_id", "coordinator_state"]
_OPEN = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}


def open_on_partitions(bootstrap: str, topic: str) -> pd.DataFrame:
    """Every transaction the partition leaders of ``topic`` hold open, with the coordinator's view of it:
    one row per (partition, producer id), columns :data:`HANGING_COLUMNS` (``transactional_id`` and
    ``coordinator_state`` are ``None`` when no coordinator lists the producer id).

    Raises:
        TopicNotFoundError: no topic ``topic`` (:func:`labkit.kafka.records.end_offsets`).
        kafka.errors.KafkaError: the broker refused a request.
    """
    lso, hw = last_stable_offsets(bootstrap, topic), high_watermarks(bootstrap, topic)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        states = admin.describe_producers([TopicPartition(topic, p) for p in sorted(hw)])
        rows = [{"topic": topic, "partition": tp.partition, "producer_id": prod.producer_id,
                 "producer_epoch": prod.producer_epoch, "coordinator_epoch": prod.coordinator_epoch,
                 "start_offset": prod.current_transaction_start_offset, "last_stable_offset": lso[tp.partition],
                 "high_watermark": hw[tp.partition]}
                for tp, state in states.items() for prod in state.active_producers
                if prod.current_transaction_start_offset >= 0]
        pids = sorted({r["producer_id"] for r in rows})
        listed = {t.producer_id: t.transactional_id for txns in admin.list_transactions(
            producer_id_filters=pids).values() for t in txns} if pids else {}
        described = admin.describe_transactions(sorted(set(listed.values()))) if listed else {}
    finally:
        admin.close()
    for r in rows:
        tid = listed.get(r["producer_id"])
        desc = described.get(tid)
        r["transactional_id"] = tid
        r["coordinator_state"] = None if desc is None else desc.state.value
        r["_coordinator_open"] = desc is not None and desc.state.value in _OPEN and \
            desc.producer_id == r["producer_id"] and TopicPartition(topic, r["partition"]) in desc.topic_partitions
    frame = pd.DataFrame(rows, columns=HANGING_COLUMNS + ["_coordinator_open"])
    return frame.sort_values(["partition", "producer_id"], ignore_index=True)


def open_at_coordinator(bootstrap: str, topic: str) -> list[str]:
    """The ``transactional.id`` of each transaction open on a partition of ``topic`` that its coordinator still
    holds open (Ongoing or Prepare*), sorted: the transactions that will end, by their producer, by a new instance's
    ``init_transactions`` or by the coordinator after ``transaction.timeout.ms``. A hanging one is not among them
    (:func:`find_hanging`).

    Raises:
        kafka.errors.KafkaError: the broker refused a request (e.g. unknown topic).
    """
    found = open_on_partitions(bootstrap, topic)
    return sorted(set(found.transactional_id[found._coordinator_open]))


def find_hanging(bootstrap: str, topic: str, confirm_after_s: float = 1.0) -> pd.DataFrame:
    """The hanging transactions of ``topic``: open on a partition, not open at the coordinator, seen so twice
    ``confirm_after_s`` seconds apart (a transaction whose markers are on their way is open on the partition
    for a moment after the coordinator completed it). Columns :data:`HANGING_COLUMNS`; empty if none.

    Raises:
        kafka.errors.KafkaError: the broker refused a request (e.g. unknown topic).
    """
    def candidates() -> pd.DataFrame:
        found = open_on_partitions(bootstrap, topic)
        return found[~found.pop("_coordinator_open")]

    first = candidates()
    if first.empty:
        return first.reset_index(drop=True)
    time.sleep(confirm_after_s)
    again = candidates()
    key = ["partition", "producer_id", "producer_epoch", "start_offset"]
    return again.merge(first[key], on=key).reset_index(drop=True)


def abort_hanging(bootstrap: str, hanging: pd.DataFrame) -> int:
    """Abort each transaction of ``hanging`` (rows of :func:`find_hanging`) on its partition: an ABORT marker
    written by the partition leader (WriteTxnMarkers, as ``kafka-transactions.sh abort`` sends it). The LSO
    then moves past it; its records are aborted. Returns how many were aborted.

    Raises:
        kafka.errors.KafkaError: the leader refused (e.g. the producer epoch moved on meanwhile).
    """
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        for r in hanging.itertuples():
            admin.abort_transaction(AbortTransactionSpec(TopicPartition(r.topic, r.partition), int(r.producer_id),
                                                         int(r.producer_epoch), int(r.coordinator_epoch)))
    finally:
        admin.close()
    return len(hanging)
