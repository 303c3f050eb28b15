"""Notebook 06, two claims settled on the real broker, on both clients (issue 36, items 1 and 8):

* :func:`close_after_poll`: in implicit mode, does ``close()`` accept the records of the last poll? A consumer polls
  once and closes right after that poll's work (no further poll); the broker's persisted states and a second consumer
  tell what became of those records.
* :func:`late_accept`: a consumer ACCEPTs records after its acquisition lock expired and another consumer already
  acknowledged them (the share-partition start offset moved past them). A fault proxy with an
  :class:`~labkit.share.ack_tap.AckTap` (:func:`ack_tap`), which reads the ShareAcknowledge requests and responses
  passing through it, shows what the broker itself answered; the history shows what each client reported.

Both run each client of :data:`labkit.crashlab.registry.CLIENTS` on a topic and a share group of its own.
"""

from __future__ import annotations

import pandas as pd

from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.proxy import FaultProxy
from labkit.crashlab.registry import CLIENTS
from labkit.share.ack_tap import AckTap
from labkit.share.observer import ShareObserver
from labkit.share.runs import deliveries, persisted, share_group, share_offsets


def ack_tap(broker=None) -> FaultProxy:
    """Open a fault proxy (no fault switched on) whose tap is an :class:`~labkit.share.ack_tap.AckTap` (``.tap``).

    In front of ``broker`` (an :class:`~labkit.broker.EmbeddedBroker` started with ``proxy_listener=True``), or else
    of the broker :func:`labkit.connect` finds, on the port its PROXIED listener advertises (the kernel's own fault
    proxy, if one is open, is closed first: :func:`labkit.fault_proxy` opens it again). Clients reach it through its
    ``bootstrap_servers``; what the tap could not read is in its ``tap_errors``. Close it when done.

    Raises:
        ValueError: ``broker`` has no PROXIED listener.
        LabkitError: the broker :func:`labkit.connect` finds has none (:func:`labkit.lab.connection.proxied_ports`).
    """
    if broker is not None:
        return FaultProxy.for_broker(broker, tap=AckTap())
    from labkit.lab import connection

    listener, advertised = connection.proxied_ports()
    connection.close_fault_proxy()
    return FaultProxy(listen_port=advertised, target_port=listener, tap=AckTap())


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
        runs[client] = {"topic": topic, "group": group, "observer": ShareObserver.started_for(exp, topic, group)}
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
        run.pop("observer").settle(1.5 if i == 0 else 0)
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


def late_accept(exp: Experiment, proxy: FaultProxy, clients: tuple[str, ...] = CLIENTS, records: int = 2,
                within_s: float = 120.0) -> dict:
    """A late ACCEPT of records another consumer has already acknowledged, once per client of ``clients`` (a topic
    and a share group each, all at once), every consumer behind ``proxy`` (:func:`ack_tap`): consumer A
    (``late-A-<client>``) gets the ``records`` records and is paused (SIGSTOP) before it acknowledges; B
    (``late-B-<client>``) gets them once A's acquisition lock expired, ACCEPTs them and commits; once the broker has
    persisted them ACKNOWLEDGED (B's ACCEPT moved the share-partition start offset past them), A is resumed and
    ACCEPTs them (``commit_sync`` / ``commitSync``): late.

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
                        "observer": ShareObserver.started_for(exp, topic, group)}
    hold = {"after_poll": 8000}  # a window to pause A in before it acknowledges
    for client, run in runs.items():
        run["a"] = exp.participant(f"late-A-{client}", "share_consumer", client=client, topic=run["topic"],
                                   group_id=run["group"], bootstrap=proxy.bootstrap_servers, idle_ms=3000,
                                   sleep_at=hold, first_ms=int(within_s * 1000)).start()
    for client, run in runs.items():
        a = run["a"]
        wait_for(lambda: a.counters()["delivered"] >= records, f"{a.name} never got the {records} records", within_s)
        a.pause()
        run["b"] = exp.participant(f"late-B-{client}", "share_consumer", client=client, topic=run["topic"],
                                   group_id=run["group"], bootstrap=proxy.bootstrap_servers, idle_ms=3000,
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
        run.pop("observer").settle(1.5 if i == 0 else 0)
    return runs


def late_accept_summary(exp: Experiment, runs: dict, proxy: FaultProxy) -> pd.DataFrame:
    """One row per client of :func:`late_accept`: ``A's deliveries`` and ``B's deliveries`` (delivery counts),
    ``A reported`` (each late ACCEPT's result as A's client reported it: ``"ACCEPT: ok"`` or ``"ACCEPT: ERROR"``),
    ``broker answered A`` (the ShareAcknowledge responses to A's acknowledging requests, read on the wire by the
    :class:`~labkit.share.ack_tap.AckTap` of ``proxy``, :func:`ack_tap`: ``"ACCEPT 0-1: NONE"`` per acknowledgement
    batch, with the partition's error code; a frame it could not read is in ``proxy.tap_errors``, not here),
    ``broker answered B`` (the same for B) and ``final`` (the last persisted state and delivery count of each
    record)."""
    rows = []
    for client, run in runs.items():
        events = exp.history.events()
        log = deliveries(exp, run["topic"])
        final = persisted(exp, run["topic"]).set_index("offset")

        def wire(name: str) -> list[str]:
            return [f"{'/'.join(dict.fromkeys(types))} {first}-{last}: "
                    f"{answer['error'] or answer['partitions'].get(p) or 'NONE'}"
                    for answer in proxy.tap.answers(name) for p, first, last, types in answer["acks"]]

        rows.append((client, log[log.consumer == run["a"].name].delivery_count.tolist(),
                     log[log.consumer == run["b"].name].delivery_count.tolist(),
                     [f"{e.ack_type}: {e.error or 'ok'}" for e in events
                      if e.participant == run["a"].name and e.kind == "ack_committed"],
                     wire(run["a"].name), wire(run["b"].name),
                     [f"{final.loc[o, 'state']} ×{final.loc[o, 'delivery_count']}" for o in final.index]))
    return pd.DataFrame(rows, columns=["client", "A's deliveries", "B's deliveries", "A reported", "broker answered A",
                                       "broker answered B", "final"]).set_index("client")
