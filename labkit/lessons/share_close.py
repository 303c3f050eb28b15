"""Notebook 06, two claims settled on the real broker, on both clients (issue 36, items 1 and 8):

* :func:`close_after_poll`: in implicit mode, does ``close()`` accept the records of the last poll? A consumer polls
  once and closes right after that poll's work (no further poll); the broker's persisted states and a second consumer
  tell what became of those records.
* :func:`late_accept`: a consumer ACCEPTs records after its acquisition lock expired and another consumer already
  acknowledged them (the share-partition start offset moved past them). :class:`AckTap`, a fault proxy that reads the
  ShareAcknowledge requests and responses passing through it, shows what the broker itself answered; the history
  shows what each client reported.

Both run each client of :data:`labkit.crashlab.registry.CLIENTS` on a topic and a share group of its own.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pandas as pd

from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.proxy import FaultProxy
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.wire import Reader, error_name
from labkit.lessons.share_groups import _observed, _settle, deliveries, persisted, share_group, share_offsets

#: Kafka API key of ShareAcknowledge (``ShareAcknowledgeRequest.json``, KIP-932).
SHARE_ACKNOWLEDGE = 79
#: AcknowledgeTypes on the wire (``ShareAcknowledgeRequest.json``: 0 Gap, 1 Accept, 2 Release, 3 Reject, 4 Renew).
ACK_TYPES = {0: "GAP", 1: "ACCEPT", 2: "RELEASE", 3: "REJECT", 4: "RENEW"}


class _Tee:
    """A socket whose ``sendall`` shows each frame to ``seen`` first; everything else is the socket's."""

    def __init__(self, sock: socket.socket, seen) -> None:
        self._sock, self._seen = sock, seen

    def sendall(self, data: bytes) -> None:
        try:
            self._seen(data)
        except Exception:  # a frame the tap cannot read is still forwarded untouched
            pass
        self._sock.sendall(data)

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


class AckTap(FaultProxy):
    """A :class:`~labkit.crashlab.proxy.FaultProxy` (no fault switched on) that also records every ShareAcknowledge
    request it forwards and the broker's response to it: :attr:`acks`, one dict per request, in the order of the
    responses, with ``client_id``, ``group``, ``epoch`` (the share session epoch; -1 closes the session), ``acks``
    (``[(partition, first offset, last offset, [type names])]``), ``error`` (top level) and ``partitions``
    (``{partition: error name or None}``). Clients reach it through :attr:`bootstrap_servers`."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        super().__init__(listen_port, target_port)
        self.acks: list[dict] = []
        self._asked: dict[tuple[int, int], dict] = {}  # (connection, correlation id) -> the request, decoded
        self._tap_lock = threading.Lock()

    def _requests(self, src, dst, in_flight, held) -> None:
        super()._requests(src, _Tee(dst, lambda frame: self._request(id(in_flight), frame[4:])), in_flight, held)

    def _responses(self, src, dst, in_flight, held) -> None:
        super()._responses(src, _Tee(dst, lambda frame: self._response(id(in_flight), frame[4:])), in_flight, held)

    def _request(self, conn: int, body: bytes) -> None:
        api_key, version, correlation_id = struct.unpack(">hhi", body[:8])
        if api_key != SHARE_ACKNOWLEDGE:
            return
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

        acks = [b for t in r.compact_array(topic) for b in t]
        with self._tap_lock:
            self._asked[(conn, correlation_id)] = {"mono_ns": time.monotonic_ns(), "client_id": client_id,
                                                   "group": group, "member": member, "epoch": epoch,
                                                   "version": version, "acks": acks}

    def _response(self, conn: int, body: bytes) -> None:
        correlation_id = struct.unpack(">i", body[:4])[0]
        with self._tap_lock:
            asked = self._asked.pop((conn, correlation_id), None)
        if asked is None:
            return
        r = Reader(body)
        r.pos = 4
        r.tags()  # response header v1
        r.int32()  # ThrottleTimeMs
        error = error_name(r.int16())
        r.compact_string()
        if asked["version"] >= 2:
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

        partitions = dict(p for t in r.compact_array(topic) for p in t)
        with self._tap_lock:
            self.acks.append({**asked, "answered_ns": time.monotonic_ns(), "error": error, "partitions": partitions})

    def answers(self, client_id: str) -> list[dict]:
        """The ShareAcknowledge requests of ``client_id`` that carried acknowledgements, with the broker's answers."""
        with self._tap_lock:
            return [a for a in self.acks if a["client_id"] == client_id and a["acks"]]


