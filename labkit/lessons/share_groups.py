"""Notebook 06, share groups (KIP-932) on the real broker: several consumers on one partition, the
acknowledgement types, the delivery count limit and (Kafka 4.4) the dead-letter queue of KIP-1191,
the acquisition lock under a pause and a crash, a slow record's lock renewed (RENEW, KIP-1222: Kafka's Java
client) or expired (confluent-kafka, which has no RENEW), implicit acknowledgement, and a framework's sink that
is either lossy or duplicating whichever order it acknowledges in, an administrator's reset of a share group's
start offset (AlterShareGroupOffsets), and a playground of share consumers to pause and crash (:func:`playground`).

Every function runs real share consumer participants (:mod:`labkit.share.roles.share_consumer`) while a
:class:`~labkit.share.observer.ShareObserver` records what the broker persisted, and returns
the handles it made; the history holds what happened (``exp.history``).
"""

from __future__ import annotations

import time
import uuid

import pandas as pd

from labkit.broker.settings import SHARE_LOCK_MS
from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.records import read_topic
from labkit.kafka.share_state import describe_share_group
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.models.share_partition import TERMINAL, replay_client_events
from labkit.share.group_config import configure_group, dlq_supported
from labkit.share.observer import ShareObserver
from labkit.share.reset import alter_share_group_offsets
from labkit.share.runs import deliveries, first_ns, persisted, share_group, share_offsets

#: The lab broker's acquisition lock (``group.share.record.lock.duration.ms``), ms; the notebooks read it here.
LOCK_MS = SHARE_LOCK_MS
#: Kafka's default ``share.delivery.count.limit`` (``GroupConfig``, KIP-932), for a group that does not set one.
DEFAULT_DELIVERY_LIMIT = 5


def many_consumers(exp: Experiment, consumers: int = 3, records: int = 30, per_record_ms: int = 100) -> dict:
    """``consumers`` share consumers join one share group on a one-partition topic; once the group
    coordinator has given the partition to all of them, ``records`` records are written, one per
    produce batch (the broker acquires records a whole batch at a time). Each
    consumer takes at most 5 records a poll (``max.poll.records``) and ``per_record_ms`` to process
    one: the broker hands each record to one of them.

    Returns:
        ``{"topic", "group", "consumers": [participants], "observer"}``.
    Raises:
        TimeoutError: the members did not all get the partition within 60 s.
    """
    topic = exp.topic("many")
    group = f"{exp.name}-many-{uuid.uuid4().hex[:6]}"
    configure_group(exp.bootstrap, group)
    observer = ShareObserver.started_for(exp, topic, group)
    members = [exp.participant(f"share-{i}", "share_consumer", topic=topic, group_id=group, idle_ms=4000,
                               per_record_ms=per_record_ms, config={"max.poll.records": 5}).start()
               for i in range(1, consumers + 1)]
    names = {m.name for m in members}
    wait_for(lambda: names <= {e.participant for e in exp.history.events() if e.kind == "share_assignment"
                               and e.topic == topic}, f"the {consumers} members never all held {topic}", 60)
    # one record per produce batch: the broker acquires whole batches, so one big batch would go to one consumer
    exp.participant("source-many", "producer", topic=topic, iterations=records, batch=1).start().wait(60)
    for m in members:
        m.wait(120)
    observer.settle()
    return {"topic": topic, "group": group, "consumers": members, "observer": observer}


def acknowledgement_types(exp: Experiment, delivery_limit: int = 3, dlq: bool | None = None,
                          per_record_ms: int = 400) -> dict:
    """One consumer, six records, ``per_record_ms`` to process each (so the timeline shows the order
    of events): ``source-2`` is released once, then accepted (delivered twice);
    ``source-3`` is rejected; ``source-4`` is released every time, until the delivery count limit
    archives it; the rest are accepted. With ``dlq`` (default: on Kafka 4.4+) the group has a
    dead-letter queue topic (``dlq.`` prefix, ``errors.deadletterqueue.group.enable=true``).

    Returns:
        ``{"topic", "group", "consumer", "dlq_topic", "records", "delivery_limit", "dlq"}``: ``dlq`` is the DLQ's
        records as a DataFrame (its headers name the source offset and why), or ``None`` without a DLQ.
    """
    dlq = dlq_supported() if dlq is None else dlq
    dlq_topic = exp.topic("acks", prefix="dlq.", config={"errors.deadletterqueue.group.enable": "true"}) if dlq else None
    records = 6
    topic, group = share_group(exp, "acks", records, delivery_limit=delivery_limit, dlq_topic=dlq_topic)
    observer = ShareObserver.started_for(exp, topic, group)
    consumer = exp.participant("share-acks", "share_consumer", topic=topic, group_id=group, idle_ms=4000,
                               per_record_ms=per_record_ms, decisions={"source-acks-2": ["release", "accept"], "source-acks-3": "reject",
                                          "source-acks-4": "release"}).start()
    consumer.wait(120)
    observer.settle()
    return {"topic": topic, "group": group, "consumer": consumer, "dlq_topic": dlq_topic, "records": records,
            "delivery_limit": delivery_limit,
            "dlq": read_topic(exp.bootstrap, dlq_topic, "read_uncommitted", headers=True) if dlq_topic else None}


