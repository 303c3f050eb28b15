"""Share-group state as the broker keeps it (KIP-932), read without a Java client.

Two things confluent-kafka cannot show (the wire codec and the request client are :mod:`labkit.kafka.wire`'s):

* the records of ``__share_group_state``, where the share coordinator persists each share
  partition: ShareSnapshot (record type 0) and ShareUpdate (type 1) values, each a start offset
  (the SPSO) and state batches ``(first offset, last offset, delivery state, delivery count)``.
  ACQUIRED is never persisted. Framing: key = int16 record type + key struct (v0, not flexible);
  value = int16 version + value struct (flexible: KIP-482 compact encoding and tagged fields); a
  null value is a tombstone. Source: apache/kafka ``share-coordinator`` message definitions
  ``ShareSnapshotValue`` / ``ShareUpdateValue`` and ``CoordinatorRecordSerde`` (same in 4.3.2 and 4.4.0).
* two admin requests, sent to the group coordinator over a plain socket: DescribeShareGroupOffsets
  (API key 90, v1: SPSO and lag per share partition) and ShareGroupDescribe (API key 77, v1:
  members, their epochs and assignments), after FindCoordinator (API key 10, v4).

Delivery states are ``SharePartition``'s ``RecordState`` ids: 0 AVAILABLE, 1 ACQUIRED,
2 ACKNOWLEDGED, 3 ARCHIVING (4.4: on its way to the dead-letter queue, KIP-1191), 4 ARCHIVED.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from labkit.kafka.wire import Reader, WireError, Writer, assignment, call, describe_group, error_name, find_group_coordinator

DELIVERY_STATES = {0: "AVAILABLE", 1: "ACQUIRED", 2: "ACKNOWLEDGED", 3: "ARCHIVING", 4: "ARCHIVED"}
STATE_TOPIC = "__share_group_state"
@dataclass(frozen=True)
class StateBatch:
    """Persisted state of offsets ``first_offset..last_offset`` (inclusive) of a share partition."""

    first_offset: int
    last_offset: int
    state: str
    delivery_count: int


@dataclass(frozen=True)
class StateRecord:
    """One ``__share_group_state`` record: ``kind`` "snapshot", "update" or "tombstone".

    ``start_offset`` is the SPSO (-1 in an update that leaves it as it is); ``batches`` hold the
    in-flight records' persisted states; epochs and ``delivery_complete_count`` as Kafka writes them
    (``None`` where the record type has no such field).
    """

    kind: str
    group_id: str
    topic_id: str
    partition: int
    start_offset: int | None = None
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int | None = None
    state_epoch: int | None = None
    leader_epoch: int | None = None
    delivery_complete_count: int | None = None


def _state_batch(r: Reader) -> StateBatch:
    first, last, state, count = r.int64(), r.int64(), r.int8(), r.int16()
    r.tags()
    return StateBatch(first, last, DELIVERY_STATES.get(state, f"UNKNOWN({state})"), count)


def decode_state_record(key: bytes, value: bytes | None) -> StateRecord:
    """Decode one ``__share_group_state`` record (its raw key and value bytes).

    Raises:
        ValueError: not a share-state record (unknown record type or value version), or truncated.
    """
    k = Reader(key)
    record_type = k.int16()
    if record_type not in (0, 1):
        raise ValueError(f"record type {record_type} is not ShareSnapshot (0) or ShareUpdate (1)")
    group_id, topic_id, partition = k.string(), k.uuid(), k.int32()
    if value is None:
        return StateRecord("tombstone", group_id, topic_id, partition)
    v = Reader(value)
    version = v.int16()
    if version != 0:
        raise ValueError(f"share state value version {version}: labkit decodes version 0 (Kafka 4.3/4.4)")
    if record_type == 0:
        snapshot_epoch, state_epoch, leader_epoch = v.int32(), v.int32(), v.int32()
        start_offset = v.int64()
        v.int64(), v.int64()  # create and write timestamps
    else:
        snapshot_epoch, leader_epoch, state_epoch = v.int32(), v.int32(), None
        start_offset = v.int64()
    batches = tuple(v.compact_array(_state_batch))
    tags = v.tags()
    complete = struct.unpack(">i", tags[0])[0] if 0 in tags else None
    return StateRecord("snapshot" if record_type == 0 else "update", group_id, topic_id, partition, start_offset,
                       batches, snapshot_epoch, state_epoch, leader_epoch, complete)


# -- requests -------------------------------------------------------------------------------------
def describe_share_group_offsets(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> list[dict]:
    """SPSO and lag of every share partition of ``group_id`` (DescribeShareGroupOffsets v1, KIP-932,
    lag from KIP-1226): one dict per partition ``{"topic", "topic_id", "partition", "start_offset",
    "leader_epoch", "lag", "error"}`` (offsets in records; ``error`` a Kafka error name or ``None``).

    Raises:
        BrokerUnreachableError, WireError: see :func:`find_group_coordinator`; a group-level error.
    """
    address = find_group_coordinator(bootstrap, group_id, timeout_s)

    def group(w: Writer, gid: str) -> None:
        w.compact_string(gid).uvarint(0).no_tags()  # Topics: null, every topic of the group

    r = call(address, 90, 1, Writer().compact_array([group_id], group).no_tags().bytes(), timeout_s)
    r.int32()
    rows: list[dict] = []

    def partition(r: Reader, topic: str, topic_id: str) -> None:
        row = {"topic": topic, "topic_id": topic_id, "partition": r.int32(), "start_offset": r.int64(),
               "leader_epoch": r.int32(), "lag": r.int64(), "error": error_name(r.int16())}
        r.compact_string()
        r.tags()
        rows.append(row)

    def topic(r: Reader) -> None:
        name, topic_id = r.compact_string(), r.uuid()
        r.compact_array(lambda r: partition(r, name, topic_id))
        r.tags()

    def group_result(r: Reader) -> None:
        gid = r.compact_string()
        r.compact_array(topic)
        code, message = r.int16(), r.compact_string()
        r.tags()
        if code:
            raise WireError(f"DescribeShareGroupOffsets for group {gid!r}: {error_name(code)} ({message})")

    r.compact_array(group_result)
    return rows


def describe_share_group(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> dict:
    """The share group as its coordinator describes it (ShareGroupDescribe v1, KIP-932):
    ``{"group_id", "state", "group_epoch", "assignment_epoch", "assignor", "members": [{"member_id",
    "member_epoch", "client_id", "assignment": {topic: [partitions]}}]}``.

    Raises:
        BrokerUnreachableError, WireError: see :func:`find_group_coordinator`; a group-level
            error (e.g. GROUP_ID_NOT_FOUND before any member joined).
    """
    def member(r: Reader) -> dict:
        out = {"member_id": r.compact_string()}
        r.compact_string()  # rack
        out["member_epoch"], out["client_id"] = r.int32(), r.compact_string()
        r.compact_string()  # host
        r.compact_array(Reader.compact_string)  # subscribed topics
        out["assignment"] = assignment(r)
        r.tags()
        return out

    return describe_group(bootstrap, group_id, 77, 1, member, timeout_s)
