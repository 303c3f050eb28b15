"""A partition's log as the broker stores it: its record batches, read with a raw Fetch request.

A consumer never shows what this shows: which producer id and epoch wrote each record, whether its batch was
transactional, and the **control records** (the COMMIT and ABORT markers a transaction coordinator has the
partition leader write with WriteTxnMarkers when a transaction ends), which both isolation levels skip. Here they
are read from the batches themselves, not inferred from offsets no producer was given.

How: Metadata (API key 3, v12) for the partition's leader, then Fetch (API key 1, v12: topic names, flexible
encoding) at READ_UNCOMMITTED (isolation level 0), from ``start`` until the high watermark of the first answer, up to
:data:`FETCH_MAX_BYTES` per request; both sent over a plain socket (:func:`labkit.kafka.wire.call`) and the
batches parsed by kafka-python's ``kafka.record.MemoryRecords``. confluent-kafka and Kafka's Java consumer return
records without their batch headers and never return control records.

Source: Kafka's record batch format v2 (apache/kafka ``DefaultRecordBatch``: baseOffset, producerId,
producerEpoch, attributes bit 4 isTransactional, bit 5 isControlBatch), the control record's key (``ControlRecordType``:
version int16, type int16, 0 ABORT, 1 COMMIT) and value (``EndTransactionMarker``: version int16, coordinator epoch
int32), all in ``org.apache.kafka.common.record.internal`` of kafka-clients 4.4 (``common.record`` before); KIP-98
(Exactly Once Delivery and Transactional Messaging), "Message format" and "Control messages".
A transaction's outcome is the first control record of its producer id after its records in the partition: one
producer id has at most one transaction open per partition (KIP-98), and the coordinator writes the marker into
every partition the transaction touched.
"""

from __future__ import annotations

import time

import pandas as pd
from kafka.record import MemoryRecords

from labkit.core.errors import BrokerUnreachableError, LabkitError, TopicNotFoundError
from labkit.core.waiting import Deadline
from labkit.kafka.wire import Reader, Writer, call, error_name

#: The columns of :func:`read_log`, in order.
LOG_COLUMNS = ["offset", "producer_id", "producer_epoch", "transactional", "control", "marker", "value",
               "base_offset", "outcome"]
