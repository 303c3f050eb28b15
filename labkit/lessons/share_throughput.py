"""Notebook 06, a share group against a consumer group, measured: the same slow processing (``per_record_ms`` a
record) with more consumers than partitions, once as one consumer group and once as one share group, on the real
broker, and how many records per second each group processed.

A consumer group gives each partition to at most one of its members (Kafka's design documentation, "Consumer
Position": each partition "is consumed by exactly one consumer within each subscribing consumer group at any given
time"; so with the classic protocol and KIP-848's alike), so consumers beyond the partition count stay idle. A share
group (KIP-932) hands out records, not partitions: every member of the group can be given records of the same
partition. :func:`throughput` runs both; :func:`measure` reads what each consumer processed from the history alone,
and :func:`throughput_figure` draws it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import plotly.graph_objects as go

from labkit.broker.settings import SHARE_LOCK_MS
from labkit.core.history import Event
from labkit.core.waiting import wait_for
from labkit.crashlab.colours import participant_colour
from labkit.crashlab.experiment import Experiment
from labkit.kafka.protocol import describe_consumer_group
from labkit.kafka.share_state import describe_share_group
from labkit.share.group_config import configure_group

#: The two kinds of group :func:`throughput` runs and :func:`measure` reads, in the table's order.
GROUPS = ("consumer group", "share group")
#: The table's columns (:func:`measure`), after its index, ``group``.
COLUMNS = ["consumers", "consumers with records", "records per consumer", "written", "processed",
           "processed again", "commits", "seconds", "records/s"]
_JOIN_S = 60.0  # how long the members may take to join and hold their assignment


def throughput(exp: Experiment, consumers: int = 3, partitions: int = 1, records: int = 40,
               per_record_ms: int = 200, poll_records: int = 2) -> dict:
    """The same work for a consumer group and a share group, at the same time, on ``exp``'s broker: each group has
    ``consumers`` members (librdkafka) and a topic of its own with ``partitions`` partitions, into which a producer
    writes ``records`` records, one per produce batch, once every member holds its assignment. Each member
    processes a record for ``per_record_ms`` (a sleep), then commits:

    * the consumer group's members (role ``consumer``, ``group.protocol=consumer``, KIP-848) take one record a poll
      (``batch=1``), sleep ``per_record_ms`` at the ``after_poll`` step, then commit its offset (``commit``,
      synchronous);
    * the share group's members (role ``share_consumer``, KIP-932) take at most ``poll_records`` records a poll
      (``max.poll.records``; with one record per produce batch the broker acquires no more for a fetch: a whole
      batch would go to the first consumer that fetched it), process each for ``per_record_ms``, ACCEPT them and
      ``commit_sync``.

    Once both groups have processed every record, every member is stopped (the consumer group's idle members would
    otherwise wait for an assignment that never comes). Both groups run at once: the work is sleeping, not CPU, and
    a machine busy with something else (a broker's garbage collection, another notebook) slows both alike, so the
    consumer group is a control taken under the same conditions as the share group; run one after the other, a
    burst of load during one run would move the ratio, and the part would take twice as long.

    Args:
        exp: the experiment (its broker and history).
        consumers: members of each group; more than ``partitions``, or the consumer group has no idle member.
        partitions: partitions of each topic.
        records: records written to each topic (at least ``consumers``).
        per_record_ms: processing time of one record (ms).
        poll_records: the most records a share consumer acquires a poll (``max.poll.records``); a poll's work
            (``poll_records`` x ``per_record_ms``) must take at most half the acquisition lock
            (``group.share.record.lock.duration.ms``, :data:`labkit.broker.settings.SHARE_LOCK_MS`), or records
            would change hands because their lock expired.
    Returns:
        ``{"table", "runs", "partitions", "per_record_ms"}``: ``table``, :func:`measure`'s; ``runs``, for each kind of
        group (:data:`GROUPS`) ``{"topic", "group", "consumers": [participants]}``.
    Raises:
        ValueError: a count below 1, ``consumers`` not more than ``partitions``, fewer ``records`` than consumers,
            or a poll's work longer than half the lock.
        TimeoutError: a group's members did not all hold their assignment within 60 s, or a group had not processed
            every record in time (twice the consumer group's expected work, plus two minutes).
    """
    if min(consumers, partitions, records, per_record_ms, poll_records) < 1:
        raise ValueError(f"consumers, partitions, records, per_record_ms and poll_records must be at least 1; got "
                         f"{consumers}, {partitions}, {records}, {per_record_ms} and {poll_records}")
    if consumers <= partitions:
        raise ValueError(f"consumers ({consumers}) must exceed partitions ({partitions}): with no more consumers than "
                         "partitions a consumer group uses them all too; add consumers or use fewer partitions")
    if records < consumers:
        raise ValueError(f"records ({records}) must be at least consumers ({consumers}), so that every share consumer "
                         "can get one")
    if 2 * poll_records * per_record_ms > SHARE_LOCK_MS:
        raise ValueError(f"a poll's work ({poll_records} x {per_record_ms} ms) must take at most half the acquisition "
                         f"lock ({SHARE_LOCK_MS} ms); lower poll_records or per_record_ms")
    patience_ms = int(2 * records * per_record_ms / partitions + 2 * _JOIN_S * 1000)  # nobody ends on its own first
    runs = {}
    for kind, label in zip(GROUPS, ("cg", "sg")):
        runs[kind] = {"topic": exp.topic(f"throughput-{label}", partitions=partitions),
                      "group": f"{exp.name}-throughput-{label}-{uuid.uuid4().hex[:6]}"}
    configure_group(exp.bootstrap, runs["share group"]["group"])  # share.auto.offset.reset=earliest
    cg, sg = runs["consumer group"], runs["share group"]
    cg["consumers"] = [exp.participant(
        f"cg-{i}", "consumer", topic=cg["topic"], group_id=cg["group"], batch=1, idle_ms=patience_ms,
        assignment_timeout_ms=patience_ms, sleep_at={"after_poll": per_record_ms}, config={"client.id": f"cg-{i}"})
        for i in range(1, consumers + 1)]
    sg["consumers"] = [exp.participant(
        f"sg-{i}", "share_consumer", topic=sg["topic"], group_id=sg["group"], per_record_ms=per_record_ms,
        idle_ms=patience_ms, first_ms=patience_ms, config={"max.poll.records": poll_records})
        for i in range(1, consumers + 1)]
    members = [p for run in runs.values() for p in run["consumers"]]
    try:
        for p in members:
            p.start()
        _wait_joined(exp.bootstrap, cg["group"], cg["topic"], consumers, partitions, describe_consumer_group, False)
        _wait_joined(exp.bootstrap, sg["group"], sg["topic"], consumers, partitions, describe_share_group, True)
        sources = [exp.participant(f"source-{label}-p{p}", "producer", topic=run["topic"], partition=p, iterations=1,
                                   batch=records // partitions + (p < records % partitions),
                                   single_record_batches=True)
                   for label, run in zip(("cg", "sg"), runs.values()) for p in range(partitions)]
        for s in sources:
            s.start()
        for s in sources:
            s.wait(60)
        for kind, run in runs.items():
            names = [p.name for p in run["consumers"]]
            wait_for(lambda: _done_count(exp.history.events(), kind, run["topic"], names) >= records,
                     f"the {kind} did not process all {records} records of {run['topic']}", patience_ms / 1000)
    finally:
        with ThreadPoolExecutor(len(members)) as pool:  # SIGTERM each, at once: each leaves its group
            list(pool.map(lambda p: p.stop(), members))
    return {"table": measure(exp.history.events(), {k: (r["topic"], [p.name for p in r["consumers"]])
                                                   for k, r in runs.items()}),
            "runs": runs, "partitions": partitions, "per_record_ms": per_record_ms}


def _wait_joined(bootstrap: str, group: str, topic: str, consumers: int, partitions: int, describe: Callable,
                 every: bool) -> None:
    """Wait until ``group`` has ``consumers`` members, each at the group's assignment epoch (it has its assignment),
    holding between them every partition of ``topic``; with ``every``, each member holds at least one.

    Raises:
        TimeoutError: not within :data:`_JOIN_S`.
    """
    def joined() -> bool:
        try:
            desc = describe(bootstrap, group)
        except Exception:  # noqa: BLE001: GROUP_ID_NOT_FOUND until the first member joined
            return False
        members = desc["members"]
        held = [set(m["assignment"].get(topic, ())) for m in members]
        return (len(members) == consumers and all(m["member_epoch"] == desc["assignment_epoch"] for m in members)
                and set().union(*held) == set(range(partitions)) and (all(held) or not every))

    wait_for(joined, f"the {consumers} members of {group} never all held their assignment of {topic}", _JOIN_S,
             interval_s=0.2)


def _processed(events: list[Event], kind: str, topic: str, names: list[str]) -> tuple[list[Event], list[Event]]:
    """``(handed, done)``: the events of ``names`` on ``topic`` that handed each a record (``consume``,
    ``delivered``), and one per record whose processing was committed, timed by its commit: for the consumer group,
    each ``consume`` followed by an ``offsets_committed`` of the same consumer (its ``mono_ns`` the commit's); for the
    share group, each ``ack_committed`` ACCEPT without error (one commit's records share its ``mono_ns``: the role
    logs them in one line)."""
    mine = [e for e in events if e.topic == topic and e.participant in names]
    if kind == "share group":
        return ([e for e in mine if e.kind == "delivered"],
                [e for e in mine if e.kind == "ack_committed" and e.ack_type == "ACCEPT" and e.error is None])
    handed, done, pending = [], [], {n: [] for n in names}
    for e in mine:
        if e.kind == "consume":
            handed.append(e)
            pending[e.participant].append(e)
        elif e.kind == "offsets_committed":
            done += [Event("consume", c.participant, mono_ns=e.mono_ns, topic=topic, partition=c.partition,
                           offset=c.offset, value_id=c.value_id) for c in pending[e.participant]]
            pending[e.participant] = []
    return handed, done


def _done_count(events: list[Event], kind: str, topic: str, names: list[str]) -> int:
    return len({(e.partition, e.offset) for e in _processed(events, kind, topic, names)[1]})


def measure(events: list[Event], runs: dict[str, tuple[str, list[str]]]) -> pd.DataFrame:
    """What each group of ``runs`` processed, read from ``events`` (a history) alone.

    A record counts as processed by a consumer once its processing was committed: in a consumer group, a ``consume`` of
    it followed by that consumer's next ``offsets_committed`` (the role commits after each poll); in a share group, its
    ACCEPT committed without error (``ack_committed``; a refused one, e.g. INVALID_RECORD_STATE after the lock expired,
    does not count). A commit counts once however many records it carried: the consumer group's ``offsets_committed`` of
    a consumer with a record consumed since its last one, the share group's ``commit_sync`` (its ``ack_committed``
    events of one consumer at one instant). The time runs from the first record handed to any of the group's consumers
    (``consume``, ``delivered``) to the last commit of a processed record.

    Args:
        events: the history (:meth:`labkit.core.history.History.events`).
        runs: ``{kind: (topic, [consumer names])}``, kind one of :data:`GROUPS`: the run's topic and every consumer
            of its group, those that never got a record included.
    Returns:
        One row per run, indexed by ``group`` (the kind), with :data:`COLUMNS`: ``consumers``; ``consumers with
        records``, how many processed at least one; ``records per consumer``, the records each processed, in the
        order of ``runs``' names; ``written``, records the producers wrote to the topic (their ``ack`` events);
        ``processed``, distinct records processed (by partition and offset); ``processed again``, how many more
        times records were processed (``records per consumer`` sums to ``processed`` + ``processed again``);
        ``commits``, the commits that carried a processed record (a consumer group member commits after each poll,
        a share consumer after each poll's acknowledgements: with one record a poll against up to :func:`throughput`'s
        ``poll_records``,
        the two groups commit at different cadences); ``seconds``; ``records/s``, ``processed`` / ``seconds``.
    Raises:
        ValueError: an unknown kind, a run without consumers, or a run in which no record was processed or all at
            one instant (nothing to time: was the run's topic written, and is this the experiment's history?).
    """
    rows = []
    for kind, (topic, names) in runs.items():
        if kind not in GROUPS:
            raise ValueError(f"unknown kind of group {kind!r}; the kinds are {', '.join(map(repr, GROUPS))}")
        if not names:
            raise ValueError(f"the {kind} run on {topic} names no consumer: pass every consumer of the group")
        handed, done = _processed(events, kind, topic, names)
        if not done:
            raise ValueError(f"no consumer of the {kind} processed a record of {topic}: nothing to time (was the "
                             "topic written, and are these the experiment's events?)")
        per = [sum(e.participant == n for e in done) for n in names]
        distinct = len({(e.partition, e.offset) for e in done})
        written = len({(e.partition, e.offset) for e in events if e.kind == "ack" and e.topic == topic})
        seconds = (max(e.mono_ns for e in done) - min(e.mono_ns for e in handed + done)) / 1e9
        if seconds <= 0:
            raise ValueError(f"the {kind}'s records on {topic} were all handed out and committed at one instant: "
                             "nothing to time (are the events' mono_ns the history's clock?)")
        commits = len({(e.participant, e.mono_ns) for e in done})
        rows.append((kind, len(names), sum(n > 0 for n in per), per, written, distinct, len(done) - distinct, commits,
                     seconds, distinct / seconds))
    return pd.DataFrame(rows, columns=["group", *COLUMNS]).set_index("group")


def throughput_figure(run: dict) -> go.Figure:
    """The records each consumer processed, one bar per consumer (labelled with its count, 0 for an idle one),
    grouped by kind of group, from what :func:`throughput` returned (``run``: its ``table``, ``partitions`` and
    ``per_record_ms``); the title gives each group's records per second."""
    table, partitions = run["table"], run["partitions"]
    rates = "; ".join(f"{kind} {row['records/s']:.1f} records/s" for kind, row in table.iterrows())
    fig = go.Figure([go.Bar(name=kind, x=[f"consumer {i}" for i in range(1, row["consumers"] + 1)],
                            y=row["records per consumer"], text=row["records per consumer"], textposition="outside",
                            marker_color=participant_colour(kind))
                     for kind, row in table.iterrows()])
    consumers = int(table["consumers"].iloc[0])
    return fig.update_layout(
        barmode="group", yaxis_title="records processed", legend_title="",
        title=f"records each consumer processed: {consumers} consumers, {partitions} "
              f"partition{'s' if partitions > 1 else ''}, {run['per_record_ms']} ms a record<br><sup>{rates}</sup>")
