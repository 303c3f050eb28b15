"""Read ShareAcknowledge requests and the broker's answers on a fault proxy.

KIP-932's ShareAcknowledge (API key 79) carries a share consumer's acknowledgements (ACCEPT, RELEASE, REJECT, and
KIP-1222's RENEW) by offset range; its response carries the broker's error code per partition. What a client reports
of an acknowledgement is the client's reading of that response; :class:`AckTap` reads the response itself. It is a
tap of :class:`~labkit.crashlab.proxy.FaultProxy` (``FaultProxy(..., tap=AckTap())``): clients that bootstrap from
the proxy send every request through it.

Versions read: ShareAcknowledgeRequest v1 and v2 (header v2; v2 adds ``IsRenewAck``) and ShareAcknowledgeResponse v1
and v2 (header v1; v2 adds ``AcquisitionLockTimeoutMs``), as apache/kafka's ``ShareAcknowledgeRequest.json`` and
``ShareAcknowledgeResponse.json`` define them ("validVersions": "1-2" in Kafka 4.4; v0 was 4.0's early access). A
request of another version raises :class:`ValueError`, which the proxy keeps in ``tap_errors``.
"""

from __future__ import annotations

import struct
import threading
import time

from labkit.kafka.wire import Reader, error_name

#: Kafka API key of ShareAcknowledge (``ShareAcknowledgeRequest.json``, KIP-932).
SHARE_ACKNOWLEDGE = 79
#: The ShareAcknowledge versions this tap reads.
VERSIONS = (1, 2)
#: AcknowledgeTypes on the wire (``ShareAcknowledgeRequest.json``: 0 Gap, 1 Accept, 2 Release, 3 Reject, 4 Renew).
ACK_TYPES = {0: "GAP", 1: "ACCEPT", 2: "RELEASE", 3: "REJECT", 4: "RENEW"}


def read_request(body: bytes) -> dict:
    """Decode a ShareAcknowledge request ``body`` (from its request header on, without the 4-byte size).

    Returns:
        ``{"correlation_id", "version", "client_id", "group", "member", "epoch", "acks"}``: ``epoch``, the share
        session epoch (-1 closes the session); ``acks``, ``[(partition, first offset, last offset, [type names])]``.
    Raises:
        ValueError: not a ShareAcknowledge request, or of a version not in :data:`VERSIONS`.
        struct.error, ValueError, IndexError: the body ends early.
    """
    api_key, version, correlation_id = struct.unpack(">hhi", body[:8])
    if api_key != SHARE_ACKNOWLEDGE or version not in VERSIONS:
        raise ValueError(f"not a ShareAcknowledge request of versions {VERSIONS}: API key {api_key} v{version}")
    r = Reader(body)
    r.pos = 8
    n = r.int16()
    client_id = r.raw(n).decode() if n >= 0 else None
    r.tags()  # request header v2
    group, member, epoch = r.compact_string(), r.compact_string(), r.int32()
    if version >= 2:
        r.int8()  # IsRenewAck

    def batch(r: Reader) -> tuple:
        first, last = r.int64(), r.int64()
        types = r.compact_array(lambda r: ACK_TYPES.get(r.int8(), "?"))
        r.tags()
        return first, last, types

    def partition(r: Reader) -> list:
        index = r.int32()
        batches = r.compact_array(batch)
        r.tags()
        return [(index, *b) for b in batches]

    def topic(r: Reader) -> list:
        r.uuid()
        parts = r.compact_array(partition)
        r.tags()
        return [b for p in parts for b in p]

    return {"correlation_id": correlation_id, "version": version, "client_id": client_id, "group": group,
            "member": member, "epoch": epoch, "acks": [b for t in r.compact_array(topic) for b in t]}


def read_response(body: bytes, version: int) -> dict:
    """Decode a ShareAcknowledge response ``body`` (from its correlation id on) to a request of ``version``.

    Returns:
        ``{"error", "partitions"}``: the top-level error name (``None`` for none) and
        ``{partition: error name or None}``.
    Raises:
        struct.error, ValueError, IndexError: the body ends early.
    """
    r = Reader(body)
    r.pos = 4
    r.tags()  # response header v1
    r.int32()  # ThrottleTimeMs
    error = error_name(r.int16())
    r.compact_string()
    if version >= 2:
        r.int32()  # AcquisitionLockTimeoutMs

    def partition(r: Reader) -> tuple:
        index, code = r.int32(), r.int16()
        r.compact_string()
        r.int32(), r.int32(), r.tags()  # CurrentLeader
        r.tags()
        return index, error_name(code)

    def topic(r: Reader) -> list:
        r.uuid()
        parts = r.compact_array(partition)
        r.tags()
        return parts

    return {"error": error, "partitions": dict(p for t in r.compact_array(topic) for p in t)}


class AckTap:
    """Record every ShareAcknowledge request a :class:`~labkit.crashlab.proxy.FaultProxy` forwards, and the broker's
    response to it: :attr:`acks`, one dict per request in the order of the responses, with what
    :func:`read_request` reads (``client_id``, ``group``, ``epoch``, ``acks``, ...), ``mono_ns`` and
    ``answered_ns`` (monotonic ns at the request and at its response) and what :func:`read_response` reads
    (``error``, ``partitions``). Other requests are let by. Thread-safe (the proxy calls it from two threads per
    connection)."""

    def __init__(self) -> None:
        self.acks: list[dict] = []
        self._asked: dict[tuple[int, int], dict] = {}  # (connection, correlation id) -> the request, decoded
        self._lock = threading.Lock()

    def request(self, conn_id: int, body: bytes) -> None:
        """Keep connection ``conn_id``'s request ``body`` if it is a ShareAcknowledge.

        Raises:
            see :func:`read_request`.
        """
        if struct.unpack(">h", body[:2])[0] != SHARE_ACKNOWLEDGE:
            return
        asked = read_request(body) | {"mono_ns": time.monotonic_ns()}
        with self._lock:
            self._asked[(conn_id, asked["correlation_id"])] = asked

    def response(self, conn_id: int, body: bytes) -> None:
        """Record connection ``conn_id``'s response ``body`` if it answers a kept ShareAcknowledge request.

        Raises:
            see :func:`read_response`.
        """
        with self._lock:
            asked = self._asked.pop((conn_id, struct.unpack(">i", body[:4])[0]), None)
        if asked is None:
            return
        answer = read_response(body, asked["version"])
        with self._lock:
            self.acks.append(asked | answer | {"answered_ns": time.monotonic_ns()})

    def answers(self, client_id: str) -> list[dict]:
        """The recorded requests of ``client_id`` that carried acknowledgements, with the broker's answers."""
        with self._lock:
            return [a for a in self.acks if a["client_id"] == client_id and a["acks"]]