def ack_tap(broker=None) -> AckTap:
    """An :class:`AckTap` in front of ``broker`` (an :class:`~labkit.broker.EmbeddedBroker` started with
    ``proxy_listener=True``), or else of the broker :func:`labkit.connect` found, on the port its PROXIED listener
    advertises (the kernel's own fault proxy, if one is open, is closed first: :func:`labkit.fault_proxy` opens it
    again). Close it when done.

    Raises:
        LabkitError: that broker has no PROXIED listener.
    """
    if broker is not None:
        return AckTap.for_broker(broker)
    from labkit.lab import connection

    connection.connect(quiet=True)
    if connection._proxied is None:
        raise LabkitError("This broker has no PROXIED listener for the acknowledgement tap. Unset LABKIT_BOOTSTRAP to "
                          "use the lab broker, or use docker-compose.yml and set LABKIT_PROXIED=9095:9094.")
    if connection._proxy is not None and not connection._proxy.closed:
        connection._proxy.close()
    return AckTap(listen_port=connection._proxied[1], target_port=connection._proxied[0])


def _states_since(exp: Experiment, topic: str, offsets: list[int], since_ns: int) -> dict[int, tuple]:
    """The last ``(state, delivery_count)`` the observer saw persisted for each of ``offsets`` at or after
    ``since_ns`` (monotonic, ns)."""
    seen = {}
    for e in exp.history.events():
        if e.kind == "share_state" and e.topic == topic and e.mono_ns >= since_ns:
            for o in range(e.offset, e.last_offset + 1):
                if o in offsets:
                    seen[o] = (e.state, e.delivery_count)
    return seen


def close_after_poll(exp: Experiment, clients: tuple[str, ...] = CLIENTS, records: int = 4,
                     within_s: float = 120.0) -> dict:
    """Implicit acknowledgement at ``close()``, once per client of ``clients`` (a topic and a share group each, all at
    once): a consumer (``close-<client>``, ``share.acknowledgement.mode=implicit``) gets the ``records`` records (one
    produce batch) in one poll and is closed right after that poll (the role's ``max_polls=1``: no further poll). The
    broker's persisted state of those offsets is awaited; then one more record (``marker-...``) is written and a
    second consumer (``again-<client>``, explicit ACCEPTs) reads the group until it has the marker: it gets the
    first consumer's records too if they were given back.

    Returns:
        ``{client: {"topic", "group", "first", "second", "offsets", "after_close"}}``: ``offsets``, the offsets the
        first consumer got; ``after_close``, ``{offset: (state, delivery count)}`` the broker persisted after its
        delivery, before the second consumer started.
    Raises:
        TimeoutError: a step did not happen within ``within_s``.
    """
    runs = {}
    for client in clients:
        topic, group = share_group(exp, f"close-{client}", records)
        runs[client] = {"topic": topic, "group": group, "observer": _observed(exp, topic, group)}
    for client, run in runs.items():
        run["first"] = exp.participant(f"close-{client}", "share_consumer", client=client, topic=run["topic"],
                                       group_id=run["group"], ack_mode="implicit", max_polls=1,
                                       first_ms=int(within_s * 1000)).start()
    for client, run in runs.items():
        first = run["first"]
        first.wait(within_s)
        got = deliveries(exp, run["topic"]).query("consumer == @first.name")
        run["offsets"] = sorted(got.offset)
        if first.status != "finished" or not run["offsets"]:
            raise RuntimeError(f"{first.name} ended {first.status} with offsets {run['offsets']}: see "
                               f"{first.stderr_log}")
        since = min(e.mono_ns for e in exp.history.events() if e.kind == "delivered" and e.participant == first.name)
        wait_for(lambda: set(_states_since(exp, run["topic"], run["offsets"], since)) == set(run["offsets"]),
                 f"the broker persisted no state for {first.name}'s records after its close", within_s)
        run["after_close"] = _states_since(exp, run["topic"], run["offsets"], since)
    for client, run in runs.items():
        exp.participant(f"marker-{client}", "producer", topic=run["topic"], iterations=1, batch=1).start().wait(60)
        run["second"] = exp.participant(f"again-{client}", "share_consumer", client=client, topic=run["topic"],
                                        group_id=run["group"], idle_ms=3000, first_ms=int(within_s * 1000)).start()
    for client, run in runs.items():
        second = run["second"]
        wait_for(lambda: any(e.kind == "delivered" and e.participant == second.name
                             and e.value_id.startswith(f"marker-{client}") for e in exp.history.events()),
                 f"{second.name} never got the marker record", within_s)
        second.wait(within_s)
    for i, run in enumerate(runs.values()):
        _settle(run.pop("observer"), 1.5 if i == 0 else 0)
    return runs


