"""Kafka's wire protocol without a Java client: the codec (big-endian primitives, KIP-482's compact encodings and
tagged fields: :class:`Reader`, :class:`Writer`) and a raw request client over a plain socket (:func:`call`, after
FindCoordinator: :func:`find_group_coordinator`), with the group describe request the lab sends itself
(ShareGroupDescribe, KIP-932; ConsumerGroupDescribe, KIP-848). The fault proxy, the share-group state reader
(:mod:`labkit.kafka.share_state`), the share reset, the transaction log decoder, the raw Fetch of
:mod:`labkit.kafka.logbatches` and the group protocol helpers all use it. Source: Kafka's protocol guide and the
message definitions in apache/kafka ``clients/src/main/resources/common/message``.
"""

from __future__ import annotations

import base64
import itertools
import socket
import struct
import time

from confluent_kafka import KafkaError

from labkit.core.errors import BrokerUnreachableError, LabkitError
from labkit.core.waiting import Deadline

_correlation = itertools.count(1)
#: ApiVersions' API key: its response header is v0 whatever the request's version (see :func:`call`).
API_VERSIONS_KEY = 18
#: The longest answer :func:`call` reads, in bytes. An answer's length is its first 4 bytes, written by whatever
#: listens on the port (the hub's live view probes, as root, ports an attendee's lab controls,
#: :mod:`labkit.hub.observed`), so a longer one is refused before any of it is read. The longest answer a request of
#: the lab asks for is the raw Fetch of :mod:`labkit.kafka.logbatches`: at most its ``FETCH_MAX_BYTES`` (4 MiB) of
#: records, as a first batch can exceed a Fetch's ``max_bytes`` only when it is larger than it (KIP-74) and the
#: broker's batches are at most its ``message.max.bytes`` (1 MiB by default, which the lab keeps); twice that leaves
#: room for every header. ApiVersions, FindCoordinator, the group describes and Metadata answer a few KiB.
MAX_RESPONSE_BYTES = 8 * 2**20


class WireError(LabkitError):
    """A request sent over a plain socket failed (the message names the request, the group and the error)."""


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


def call(address: str, api_key: int, version: int, body: bytes, timeout_s: float) -> Reader:
    """Send one flexible-version request (header v2) to ``address`` (``"host:port"``) and return a reader past the
    response header: v1, but v0 (no tagged fields) for ApiVersions (key 18), whose response header never changes so
    that a client can read it whatever version it sent (KIP-511; ``ApiKeys.API_VERSIONS``, Kafka's
    ``ApiVersionsResponse.json``). ``timeout_s``: the deadline of the whole call, in seconds (connect, send and the
    whole answer: an answer trickled byte by byte ends there too). An answer is at most :data:`MAX_RESPONSE_BYTES`
    long, read as it arrives (never more memory than the bytes received).

    Raises:
        BrokerUnreachableError: no whole answer from ``address`` within ``timeout_s`` (the bytes received named).
        WireError: the answer announces more than :data:`MAX_RESPONSE_BYTES` (or a negative length), or is not to
            this request.
    """
    deadline = Deadline(timeout_s)
    correlation = next(_correlation)
    header = Writer().pack(">h", api_key).pack(">h", version).pack(">i", correlation)
    client_id = b"labkit"
    payload = header.bytes() + struct.pack(">h", len(client_id)) + client_id + b"\x00" + body
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.settimeout(max(deadline.remaining_s(), 0.001))
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _recv(sock, 4, deadline))[0]
            if not 0 <= size <= MAX_RESPONSE_BYTES:
                raise WireError(f"the answer from {address} announces {size} bytes, not 0 to {MAX_RESPONSE_BYTES} "
                                f"(MAX_RESPONSE_BYTES, the most a Kafka broker's answer to these requests needs): "
                                "not a Kafka broker's answer")
            response = Reader(_recv(sock, size, deadline))
    except OSError as exc:  # TimeoutError included: the deadline passed (the bytes received named)
        raise BrokerUnreachableError(f"No whole answer from the Kafka broker at {address} within {timeout_s:g} s "
                                     f"({exc}); is it running?") from exc
    if response.int32() != correlation:
        raise WireError(f"the broker at {address} answered another request than the one sent")
    if api_key != API_VERSIONS_KEY:
        response.tags()
    return response


#: The most bytes one ``recv`` asks for: a long answer arrives in pieces of at most this.
_RECV_BYTES = 2**20


def _recv(sock: socket.socket, n: int, deadline: Deadline) -> bytes:
    """``n`` bytes from ``sock``, all before ``deadline``; raises TimeoutError (how many had come) when it passes."""
    chunks, got = [], 0
    while got < n:
        if deadline.expired():
            raise TimeoutError(f"{got} of {n} bytes within {deadline.timeout_s:g} s")
        sock.settimeout(max(deadline.remaining_s(), 0.001))
        try:
            chunk = sock.recv(min(n - got, _RECV_BYTES))
        except TimeoutError:
            raise TimeoutError(f"{got} of {n} bytes within {deadline.timeout_s:g} s") from None
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
        BrokerUnreachableError, WireError: see :func:`find_group_coordinator`; the group's error (e.g.
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
            raise WireError(f"{request} for group {gid!r}: {error_name(code)} ({message})")
        return out

    (group,) = r.compact_array(described)
    return group


def find_group_coordinator(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> str:
    """``"host:port"`` of the group coordinator of ``group_id`` (FindCoordinator v4, key type GROUP),
    retried until ``timeout_s`` while the coordinator is loading or not yet available.

    Raises:
        BrokerUnreachableError: no broker answers at the first bootstrap address.
        WireError: the broker kept answering with an error (named).
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
    raise WireError(f"FindCoordinator for group {group_id!r} failed within {timeout_s:g} s: {error}")