def lock_expiry(exp: Experiment, how: str = "pause", records: int = 4) -> dict:
    """Consumer A takes every record, then is paused (SIGSTOP) or crashed (SIGKILL) before it
    acknowledges. Consumer B, started afterwards, gets the records (delivery count 2) once the broker
    lets them go: a paused A's acquisition locks expire (``group.share.record.lock.duration.ms``); a
    crashed A's connection closes (the host is alive: its operating system closes the socket), which ends A's share
    session and releases its records at once (``ShareSessionCache``'s disconnect listener,
    ``SharePartition.releaseAcquiredRecords``, the delivery still counted). A paused A is what a dead host or network
    looks like to the broker: its connection stays open. With "pause", A is resumed while B still holds the records,
    and acknowledges them late; then B commits.

    Args:
        how: "pause" or "crash".
    Returns:
        ``{"topic", "group", "a", "b", "how", "records", "delivery_limit"}``.
    Raises:
        ValueError: ``how`` is neither.
    """
    if how not in ("pause", "crash"):
        raise ValueError(f"how must be 'pause' or 'crash', not {how!r}")
    topic, group = share_group(exp, f"lock-{how}", records)
    observer = ShareObserver.started_for(exp, topic, group)
    hold = {"after_poll": 4000}  # a window to pause A, and to resume it while B holds the records
    a = exp.participant(f"A-{how}", "share_consumer", topic=topic, group_id=group, idle_ms=6000, sleep_at=hold).start()
    wait_for(lambda: a.counters()["delivered"] >= records, f"A-{how} never got the {records} records")
    a.pause() if how == "pause" else a.crash()
    b = exp.participant(f"B-{how}", "share_consumer", topic=topic, group_id=group, idle_ms=4000, sleep_at=hold).start()
    wait_for(lambda: b.counters()["delivered"] >= records, f"B-{how} never got the records", 60)
    if how == "pause":
        a.resume()
        wait_for(lambda: a.counters()["ack_committed"] >= records, f"A-{how} never acknowledged after its resume")
    wait_for(lambda: b.counters()["ack_committed"] >= records, f"B-{how} never committed the records", 60)
    if how == "pause":
        a.wait(60)
    b.wait(60)
    observer.settle()
    return {"topic": topic, "group": group, "a": a, "b": b, "how": how, "records": records,
            "delivery_limit": DEFAULT_DELIVERY_LIMIT}