#: Bytes asked for per Fetch (the partition's and the response's maximum); a batch larger than this still comes
#: whole (KIP-74).
FETCH_MAX_BYTES = 4 * 1024 * 1024
#: ``ControlRecordType`` ids (apache/kafka ``org.apache.kafka.common.record.internal.ControlRecordType``); a data
#: partition only ever holds ABORT and COMMIT, the others are KRaft's metadata log's.
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
_OUTCOMES = {"COMMIT": "committed", "ABORT": "aborted"}
#: Errors of a partition whose leader is moving or not serving it yet (a topic just created).
_NOT_LEADING_YET = {"UNKNOWN_TOPIC_OR_PART", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE"}
_METADATA, _FETCH = 3, 1


class LogReadError(LabkitError):
    """The partition leader refused the Fetch (the message names the topic, the partition and Kafka's error)."""


def read_log(bootstrap: str, topic: str, partition: int = 0, *, start: int = 0,
             timeout_s: float = 10.0) -> pd.DataFrame:
    """Every record of ``topic``/``partition`` from offset ``start`` to the high watermark (as the leader reported it
    in its first Fetch answer), control records included, with the headers of the batch that holds it. One partition
    per call; offsets are counted in records, as Kafka counts them.

    Args:
        start: the first offset to return (a Fetch returns whole batches; records of a batch before ``start`` are
            left out).
        timeout_s: the deadline of the whole read (s): each connection and answer waits at most what is left of it.
    Returns:
        One row per record, by offset; columns :data:`LOG_COLUMNS`:

        * ``offset`` (int): the record's offset.
        * ``producer_id``, ``producer_epoch`` (int): of its batch; -1 for a producer without idempotence.
        * ``transactional`` (bool): its batch is transactional (data written in a transaction, or a marker).
        * ``control`` (bool): a control record.
        * ``marker`` (str | None): a control record's type, "COMMIT" or "ABORT" (:data:`CONTROL_TYPES`); else None.
        * ``value`` (str | None): a data record's value as UTF-8 text (None for a null value and for a control
          record).
        * ``base_offset`` (int): the first offset of its batch.
        * ``outcome`` (str | None): for a transactional data record, how its transaction ended as the log says it:
          "committed" or "aborted", from the next control record of the same producer id in the partition; None while
          no marker follows (the transaction is open, or its marker is at or past the high watermark read), and for
          non-transactional and control records.

        ``frame.attrs`` holds ``high_watermark``, ``last_stable_offset`` and ``log_start_offset`` (offsets) from the
        first Fetch answer.
    Raises:
        BrokerUnreachableError: no broker at ``bootstrap`` (nor the leader) answered within the deadline (the message
            names the address).
        TopicNotFoundError: the broker has no topic ``topic``.
        ValueError: the topic has no partition ``partition``.
        LogReadError: the leader answered with an error, e.g. OFFSET_OUT_OF_RANGE for a ``start`` past the high
            watermark or before the log start offset; or its partition had no serving leader within the deadline.
        kafka.errors.UnsupportedCodecError: a batch compressed with lz4, snappy or zstd, whose Python library is not
            installed (the lab's producers do not compress: librdkafka's ``compression.codec`` and the Java client's
            ``compression.type`` default to none; gzip is read).
    """
    deadline = Deadline(timeout_s)
    offset, end, attrs, rows, leader = start, None, {}, [], None
    while end is None or offset < end:
        leader = leader or _leader(bootstrap, topic, partition, deadline)
        part = _fetch(leader, topic, partition, offset, deadline)
        if part["error"] in _NOT_LEADING_YET:  # ask the metadata again: the leader moved, or is not serving yet
            leader = None
            _give_up_if(deadline, f"{topic}/{partition}: {part['error']} until the deadline ({timeout_s:g} s)")
            continue
        if part["error"]:
            raise LogReadError(f"Fetch of {topic}/{partition} at offset {offset} from {leader}: {part['error']}"
                               + (" (the offset is outside the log: past its high watermark or before its start)"
                                  if part["error"] == "OFFSET_OUT_OF_RANGE" else ""))
        if end is None:
            end = part["high_watermark"]
            attrs = {k: part[k] for k in ("high_watermark", "last_stable_offset", "log_start_offset")}
        after = offset
        for batch in _batches(part["records"]):
            for record in batch["records"]:
                if start <= record["offset"] < end:
                    rows.append(record)
            after = max(after, batch["next_offset"])
        if after == offset and offset < end:
            _give_up_if(deadline, f"{topic}/{partition}: no complete batch at offset {offset} until the deadline")
        offset = after
    rows.sort(key=lambda row: row["offset"])
    columns = {c: pd.Series([row[c] for row in rows], dtype=_DTYPES[c]) for c in LOG_COLUMNS[:-1]}
    frame = pd.DataFrame(columns)
    frame["outcome"] = pd.Series(_outcomes(frame), dtype=object)
    frame.attrs.update(attrs)
    return frame


#: Column dtypes: text columns are ``object`` so that a missing text is ``None`` (pandas 3 would infer ``str``,
#: with NaN for it).
_DTYPES = {"offset": "int64", "producer_id": "int64", "producer_epoch": "int64", "transactional": bool,
           "control": bool, "marker": object, "value": object, "base_offset": "int64", "outcome": object}


def _give_up_if(deadline: Deadline, what: str) -> None:
    """Raise LogReadError(``what``) past ``deadline``; else wait a moment before the caller asks again."""
    if deadline.expired():
        raise LogReadError(what)
    time.sleep(0.1)


def _outcomes(frame: pd.DataFrame) -> list[str | None]:
    """Per row: a transactional data record's outcome from the next control record of its producer id."""
    outcome: list[str | None] = [None] * len(frame)
    pending: dict[int, list[int]] = {}
    for i, (pid, transactional, control, marker) in enumerate(
            zip(frame.producer_id, frame.transactional, frame.control, frame.marker)):
        if control:
            for j in pending.pop(pid, []):
                outcome[j] = _OUTCOMES.get(marker)
        elif transactional:
            pending.setdefault(pid, []).append(i)
    return outcome


def _batches(records: bytes | None) -> list[dict]:
    """The complete record batches of a Fetch answer's records (a last, partial one is left out), each
    ``{"next_offset", "records": [row dicts]}``.

    Raises:
        LogReadError: a batch of message format v0/v1 (no producer id; Kafka 4 writes v2 only, KIP-724) or a
            batch whose CRC does not match.
    """
    out, memory = [], MemoryRecords(records or b"")
    while (batch := memory.next_batch()) is not None:
        if batch.magic < 2:
            raise LogReadError(f"a batch of message format v{batch.magic} at offset {batch.base_offset}: only v2 "
                               "batches carry a producer id")
        if not batch.validate_crc():
            raise LogReadError(f"the batch at offset {batch.base_offset} fails its CRC check")
        control, rows = batch.is_control_batch, []
        for record in batch:
            marker = CONTROL_TYPES.get(record.type, f"UNKNOWN({record.type})") if control else None
            value = None if control or record.value is None else record.value.decode(errors="replace")
            rows.append({"offset": record.offset, "producer_id": batch.producer_id,
                         "producer_epoch": batch.producer_epoch, "transactional": bool(batch.is_transactional),
                         "control": bool(control), "marker": marker, "value": value,
                         "base_offset": batch.base_offset})
        out.append({"next_offset": batch.base_offset + batch.last_offset_delta + 1, "records": rows})
    return out


# -- requests -------------------------------------------------------------------------------------
def _leader(bootstrap: str, topic: str, partition: int, deadline: Deadline) -> str:
    """``"host:port"`` of the partition's leader (Metadata v12, auto-creation off), asked of each bootstrap address
    in turn until one answers; while the partition has no leader yet, asked again until the deadline."""
    while True:
        r, address = _metadata(bootstrap, topic, deadline)
        r.int32()  # throttle

        def broker(r: Reader) -> tuple[int, str]:
            node, host, port = r.int32(), r.compact_string(), r.int32()
            r.compact_string()  # rack
            r.tags()
            return node, f"{host}:{port}"

        brokers = dict(r.compact_array(broker))
        r.compact_string(), r.int32()  # cluster id, controller id

        def partition_entry(r: Reader) -> tuple[int, int, int]:
            code, index, leader = r.int16(), r.int32(), r.int32()
            r.int32()  # leader epoch
            r.compact_array(Reader.int32), r.compact_array(Reader.int32), r.compact_array(Reader.int32)
            r.tags()
            return index, leader, code

        def topic_entry(r: Reader) -> tuple:
            code, name = r.int16(), r.compact_string()
            r.uuid(), r.int8()  # topic id, internal
            parts = r.compact_array(partition_entry)
            r.int32()  # authorized operations
            r.tags()
            return code, name, parts

        (code, _, parts), = r.compact_array(topic_entry)
        error = error_name(code)
        if error == "UNKNOWN_TOPIC_OR_PART":
            raise TopicNotFoundError(f"topic {topic!r} does not exist on the broker at {address}: check the name "
                                     "(create_topic returns the unique name it gave the topic)")
        leaders = {index: (leader, error_name(pcode)) for index, leader, pcode in parts}
        if error is None and partition not in leaders:
            raise ValueError(f"topic {topic!r} has partitions {sorted(leaders)}, not {partition}")
        leader, perror = leaders.get(partition, (-1, error))
        if leader >= 0 and leader in brokers:
            return brokers[leader]
        _give_up_if(deadline, f"{topic}/{partition} has no leader ({error or perror}) within {deadline.timeout_s:g} s")


def _metadata(bootstrap: str, topic: str, deadline: Deadline) -> tuple[Reader, str]:
    def topic_request(w: Writer, name: str) -> None:
        w.parts.append(bytes(16))  # topic id: zero, the name says which
        w.compact_string(name).no_tags()

    body = Writer().compact_array([topic], topic_request).pack(">b", 0).pack(">b", 0).no_tags().bytes()
    failures = []
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        try:
            return call(address, _METADATA, 12, body, _left(deadline)), address
        except BrokerUnreachableError as exc:
            failures.append(str(exc))
    raise BrokerUnreachableError(" ".join(failures) or f"no bootstrap address in {bootstrap!r}")


def _fetch(leader: str, topic: str, partition: int, offset: int, deadline: Deadline) -> dict:
    """One Fetch v12 of ``topic``/``partition`` from ``offset`` at READ_UNCOMMITTED, no wait, no fetch session:
    ``{"error", "high_watermark", "last_stable_offset", "log_start_offset", "records"}``."""
    def partition_request(w: Writer, _: object) -> None:
        w.pack(">i", partition).pack(">i", -1).pack(">q", offset).pack(">i", -1).pack(">q", -1)
        w.pack(">i", FETCH_MAX_BYTES).no_tags()  # partition, current leader epoch, offset, last fetched epoch,
        # log start offset (a consumer's -1), partition max bytes

    def topic_request(w: Writer, name: str) -> None:
        w.compact_string(name).compact_array([None], partition_request).no_tags()

    body = (Writer().pack(">i", -1).pack(">i", 0).pack(">i", 1).pack(">i", FETCH_MAX_BYTES)  # replica, wait, min, max
            .pack(">b", 0).pack(">i", 0).pack(">i", -1)  # READ_UNCOMMITTED, no session (id 0, epoch -1: final)
            .compact_array([topic], topic_request).compact_array([], None).compact_string("").no_tags().bytes())
    r = call(leader, _FETCH, 12, body, _left(deadline))
    r.int32()  # throttle
    code = r.int16()
    r.int32()  # session id
    if code:
        raise LogReadError(f"Fetch of {topic}/{partition} from {leader}: {error_name(code)}")

    def aborted(r: Reader) -> tuple[int, int]:
        out = (r.int64(), r.int64())
        r.tags()
        return out

    def partition_response(r: Reader) -> dict:
        out = {"partition": r.int32(), "error": error_name(r.int16()), "high_watermark": r.int64(),
               "last_stable_offset": r.int64(), "log_start_offset": r.int64()}
        r.compact_array(aborted)  # null at READ_UNCOMMITTED: the leader lists aborted transactions for read_committed
        r.int32()  # preferred read replica
        n = r.uvarint()
        out["records"] = r.raw(n - 1) if n else None
        r.tags()
        return out

    def topic_response(r: Reader) -> list[dict]:
        r.compact_string()
        parts = r.compact_array(partition_response)
        r.tags()
        return parts

    (part,), = r.compact_array(topic_response)
    return part


def _left(deadline: Deadline) -> float:
    """What is left of ``deadline`` for one call (s), at least 0.1."""
    return max(0.1, deadline.remaining_s())