def close_summary(exp: Experiment, runs: dict) -> pd.DataFrame:
    """One row per client of :func:`close_after_poll` (``runs``, what it returned): ``polled`` (the offsets the first
    consumer got, in its one poll), ``acknowledge calls`` (its ``acknowledge()`` calls: none, implicit mode),
    ``after close`` (what the broker persisted for them then: ``"STATE ×count"`` per offset), ``second consumer got``
    (the delivery counts the second consumer received for those offsets) and ``final`` (the last persisted state and
    delivery count of each)."""
    rows = []
    for client, run in runs.items():
        log = deliveries(exp, run["topic"])
        again = log[(log.consumer == run["second"].name) & log.offset.isin(run["offsets"])]
        acks = [e for e in exp.history.events() if e.participant == run["first"].name and e.kind == "acknowledged"]
        final = persisted(exp, run["topic"]).set_index("offset")
        rows.append((client, run["offsets"], len(acks),
                     [f"{s} ×{c}" for _, (s, c) in sorted(run["after_close"].items())],
                     sorted(again.delivery_count.tolist()),
                     [f"{final.loc[o, 'state']} ×{final.loc[o, 'delivery_count']}" for o in run["offsets"]]))
    return pd.DataFrame(rows, columns=["client", "polled", "acknowledge calls", "after close", "second consumer got",
                                       "final"]).set_index("client")


def _acknowledged(exp: Experiment, topic: str, records: int) -> bool:
    """Whether the broker persisted every one of ``topic``'s first ``records`` offsets ACKNOWLEDGED."""
    frame = persisted(exp, topic)
    return set(frame.offset) >= set(range(records)) and set(frame.query("offset < @records").state) == {"ACKNOWLEDGED"}


