"""Share-group state as the broker keeps it (KIP-932), read without a Java client.

Two things confluent-kafka cannot show, in one small module:

* the records of ``__share_group_state``, where the share coordinator persists each share
  partition: ShareSnapshot (record type 0) and ShareUpdate (type 1) values, each a start offset
  (the SPSO) and state batches ``(first offset, last offset, delivery state, delivery count)``.
  ACQUIRED is never persisted. Framing: key = int16 record type + key struct (v0, not flexible);
  value = int16 version + value struct (flexible: KIP-482 compact encoding and tagged fields); a
  null value is a tombstone. Source: apache/kafka ``share-coordinator`` message definitions
  ``ShareSnapshotValue`` / ``ShareUpdateValue`` and ``CoordinatorRecordSerde`` (same in 4.3.1 and 4.4.0).
* two admin requests, sent to the group coordinator over a plain socket: DescribeShareGroupOffsets
  (API key 90, v1: SPSO and lag per share partition) and ShareGroupDescribe (API key 77, v1:
  members, their epochs and assignments), after FindCoordinator (API key 10, v4).

Delivery states are ``SharePartition``'s ``RecordState`` ids: 0 AVAILABLE, 1 ACQUIRED,
2 ACKNOWLEDGED, 3 ARCHIVING (4.4: on its way to the dead-letter queue, KIP-1191), 4 ARCHIVED.
"""

from __future__ import annotations

import base64
import itertools
import socket
import struct
import time
from dataclasses import dataclass

from confluent_kafka import KafkaError

from labkit.errors import BrokerUnreachableError, LabkitError
from labkit.waiting import Deadline

DELIVERY_STATES = {0: "AVAILABLE", 1: "ACQUIRED", 2: "ACKNOWLEDGED", 3: "ARCHIVING", 4: "ARCHIVED"}
STATE_TOPIC = "__share_group_state"
_correlation = itertools.count(1)


class ShareWireError(LabkitError):
    """A share-group admin request failed (the message names the request, the group and the error)."""


class Reader:
    """Reads Kafka's wire types from ``data``, big-endian, flexible (compact) encodings included."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int8(self) -> int:
        return self._unpack(">b")

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def raw(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        if len(out) != n:
            raise ValueError(f"truncated: wanted {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        self.pos += n
        return out

    def uuid(self) -> str:
        """A uuid as Kafka prints topic ids: base64url without padding."""
        return base64.urlsafe_b64encode(self.raw(16)).rstrip(b"=").decode()

    def string(self) -> str:
        """A non-flexible string: int16 length, UTF-8."""
        return self.raw(self.int16()).decode()

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1).decode()

    def compact_array(self, element) -> list:
        n = self.uvarint()
        return [] if n == 0 else [element(self) for _ in range(n - 1)]

    def tags(self) -> dict[int, bytes]:
        """A tagged-field section: tag to raw bytes."""
        return {self.uvarint(): self.raw(self.uvarint()) for _ in range(self.uvarint())}


class Writer:
    """Writes Kafka's wire types (the few the requests here need)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def pack(self, fmt: str, value: int) -> "Writer":
        self.parts.append(struct.pack(fmt, value))
        return self

    def uvarint(self, value: int) -> "Writer":
        out = bytearray()
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
        self.parts.append(bytes(out))
        return self

    def compact_string(self, text: str) -> "Writer":
        data = text.encode()
        self.uvarint(len(data) + 1)
        self.parts.append(data)
        return self

    def compact_array(self, items: list, element) -> "Writer":
        self.uvarint(len(items) + 1)
        for item in items:
            element(self, item)
        return self

    def no_tags(self) -> "Writer":
        return self.uvarint(0)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


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
def call(address: str, api_key: int, version: int, body: bytes, timeout_s: float) -> Reader:
    """Send one flexible-version request (header v2) to ``address`` (``"host:port"``) and return a reader past the
    response header (v1). ``timeout_s``: the connect and each read's deadline (s).

    Raises:
        BrokerUnreachableError: no answer from ``address`` within ``timeout_s``.
        ShareWireError: the answer is not to this request.
    """
    correlation = next(_correlation)
    header = Writer().pack(">h", api_key).pack(">h", version).pack(">i", correlation)
    client_id = b"labkit"
    payload = header.bytes() + struct.pack(">h", len(client_id)) + client_id + b"\x00" + body
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            response = Reader(_recv(sock, size))
    except OSError as exc:
        raise BrokerUnreachableError(f"No answer from the Kafka broker at {address} within {timeout_s:g} s "
                                     f"({exc}); is it running?") from exc
    if response.int32() != correlation:
        raise ShareWireError(f"the broker at {address} answered another request than the one sent")
    response.tags()
    return response