def slow_record(exp: Experiment, clients: tuple[str, ...] = CLIENTS, hold_ms: int = 8000,
                renew_ms: int = 2000, per_record_ms: int = 1000) -> dict:
    """One record whose processing outlasts the acquisition lock (:data:`LOCK_MS`), once per client of ``clients``
    (:data:`labkit.crashlab.registry.CLIENTS`), each on a topic and share group of its own, all at once. The
    consumer (``slow-<client>``) processes each delivery for ``per_record_ms``, the record's first one ``hold_ms``
    longer, then ACCEPTs it; it is stopped once an ACCEPT of it was committed.

    * ``java``: Kafka's Java client renews the lock every ``renew_ms`` ms while it processes
      (``AcknowledgeType.RENEW``, KIP-1222, sent by ``commitSync`` in a ShareAcknowledge v2 request): the record
      stays acquired by the consumer, delivered once.
    * ``librdkafka``: confluent-kafka 2.16.1's ``AcknowledgeType`` has no RENEW: the lock expires while the record
      is processed, the broker makes it AVAILABLE again, the late ACCEPT is refused (INVALID_RECORD_STATE) and the
      record comes back (delivery count 2).

    Args:
        hold_ms: processing time of the first delivery (ms); more than :data:`LOCK_MS` to outlast the lock.
        renew_ms: the Java consumer's renewal period (ms); with ``per_record_ms``, less than :data:`LOCK_MS`.
        per_record_ms: processing time of every delivery (ms).
    Returns:
        ``{client: {"topic", "group", "consumer"}}``.
    Raises:
        ValueError: ``hold_ms`` does not outlast the lock, or the first renewal would come after it.
        TimeoutError: a consumer had no ACCEPT committed within 120 s.
    """
    if hold_ms <= LOCK_MS or renew_ms <= 0 or renew_ms + per_record_ms >= LOCK_MS:
        raise ValueError(f"hold_ms must exceed the lock ({LOCK_MS} ms), and renew_ms + per_record_ms stay within it; "
                         f"got {hold_ms}, {renew_ms} and {per_record_ms}")
    runs = {}
    for client in clients:
        topic, group = share_group(exp, f"slow-{client}", 1)
        runs[client] = {"topic": topic, "group": group, "observer": ShareObserver.started_for(exp, topic, group)}
    for client, run in runs.items():
        run["consumer"] = exp.participant(f"slow-{client}", "share_consumer", client=client, topic=run["topic"],
                                          group_id=run["group"], hold_ms=hold_ms, per_record_ms=per_record_ms,
                                          idle_ms=60_000,
                                          default=["hold", "accept"],
                                          **({"renew_ms": renew_ms} if client == "java" else {})).start()
    for run in runs.values():  # stopped once its ACCEPT counted: the timeline ends with the story
        consumer = run["consumer"]
        wait_for(lambda: any(e.kind == "ack_committed" and e.participant == consumer.name and e.ack_type == "ACCEPT"
                             and e.error is None for e in exp.history.events()),
                 f"{consumer.name} never had an ACCEPT committed", 120)
        consumer.stop()
    for i, run in enumerate(runs.values()):
        run.pop("observer").settle(1.5 if i == 0 else 0)  # one wait for all the observers
    return runs


def slow_record_summary(exp: Experiment, runs: dict) -> pd.DataFrame:
    """What each client's consumer of :func:`slow_record` (``runs``, what it returned) did with its record, and
    where the broker left it: one row per client with ``deliveries`` (the delivery counts it received),
    ``acknowledgements`` (``"TYPE"`` or ``"TYPE: ERROR"`` per committed acknowledgement, in order), ``processed_s``
    (seconds from the first delivery to the first ACCEPT's commit, refused or not), ``state``/``delivery_count``
    (the last the broker persisted) and ``broker states`` (every persisted state)."""
    events = exp.history.events()
    rows = []
    for client, run in runs.items():
        mine = [e for e in events if e.participant == run["consumer"].name and e.topic == run["topic"]]
        last = persisted(exp, run["topic"]).iloc[-1]
        processed = first_ns(mine, "ack_committed", ack_type="ACCEPT") - first_ns(mine, "delivered")
        rows.append((client, [e.delivery_count for e in mine if e.kind == "delivered"],
                     [e.ack_type + (f": {e.error}" if e.error else "") for e in mine if e.kind == "ack_committed"],
                     processed / 1e9, last.state, last.delivery_count, last.history))
    return pd.DataFrame(rows, columns=["client", "deliveries", "acknowledgements", "processed_s", "state",
                                       "delivery_count", "broker states"]).set_index("client")


def implicit_acknowledgement(exp: Experiment, records: int = 6) -> dict:
    """A consumer in ``share.acknowledgement.mode=implicit``: it never calls ``acknowledge``; each
    poll accepts the records of the one before. ``close()`` does not accept the last ones, on either client
    (:func:`labkit.lessons.share_close.close_after_poll`): here the consumer stops after ``idle_ms`` of empty polls,
    and the first of them accepted the last records before ``close()``.

    Returns:
        ``{"topic", "group", "consumer"}``.
    """
    topic, group = share_group(exp, "implicit", records)
    observer = ShareObserver.started_for(exp, topic, group)
    consumer = exp.participant("share-implicit", "share_consumer", topic=topic, group_id=group, idle_ms=3000,
                               ack_mode="implicit", config={"max.poll.records": 2}).start()
    consumer.wait(60)
    observer.settle()
    return {"topic": topic, "group": group, "consumer": consumer}