def late_accept(exp: Experiment, tap: AckTap, clients: tuple[str, ...] = CLIENTS, records: int = 2,
                within_s: float = 120.0) -> dict:
    """A late ACCEPT of records another consumer has already acknowledged, once per client of ``clients`` (a topic
    and a share group each, all at once), every consumer behind ``tap``: consumer A (``late-A-<client>``) gets the
    ``records`` records and is paused (SIGSTOP) before it acknowledges; B (``late-B-<client>``) gets them once A's
    acquisition lock expired, ACCEPTs them and commits; once the broker has persisted them ACKNOWLEDGED (B's ACCEPT
    moved the share-partition start offset past them), A is resumed and ACCEPTs them (``commit_sync`` /
    ``commitSync``): late.

    Returns:
        ``{client: {"topic", "group", "a", "b", "records", "offsets_at_resume"}}``: ``offsets_at_resume``, the
        ``(SPSO, lag)`` DescribeShareGroupOffsets reported when A was resumed (the reported SPSO may lag behind).
    Raises:
        TimeoutError: a step did not happen within ``within_s``.
    """
    runs = {}
    for client in clients:
        topic, group = share_group(exp, f"late-{client}", records)
        runs[client] = {"topic": topic, "group": group, "records": records,
                        "observer": _observed(exp, topic, group)}
    hold = {"after_poll": 8000}  # a window to pause A in before it acknowledges
    for client, run in runs.items():
        run["a"] = exp.participant(f"late-A-{client}", "share_consumer", client=client, topic=run["topic"],
                                   group_id=run["group"], bootstrap=tap.bootstrap_servers, idle_ms=3000,
                                   sleep_at=hold, first_ms=int(within_s * 1000)).start()
    for client, run in runs.items():
        a = run["a"]
        wait_for(lambda: a.counters()["delivered"] >= records, f"{a.name} never got the {records} records", within_s)
        a.pause()
        run["b"] = exp.participant(f"late-B-{client}", "share_consumer", client=client, topic=run["topic"],
                                   group_id=run["group"], bootstrap=tap.bootstrap_servers, idle_ms=3000,
                                   first_ms=int(within_s * 1000)).start()
    for client, run in runs.items():
        a, b = run["a"], run["b"]
        wait_for(lambda: b.counters()["ack_committed"] >= records, f"{b.name} never committed the records", within_s)
        wait_for(lambda: _acknowledged(exp, run["topic"], records),
                 f"the broker never persisted B's ACCEPT of {run['topic']}'s records", within_s)
        run["offsets_at_resume"] = share_offsets(exp.bootstrap, run["group"], run["topic"])
        a.resume()
    for run in runs.values():
        a, b = run["a"], run["b"]
        wait_for(lambda: a.counters()["ack_committed"] >= records, f"{a.name} never acknowledged after its resume",
                 within_s)
        a.wait(within_s)
        b.wait(within_s)
    for i, run in enumerate(runs.values()):
        _settle(run.pop("observer"), 1.5 if i == 0 else 0)
    return runs


def late_accept_summary(exp: Experiment, runs: dict, tap: AckTap) -> pd.DataFrame:
    """One row per client of :func:`late_accept`: ``A's deliveries`` and ``B's deliveries`` (delivery counts),
    ``A reported`` (each late ACCEPT's result as A's client reported it: ``"ACCEPT: ok"`` or ``"ACCEPT: ERROR"``),
    ``broker answered`` (the ShareAcknowledge responses to A's acknowledging requests, read on the wire by ``tap``:
    ``"ACCEPT 0-1: NONE"`` per acknowledgement batch, with the partition's error code), ``B's answer`` (the same for
    B) and ``final`` (the last persisted state and delivery count of each record)."""
    rows = []
    for client, run in runs.items():
        events = exp.history.events()
        log = deliveries(exp, run["topic"])
        final = persisted(exp, run["topic"]).set_index("offset")

        def wire(name: str) -> list[str]:
            return [f"{'/'.join(dict.fromkeys(types))} {first}-{last}: "
                    f"{answer['error'] or answer['partitions'].get(p) or 'NONE'}"
                    for answer in tap.answers(name) for p, first, last, types in answer["acks"]]

        rows.append((client, log[log.consumer == run["a"].name].delivery_count.tolist(),
                     log[log.consumer == run["b"].name].delivery_count.tolist(),
                     [f"{e.ack_type}: {e.error or 'ok'}" for e in events
                      if e.participant == run["a"].name and e.kind == "ack_committed"],
                     wire(run["a"].name), wire(run["b"].name),
                     [f"{final.loc[o, 'state']} ×{final.loc[o, 'delivery_count']}" for o in final.index]))
    return pd.DataFrame(rows, columns=["client", "A's deliveries", "B's deliveries", "A reported", "broker answered A",
                                       "broker answered B", "final"]).set_index("client")