def _recv(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def error_name(code: int) -> str | None:
    """Kafka's name of error ``code`` (``Errors``), ``None`` for 0 (no error)."""
    return None if code == 0 else KafkaError(code).name()


def assignment(r: Reader) -> dict[str, list[int]]:
    """A member's Assignment struct in a ShareGroupDescribe or ConsumerGroupDescribe response (KIP-932, KIP-848):
    ``{topic: [partitions, sorted]}``."""
    def topic_partitions(r: Reader) -> tuple[str, list[int]]:
        r.uuid()
        name, parts = r.compact_string(), r.compact_array(Reader.int32)
        r.tags()
        return name, sorted(parts)

    out = dict(r.compact_array(topic_partitions))
    r.tags()
    return out


def describe_group(bootstrap: str, group_id: str, api_key: int, version: int, member, timeout_s: float) -> dict:
    """Send ShareGroupDescribe (API key 77) or ConsumerGroupDescribe (69) for ``group_id`` to its coordinator and
    read the one group back (the two responses share the layout around the members, KIP-932 and KIP-848):
    ``{"group_id", "state", "group_epoch", "assignment_epoch", "assignor", "members"}``, each member read by
    ``member(r)``. ``timeout_s``: the coordinator lookup's and each call's deadline (s).

    Raises:
        BrokerUnreachableError, ShareWireError: see :func:`find_group_coordinator`; the group's error (e.g.
            GROUP_ID_NOT_FOUND), named with the request.
    """
    request = {77: "ShareGroupDescribe", 69: "ConsumerGroupDescribe"}[api_key]
    address = find_group_coordinator(bootstrap, group_id, timeout_s)
    body = Writer().compact_array([group_id], Writer.compact_string).pack(">b", 0).no_tags().bytes()
    r = call(address, api_key, version, body, timeout_s)
    r.int32()  # throttle

    def described(r: Reader) -> dict:
        code, message, gid = r.int16(), r.compact_string(), r.compact_string()
        out = {"group_id": gid, "state": r.compact_string(), "group_epoch": r.int32(),
               "assignment_epoch": r.int32(), "assignor": r.compact_string(), "members": r.compact_array(member)}
        r.int32()  # authorized operations
        r.tags()
        if code:
            raise ShareWireError(f"{request} for group {gid!r}: {error_name(code)} ({message})")
        return out

    (group,) = r.compact_array(described)
    return group


def find_group_coordinator(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> str:
    """``"host:port"`` of the group coordinator of ``group_id`` (FindCoordinator v4, key type GROUP),
    retried until ``timeout_s`` while the coordinator is loading or not yet available.

    Raises:
        BrokerUnreachableError: no broker answers at the first bootstrap address.
        ShareWireError: the broker kept answering with an error (named).
    """
    address = bootstrap.split(",")[0]
    deadline, error = Deadline(timeout_s), None
    while not deadline.expired():
        body = Writer().pack(">b", 0).compact_array([group_id], Writer.compact_string).no_tags().bytes()
        r = call(address, 10, 4, body, timeout_s)
        r.int32()  # throttle

        def coordinator(r: Reader) -> tuple:
            out = (r.compact_string(), r.int32(), r.compact_string(), r.int32(), r.int16(), r.compact_string())
            r.tags()
            return out

        (_, _, host, port, code, message), = r.compact_array(coordinator)
        if code == 0:
            return f"{host}:{port}"
        error = f"{error_name(code)} ({message})"
        time.sleep(0.2)
    raise ShareWireError(f"FindCoordinator for group {group_id!r} failed within {timeout_s:g} s: {error}")


def describe_share_group_offsets(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> list[dict]:
    """SPSO and lag of every share partition of ``group_id`` (DescribeShareGroupOffsets v1, KIP-932,
    lag from KIP-1226): one dict per partition ``{"topic", "topic_id", "partition", "start_offset",
    "leader_epoch", "lag", "error"}`` (offsets in records; ``error`` a Kafka error name or ``None``).

    Raises:
        BrokerUnreachableError, ShareWireError: see :func:`find_group_coordinator`; a group-level error.
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
            raise ShareWireError(f"DescribeShareGroupOffsets for group {gid!r}: {error_name(code)} ({message})")

    r.compact_array(group_result)
    return rows


def describe_share_group(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> dict:
    """The share group as its coordinator describes it (ShareGroupDescribe v1, KIP-932):
    ``{"group_id", "state", "group_epoch", "assignment_epoch", "assignor", "members": [{"member_id",
    "member_epoch", "client_id", "assignment": {topic: [partitions]}}]}``.

    Raises:
        BrokerUnreachableError, ShareWireError: see :func:`find_group_coordinator`; a group-level
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