def framework_sink(exp: Experiment, order: str, records: int = 4) -> dict:
    """A framework-style worker writes each record's effect to its own SQLite sink and acknowledges,
    in ``order``; it crashes (SIGKILL) between the two on its first batch, then restarts.

    * ``ack_first``: acknowledged and committed, crash before the sink write: the records are gone.
    * ``sink_first``: written to the sink, crash before the acknowledgement: the records come back
      (the crash closed the worker's connection, which released them) and are written again.

    Returns:
        ``{"topic", "group", "worker", "sink"}``: ``sink`` is the SQLite file's path.
    Raises:
        ValueError: unknown ``order``.
        RuntimeError: the worker ended otherwise than SIGKILLed at its crash point (e.g. "failed: ..."): its status
            and its stderr log are named.
    """
    crash_at = {"ack_first": "before_sink", "sink_first": "after_sink"}
    if order not in crash_at:
        raise ValueError(f"unknown order {order!r}; the orders are {', '.join(crash_at)}")
    topic, group = share_group(exp, order.replace("_", "-"), records)
    sink = exp.history.path.with_name(f"{exp.history.path.stem}.{order}.sqlite")
    observer = ShareObserver.started_for(exp, topic, group)
    worker = exp.participant(f"worker-{order}", "share_consumer", topic=topic, group_id=group, idle_ms=4000,
                             sink=str(sink), order=order, crash_at=crash_at[order], crash_iteration=1).start()
    wait_for(lambda: worker.status not in ("running", "stalled"), f"worker-{order} never reached its crash point")
    crash = exp.history.first("crash", worker.name)  # written by the worker at its step, just before its SIGKILL
    if worker.status != "crashed" or crash is None or crash.step != crash_at[order]:
        raise RuntimeError(f"worker-{order} ended {worker.status}, not at its crash point {crash_at[order]}: see "
                           f"{worker.stderr_log}")
    worker.restart(crash_at=None, idle_ms=LOCK_MS + 5000)
    worker.wait(120)
    observer.settle()
    return {"topic": topic, "group": group, "worker": worker, "sink": sink}


def rewind(exp: Experiment, run: dict, offset: int = 0, empty_within_s: float = 60.0) -> dict:
    """An administrator moves the SPSO of ``run``'s share group back to ``offset`` on partition 0
    (AlterShareGroupOffsets, KIP-932: what ``kafka-share-groups.sh --reset-offsets`` and the Java client's
    ``Admin.alterShareGroupOffsets`` send; :func:`labkit.share.reset.alter_share_group_offsets`), then a new share
    consumer (``rewound-<topic label>``) reads what that makes AVAILABLE again.

    First while a consumer (``member-...``) is in the group: the broker refuses it (NON_EMPTY_GROUP); then, that
    consumer stopped and the group empty, again: accepted.

    Args:
        run: what :func:`framework_sink` (or another function here) returned: its ``topic`` and ``group``, whose
            consumers have all stopped or are stopping.
        offset: the new start offset (records).
        empty_within_s: how long to wait for the group to be empty (a crashed member leaves it only when its
            session times out: ``group.share.session.timeout.ms``).
    Returns:
        ``{"topic", "group", "before", "refused", "accepted", "after", "consumer"}``: ``refused`` and ``accepted``, the
        two requests' results (``alter_share_group_offsets``'s dicts); ``before`` and ``after``, the group's
        ``(SPSO, lag)`` (:func:`share_offsets`) before any request and right after the accepted one.
    Raises:
        TimeoutError: the member never joined, or the group never emptied, within ``empty_within_s``.
    """
    topic, group = run["topic"], run["group"]
    label = topic.rsplit("-", 1)[0]
    observer = ShareObserver.started_for(exp, topic, group)
    before = share_offsets(exp.bootstrap, group, topic)

    def members() -> list:
        return describe_share_group(exp.bootstrap, group)["members"]

    member = exp.participant(f"member-{label}", "share_consumer", topic=topic, group_id=group,
                             first_ms=int(empty_within_s * 1000)).start()
    wait_for(lambda: any(m["client_id"] == member.name for m in members()), f"{member.name} never joined {group}",
             empty_within_s)
    refused = alter_share_group_offsets(exp.bootstrap, group, {topic: {0: offset}})
    member.stop()
    wait_for(lambda: not members(), f"{group} still had members after {empty_within_s:g} s", empty_within_s)
    accepted = alter_share_group_offsets(exp.bootstrap, group, {topic: {0: offset}})
    after = share_offsets(exp.bootstrap, group, topic)
    consumer = exp.participant(f"rewound-{label}", "share_consumer", topic=topic, group_id=group,
                               idle_ms=3000).start()
    consumer.wait(120)
    observer.settle()
    return {"topic": topic, "group": group, "before": before, "refused": refused, "accepted": accepted,
            "after": after, "consumer": consumer}


