"""The transaction coordinator's own log, ``__transaction_state``, read and decoded (KIP-98).

The transaction coordinator keeps each ``transactional.id``'s state as **ordinary records** of the internal
topic ``__transaction_state`` (one record per state change, compacted by key): the key is the
``transactional.id``, the value its producer id and epoch, its state and the partitions the transaction has
added. The COMMIT and ABORT **control records** are not there: WriteTxnMarkers writes them into the data
partitions (and ``__consumer_offsets``) the transaction touched.

Framing (apache/kafka ``transaction-coordinator`` message definitions ``TransactionLogKey`` and
``TransactionLogValue``, the same in 4.3.2 and 4.4.0): key = int16 version (0) + ``TransactionalId``
string; value = int16 version + ``ProducerId`` int64, ``ProducerEpoch`` int16, ``TransactionTimeoutMs``
int32, ``TransactionStatus`` int8, ``TransactionPartitions`` (nullable array of topic + partition ids),
``TransactionLastUpdateTimestampMs`` int64, ``TransactionStartTimestampMs`` int64; version 1 is flexible
(KIP-482 compact encoding, tagged fields). A null value is a tombstone. State ids are
``org.apache.kafka.coordinator.transaction.TransactionState``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit.kafka.records import read_topic
from labkit.kafka.wire import Reader

if TYPE_CHECKING:
    import pandas as pd

TXN_STATE_TOPIC = "__transaction_state"
#: ``TransactionState`` ids as the coordinator writes them.
STATES = {0: "EMPTY", 1: "ONGOING", 2: "PREPARE_COMMIT", 3: "PREPARE_ABORT", 4: "COMPLETE_COMMIT",
          5: "COMPLETE_ABORT", 6: "DEAD", 7: "PREPARE_EPOCH_FENCE"}
COLUMNS = ["offset", "transactional_id", "producer_id", "producer_epoch", "state", "partitions"]


def decode(key: bytes, value: bytes | None) -> dict | None:
    """One ``__transaction_state`` record as ``{transactional_id, producer_id, producer_epoch, state,
    partitions}`` (``state`` a :data:`STATES` name, ``partitions`` a sorted list of ``"topic-N"``), or
    ``None`` for a tombstone.

    Raises:
        ValueError: the record is not a TransactionLogKey/Value of version 0 or 1 (a newer Kafka's format).
    """
    k = Reader(key)
    if (key_version := k.int16()) != 0:
        raise ValueError(f"TransactionLogKey version {key_version}: labkit reads version 0")
    transactional_id = k.string()
    if value is None:
        return None
    v = Reader(value)
    if (version := v.int16()) not in (0, 1):
        raise ValueError(f"TransactionLogValue version {version}: labkit reads versions 0 and 1")
    flexible = version == 1
    producer_id, producer_epoch = v.int64(), v.int16()
    v.int32()  # TransactionTimeoutMs
    state = STATES.get(v.int8(), "UNKNOWN")

    def topic_partitions(r: Reader) -> list[str]:
        topic = r.compact_string() if flexible else r.string()
        ids = r.compact_array(Reader.int32) if flexible else [r.int32() for _ in range(r.int32())]
        if flexible:
            r.tags()
        return [f"{topic}-{p}" for p in ids]

    if flexible:
        groups = v.compact_array(topic_partitions)
    else:
        count = v.int32()
        groups = [topic_partitions(v) for _ in range(max(count, 0))]
    return {"transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "state": state, "partitions": sorted(p for group in groups for p in group)}


def transaction_log(bootstrap: str, transactional_id: str, timeout_s: float = 15.0) -> "pd.DataFrame":
    """Every record the transaction coordinator has written to ``__transaction_state`` for
    ``transactional_id``, in log order: one row per state change (columns :data:`COLUMNS`; ``offset`` is the
    record's offset in its ``__transaction_state`` partition). Read from the beginning of the topic with a plain
    consumer (no group offsets committed); the log is compacted, so on a long-lived broker older state changes
    may be gone.

    Raises:
        TimeoutError: the end of ``__transaction_state`` was not reached within ``timeout_s`` (s).
        ValueError: a record in a format labkit does not read (see :func:`decode`).
    """
    import pandas as pd

    rows = []
    for record in read_topic(bootstrap, TXN_STATE_TOPIC, "read_uncommitted", timeout_s, raw=True).itertuples():
        entry = decode(record.key, record.value)
        if entry is not None and entry["transactional_id"] == transactional_id:
            rows.append({"offset": record.offset, **entry})
    return pd.DataFrame(rows, columns=COLUMNS)
