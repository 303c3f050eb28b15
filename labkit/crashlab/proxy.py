"""A fault-injecting TCP proxy between Kafka clients and the broker's PROXIED listener.

The broker advertises the proxy's own address on that listener, so a client that bootstraps from
:attr:`FaultProxy.bootstrap_servers` sends every later request through the proxy too. The proxy
forwards bytes as they come, but reads the broker's side as Kafka frames (a 4-byte big-endian size,
then the response), so it can lose a whole response: the request reached the broker and took effect,
and the client never hears so. That is what makes a producer retry a write that is already in the log.
It can also corrupt one record of a Produce request on its way in, so that the broker refuses that batch
with a retriable error while the requests after it succeed: what reorders a producer's retries.

A tap (:class:`Tap`) reads the frames as they pass, without changing them: a frame the tap cannot read is forwarded
all the same, and what the tap raised is kept in :attr:`FaultProxy.tap_errors`.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from typing import Protocol

from labkit.broker.ports import HOST
from labkit.core.waiting import wait_until
from labkit.kafka.wire import Writer

#: Kafka API key of Produce requests (the Kafka protocol's ApiKeys.PRODUCE).
PRODUCE = 0
#: The most tap errors a proxy keeps (:attr:`FaultProxy.tap_errors`); later ones are counted only.
TAP_ERRORS_KEPT = 100


class Tap(Protocol):
    """What a :class:`FaultProxy` shows each forwarded frame to, from the proxy's threads (two per connection, so
    a tap must be thread-safe). ``conn_id`` numbers the proxy's connections (1, 2, ...); ``body`` is the frame
    without its 4-byte size: a request from its request header on (API key, version, correlation id, ...), a
    response from its correlation id on. A call sees the frame before it is forwarded, after any fault changed it;
    a frame the proxy loses is not shown."""

    def request(self, conn_id: int, body: bytes) -> None:
        """Read one request the client sent."""

    def response(self, conn_id: int, body: bytes) -> None:
        """Read one response the broker sent."""


class FaultProxy:
    """A TCP proxy on 127.0.0.1 with faults a learner can switch on.

    Args:
        listen_port: port to listen on; for an :class:`~labkit.broker.EmbeddedBroker` started with
            ``proxy_listener=True``, its ``proxy_port``.
        target_port: the broker's PROXIED listener port (``proxied_listener_port``).
        tap: a :class:`Tap` shown every frame the proxy forwards, or ``None``. What it raises is kept in
            :attr:`tap_errors` (the first :data:`TAP_ERRORS_KEPT`; :attr:`tap_error_count` counts them all) and the
            frame is forwarded all the same.
    Use :meth:`for_broker` for both at once; :meth:`close` (or ``with``) stops it.

    The faults and the counters are shared by the caller's thread and the proxy's threads (two per connection):
    every read and write of them holds one lock, and a response's fate and its count change in one step.
    """

    def __init__(self, listen_port: int, target_port: int, tap: Tap | None = None) -> None:
        self.listen_port, self.target_port, self.tap = listen_port, target_port, tap
        self._tap_errors: list[str] = []
        self._tap_error_count = 0
        self._conn_ids = itertools.count(1)
        self._lock = threading.Lock()
        self._drop, self._drop_apis, self._black_hole = 0, (PRODUCE,), False
        self._forwarded = self._dropped = self._corrupted = 0
        # (record bytes to find, where the value starts in them, seconds to hold the response)
        self._corrupt: tuple[bytes, int, float] | None = None
        self._conns: list[socket.socket] = []
        self._server = socket.create_server((HOST, listen_port))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True, name="faultproxy-accept").start()

    @classmethod
    def for_broker(cls, broker, tap: Tap | None = None) -> "FaultProxy":
        """A proxy in front of ``broker`` (started with ``proxy_listener=True``), with ``tap`` if given.

        Raises:
            ValueError: the broker has no PROXIED listener.
        """
        if not broker.proxy_port:
            raise ValueError("this broker has no PROXIED listener: start it with EmbeddedBroker(proxy_listener=True)")
        return cls(broker.proxy_port, broker.proxied_listener_port, tap)

    @property
    def bootstrap_servers(self) -> str:
        """The address clients bootstrap from to stay behind the proxy."""
        return f"{HOST}:{self.listen_port}"

    # -- counters ---------------------------------------------------------------------------
    @property
    def forwarded_responses(self) -> int:
        """Responses passed on to the clients so far."""
        with self._lock:
            return self._forwarded

    @property
    def dropped_responses(self) -> int:
        """Responses lost so far, by :meth:`drop_responses` or :meth:`black_hole`."""
        with self._lock:
            return self._dropped

    @property
    def corrupted_requests(self) -> int:
        """Produce requests :meth:`corrupt_record` corrupted so far."""
        with self._lock:
            return self._corrupted

    @property
    def tap_errors(self) -> list[str]:
        """What the tap raised so far, oldest first, at most :data:`TAP_ERRORS_KEPT`: one
        ``"<request|response> api <API key> correlation <id>: <repr(exception)>"`` each (a response's API key is
        that of its request, ``None`` if unknown)."""
        with self._lock:
            return list(self._tap_errors)

    @property
    def tap_error_count(self) -> int:
        """How many times the tap raised so far, those beyond :attr:`tap_errors` included."""
        with self._lock:
            return self._tap_error_count

    # -- faults -----------------------------------------------------------------------------
    def drop_responses(self, n: int = 1, apis: tuple[int, ...] = (PRODUCE,)) -> int:
        """Lose the next ``n`` responses from the broker (whole Kafka frames), on any connection, to
        requests whose API key is in ``apis`` (default: Produce, key 0; it replaces the API keys of drops
        still pending). The requests themselves reach the broker and take effect.

        Returns:
            The :attr:`dropped_responses` count at which these ``n`` responses, and every drop asked for
            before them, are lost.
        """
        with self._lock:
            self._drop, self._drop_apis = self._drop + n, apis
            return self._dropped + self._drop

    def lose_responses(self, n: int = 1, timeout_s: float = 30.0) -> None:
        """Lose the responses to the next ``n`` Produce requests, one at a time: returns once each
        of them was lost (after any drop asked for before, by another thread too).

        Args:
            n: how many responses to lose.
            timeout_s: how long to wait for each of them, s.
        Raises:
            TimeoutError: no Produce request came through the proxy within ``timeout_s`` seconds.
        """
        for _ in range(n):
            lost_at = self.drop_responses(1)
            if not wait_until(lambda: self.dropped_responses >= lost_at, timeout_s, 0.01):
                self.heal()
                raise TimeoutError(f"no Produce request came through the proxy in {timeout_s:g} s: "
                                   f"is the producer running, with bootstrap.servers={self.bootstrap_servers}?")

    def corrupt_record(self, value: bytes, hold_response_s: float = 0.0) -> None:
        """Corrupt the next Produce request that carries a record whose value is ``value``: flip one bit of that
        value, so its record batch fails the broker's CRC check (apache/kafka ``UnifiedLog.analyzeAndValidateRecords``)
        and the broker refuses it with CORRUPT_MESSAGE, a retriable error (``CorruptRecordException extends
        RetriableException``; librdkafka retries it as ``INVALID_MSG``), while the requests after it succeed. The
        response to it is held ``hold_response_s`` seconds, and so is every response after it on that connection
        (they stay in order, as TCP keeps them): time for the client to send its next requests before it learns of
        the refusal. The record is found by its bytes in record format v2: value length (a zigzag varint), value, and
        a header count of 0, so it must be uncompressed and without headers. One request only; :meth:`heal` cancels
        it if none came."""
        with self._lock:
            length = Writer().uvarint(2 * len(value)).bytes()  # a zigzag varint: 2n for n >= 0
            self._corrupt = (length + value + b"\x00", len(length), hold_response_s)

    def black_hole(self, on: bool = True) -> None:
        """Forward nothing in either direction while ``on``; connections stay open, bytes are lost."""
        with self._lock:
            self._black_hole = on

    def cut(self) -> int:
        """Close every open connection now (clients see a disconnect). Returns how many were cut."""
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            _close(c)
        return len(conns) // 2

    def heal(self) -> None:
        """Switch every fault off."""
        with self._lock:
            self._drop, self._corrupt, self._black_hole = 0, None, False

    def close(self) -> None:
        """Stop listening and close every connection."""
        self.closed = True
        _close(self._server)
        self.cut()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pumps ------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                if self.closed:
                    return
                continue
            try:
                broker = socket.create_connection((HOST, self.target_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._conns += [client, broker]
            in_flight: dict[int, int] = {}  # correlation id -> API key, for this connection
            held: dict[int, float] = {}  # correlation id -> seconds to hold its response
            conn_id = next(self._conn_ids)
            threading.Thread(target=self._requests, args=(client, broker, in_flight, held, conn_id),
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(broker, client, in_flight, held, conn_id),
                             daemon=True).start()

    def _show(self, kind: str, conn_id: int, body: bytes, api_key: int | None, correlation_id: int) -> None:
        """Show ``body`` to the tap's ``kind`` ("request" or "response"); keep what it raises."""
        if self.tap is None:
            return
        try:
            getattr(self.tap, kind)(conn_id, body)
        except Exception as exc:  # the frame is forwarded all the same; the error is kept, not lost
            with self._lock:
                self._tap_error_count += 1
                if len(self._tap_errors) < TAP_ERRORS_KEPT:
                    self._tap_errors.append(f"{kind} api {api_key} correlation {correlation_id}: {exc!r}")

    def _requests(self, src: socket.socket, dst: socket.socket, in_flight: dict[int, int],
                  held: dict[int, float], conn_id: int) -> None:
        try:
            while True:
                header = _recv_exactly(src, 4)
                body = _recv_exactly(src, struct.unpack(">i", header)[0])
                api_key, _version, correlation_id = struct.unpack(">hhi", body[:8])
                with self._lock:
                    in_flight[correlation_id] = api_key
                    forward = not self._black_hole
                if api_key == PRODUCE:
                    body = self._maybe_corrupt(body, correlation_id, held)
                if forward:
                    self._show("request", conn_id, body, api_key, correlation_id)
                    dst.sendall(header + body)
        except OSError:
            pass
        _close(src), _close(dst)

    def _maybe_corrupt(self, body: bytes, correlation_id: int, held: dict[int, float]) -> bytes:
        with self._lock:
            if self._corrupt is None or (at := body.find(self._corrupt[0])) < 0:
                return body
            at += self._corrupt[1]  # the value's first byte
            held[correlation_id], self._corrupt = self._corrupt[2], None
            self._corrupted += 1
        return body[:at] + bytes([body[at] ^ 1]) + body[at + 1:]

    def _responses(self, src: socket.socket, dst: socket.socket, in_flight: dict[int, int],
                   held: dict[int, float], conn_id: int) -> None:
        try:
            while True:
                header = _recv_exactly(src, 4)
                body = _recv_exactly(src, struct.unpack(">i", header)[0])
                correlation_id = struct.unpack(">i", body[:4])[0]
                with self._lock:
                    api_key, hold_s = in_flight.pop(correlation_id, None), held.pop(correlation_id, 0)
                if hold_s > 0:
                    time.sleep(hold_s)
                with self._lock:  # the response's fate and its count in one step
                    drop = self._black_hole or (self._drop > 0 and api_key in self._drop_apis)
                    if drop:
                        self._dropped += 1
                        if not self._black_hole:
                            self._drop -= 1
                if drop:
                    continue
                self._show("response", conn_id, body, api_key, correlation_id)
                dst.sendall(header + body)
                with self._lock:
                    self._forwarded += 1
        except OSError:
            pass
        _close(src), _close(dst)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionResetError("peer closed")
        buf += chunk
    return bytes(buf)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