#: The playground's acquisition lock (its group's ``share.record.lock.duration.ms``), ms: long enough to press Pause
#: and watch, short enough to wait for.
PLAY_LOCK_MS = 15_000


def playground(exp: Experiment, records: int = 16, players: int = 2, per_record_ms: int = 3000, poll_records: int = 2,
               lock_ms: int = PLAY_LOCK_MS, idle_ms: int = 120_000) -> dict:
    """Notebook 06's playground: ``players`` share consumers (``player-1``, ``player-2``, ...) of one fresh share group
    on a fresh one-partition topic of ``records`` records, and a :class:`~labkit.share.observer.ShareObserver`, all
    started; the notebook gives the players a control panel to pause, resume, crash and restart them.

    Sized so that, left alone, every record is delivered once (delivery count 1) and stays with the player that got
    it: each record is written in a produce batch of its own (the broker acquires whole batches, so one batch of all
    the records would go to one player in one poll, whatever ``max.poll.records`` says: confluent-kafka 2.16's
    ``ShareConsumer.poll`` returns everything its fetch acquired), and a poll's work (``poll_records`` x
    ``per_record_ms``) takes at most half the group's lock. A paused player keeps its records until their locks
    expire (``lock_ms`` after their delivery), then the other player gets them, delivery count 2; a crashed one's
    come back at once (its connection closed).

    Args:
        records: records in the topic (one lane each in the timeline).
        players: share consumers started.
        per_record_ms: how long a player processes each record (ms; the role's ``per_record_ms``).
        poll_records: the most records a poll acquires and returns (the consumer's ``max.poll.records``; with one
            record per produce batch the broker hands out no more a poll).
        lock_ms: the group's acquisition lock (ms; the group config ``share.record.lock.duration.ms``, KIP-932,
            set by :func:`configure_group`; the lab broker allows 1 s to 60 s:
            ``group.share.min.record.lock.duration.ms``, ``group.share.max.record.lock.duration.ms``).
        idle_ms: a player stops after this long without records (ms; the role's ``idle_ms``): more than ``lock_ms``,
            so that the others are still there to take a paused player's records when its locks expire.
    Returns:
        ``{"topic", "group", "players": [participants], "observer", "lock_ms"}``.
    Raises:
        ValueError: a count below 1, a poll's work longer than half the lock, or ``idle_ms`` not past the lock and a
            poll's work.
        confluent_kafka.KafkaException: the broker refused ``lock_ms``.
    """
    if min(records, players, per_record_ms, poll_records) < 1:
        raise ValueError(f"records, players, per_record_ms and poll_records must be at least 1; got {records}, "
                         f"{players}, {per_record_ms} and {poll_records}")
    work_ms = poll_records * per_record_ms
    if 2 * work_ms > lock_ms:
        raise ValueError(f"a poll's work ({poll_records} x {per_record_ms} ms) must take at most half the lock "
                         f"({lock_ms} ms), or records would change hands with nothing pressed")
    if idle_ms <= lock_ms + work_ms:
        raise ValueError(f"idle_ms ({idle_ms}) must exceed the lock and a poll's work ({lock_ms} + {work_ms} ms): the "
                         "players would stop before a paused player's locks expire")
    topic = exp.topic("play")
    exp.participant("source-play", "producer", topic=topic, iterations=1, batch=records,
                    single_record_batches=True).start().wait(60)
    group = f"{exp.name}-play-{uuid.uuid4().hex[:6]}"
    configure_group(exp.bootstrap, group, lock_ms=lock_ms)
    observer = ShareObserver(exp.bootstrap, exp.history, group, topic, interval_s=0.5).start()
    members = [exp.participant(f"player-{n}", "share_consumer", topic=topic, group_id=group,
                               per_record_ms=per_record_ms, idle_ms=idle_ms,
                               config={"max.poll.records": poll_records}).start() for n in range(1, players + 1)]
    return {"topic": topic, "group": group, "players": members, "observer": observer, "lock_ms": lock_ms}


def handovers(exp: Experiment, topic: str) -> pd.DataFrame:
    """Every delivery of ``topic``'s records in time order (like :func:`deliveries`), with ``mono_ns`` (when it was
    delivered, monotonic ns) and ``previous``: the consumer that had the record's delivery before (missing, ``NaN``,
    for its first delivery)."""
    rows, last = [], {}
    for e in exp.history.events():
        if e.kind == "delivered" and e.topic == topic:
            rows.append((e.participant, e.offset, e.value_id, e.delivery_count, e.mono_ns, last.get(e.offset)))
            last[e.offset] = e.participant
    return pd.DataFrame(rows, columns=["consumer", "offset", "value_id", "delivery_count", "mono_ns", "previous"])


def held(exp: Experiment, participant: str, topic: str, min_s: float = 0.0) -> set[int]:
    """The offsets of ``topic`` that ``participant`` holds by its own account: delivered to it at least ``min_s``
    seconds ago, and no acknowledgement of them committed (``ack_committed``) since. Once their locks expire the
    broker may have given them to another consumer: this is what the participant last knew."""
    since: dict[int, int] = {}
    for e in exp.history.events():
        if e.participant == participant and e.topic == topic:
            if e.kind == "delivered":
                since[e.offset] = e.mono_ns
            elif e.kind == "ack_committed":
                since.pop(e.offset, None)
    now = time.monotonic_ns()
    return {offset for offset, ns in since.items() if now - ns >= min_s * 1e9}


def model_replay(exp: Experiment, run: dict) -> dict:
    """The model of a share partition (:mod:`labkit.models.share_partition`, MODELLED) against a real run of this
    notebook (:func:`acknowledgement_types` or :func:`lock_expiry`: ``run`` is what it returned): the run's client
    steps from ``exp``'s history are replayed through the model
    (:func:`~labkit.models.share_partition.replay_client_events`), and each record's final state is compared
    with what the broker persisted.

    Returns:
        ``{"disagreements", "broker", "model", "terminal"}``: ``disagreements``, where the model's answer to a
        client step differs from the broker's (none expected: a late ACCEPT of a record another consumer's ACCEPT has
        already moved the share-partition start offset past is skipped without an error by both, as
        :func:`labkit.lessons.share_close.late_accept` reads on the wire); ``broker`` and ``model``, ``{offset: state}``
        at the end (the broker's ARCHIVING read as ARCHIVED); ``terminal``, whether the model ended every record in a
        terminal state.
    """
    model, disagreements = replay_client_events(exp.history.events(), run["topic"], run["records"],
                                                run["delivery_limit"], LOCK_MS)
    frame = persisted(exp, run["topic"])
    return {"disagreements": disagreements,
            "broker": {o: ("ARCHIVED" if s == "ARCHIVING" else s) for o, s in zip(frame.offset, frame.state)},
            "model": {o: r.state for o, r in enumerate(model.offsets)},
            "terminal": all(r.state in TERMINAL for r in model.offsets)}


@marked
def check_order(answer: object, runs: dict) -> Verdict:
    """Notebook 06's exercise: ``answer``, ``"ack_first"`` or ``"sink_first"``, is the order that loses no record
    when the worker crashes between its two steps. Checked against this notebook's real runs: ``runs`` maps each
    order to its :func:`~labkit.share.check.check_share` result (``sink=True``)."""
    if (v := unanswered(answer, '"ack_first" or "sink_first"')):
        return v
    if not isinstance(answer, str) or answer not in runs:
        return Verdict("wrong", f"The answer is one of {', '.join(map(repr, runs))}.")
    lost = {order: check.counts()["lost effect"] for order, check in runs.items()}
    dup = {order: check.counts()["duplicate effect"] for order, check in runs.items()}
    if lost[answer]:
        return Verdict("wrong", f"In the run above, {answer} lost {lost[answer]} record(s): once a record is "
                                "acknowledged, a share consumer cannot seek() back to it (only an administrator's "
                                "reset of the whole, empty group's start offset can bring it back, with everything "
                                "after it). Which order leaves the record in the broker's hands until its effect is "
                                "safe?")
    return Verdict("right", f"{answer} lost nothing; its price was {dup[answer]} duplicate effect(s): the crash "
                            "released the records and they were written again. A sink that ignores a second write "
                            "of the same record (an idempotent sink) makes that harmless.")
