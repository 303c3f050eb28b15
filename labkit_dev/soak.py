"""Soak read-process-write under random faults (Kafka's transactions_test).

A soak of read-process-write under random faults, modelled on Kafka's own system test
``transactions_test``: consume-transform-produce processors (KIP-447 transactions, or at-least-once as the
negative control) are SIGKILLed at random moments, SIGSTOPped past their session timeout, and the broker is
kill -9'd and restarted, while a :class:`~labkit.crashlab.supervisor.Supervisor` restarts whatever ends badly.
The schedule ends once the group's committed offsets reach the input's high watermarks; then the checker
reads the output at read_committed. It runs on the lab's single node or on an
:class:`~labkit.broker.multinode.EmbeddedCluster` (a broker fault then kills one broker, drawn at random).
"""

from __future__ import annotations

import contextlib
import random
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field

import pandas as pd

from labkit.broker import EmbeddedBroker
from labkit.broker.multinode import EmbeddedCluster
from labkit.broker.settings import CONSUMER_SESSION_TIMEOUT_MS
from labkit.core.history import Event, derived_id
from labkit.core.waiting import wait_for
from labkit.crashlab.check import Anomaly
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import ParticipantStateError
from labkit.crashlab.roles.processor import ROLE as PROCESSOR
from labkit.crashlab.supervisor import RestartPolicy, Supervisor
from labkit.kafka.hanging import abort_hanging, find_hanging, open_at_coordinator
from labkit.kafka.records import caught_up_in_child

#: The faults a schedule draws from, at random moments.
FAULTS = ("kill", "pause", "broker")
#: How long a pause fault lasts (s): 6 s past the group's session timeout
#: (:data:`~labkit.broker.settings.CONSUMER_SESSION_TIMEOUT_MS`), so the group moves on without the paused member.
PAUSE_S = CONSUMER_SESSION_TIMEOUT_MS / 1000 + 6
#: The steps an at-least-once processor passes (a KIP-447 one passes all of ``PROCESSOR.steps``).
AT_LEAST_ONCE_STEPS = ("after_poll", "after_produce", "after_commit")
#: What Kafka 4.4's group coordinator logs when a load of ``__consumer_offsets`` completes after a stale,
#: earlier load's completion already made the partition ACTIVE (``CoordinatorRuntime`` checks the state, not
#: the epoch). Seen after the combined node's restart, which loads the partition, is fenced and loads it again:
#: the coordinator serves requests from a half-replayed state (a member may get GROUP_ID_NOT_FOUND, fatal to
#: librdkafka) and the groups replayed after that point never arm their members' session timers, so a dead
#: member keeps its partitions until the next load. The soak's operator restarts the broker then.
LOAD_RACE = "Ignored load completion from __consumer_offsets"
#: A group with no commit for this long, after the faults, with :data:`LOAD_RACE` logged, is stuck (s).
STUCK_S = 30.0
#: How long the soak waits, once the group caught up, for the transactions still open on the output to end (s):
#: a processor killed or paused inside one leaves it open until its restarted instance's ``init_transactions``
#: aborts it, or else the coordinator does after the producer's ``transaction.timeout.ms`` (librdkafka's default,
#: 60 000 ms; the lab broker looks for timed-out transactions every second). A read_committed reader waits as long.
SETTLE_S = 90.0


@dataclass
class SoakResult:
    """One schedule's outcome. ``faults``: the faults carried out, in order; ``skipped``: those drawn but not
    carried out (their victim was not running, e.g. being restarted), with why. ``recovery_s``: per broker
    restart, from the broker being ready to the next committed transaction (or offset commit). ``race_lost``:
    lost writes explained by a hanging transaction that a broker kill left in the output (Kafka's marker race: written
    by its producer, at or after its start offset, :func:`race_losses`),
    found and aborted before the final read; ``race_unprocessed``: the inputs of those lost outputs, when the same
    transaction's offsets marker was written (their offsets committed, so no processor reads them again: the
    race seen from the input side). ``resets``: times a processor found its consumer starting a
    partition below the group's committed offset and sought to it (librdkafka's reset,
    :mod:`labkit.kafka.committed_start`). ``reloads``: broker restarts by the soak's operator for a group stuck
    by Kafka's coordinator load race (:data:`LOAD_RACE`)."""

    seed: int
    records: int
    faults: list[str]
    skipped: list[str]
    counts: dict[str, int]
    recovery_s: list[float] = field(default_factory=list)
    stalls: list[str] = field(default_factory=list)
    race_lost: int = 0
    race_unprocessed: int = 0
    restarts: int = 0
    resets: int = 0
    reloads: int = 0

    @property
    def clean(self) -> bool:
        """No duplicate, and no lost write or unprocessed input beyond the marker race's."""
        return (self.counts["duplicate"] == 0 and self.counts["unprocessed"] == self.race_unprocessed
                and self.counts["lost write"] == self.race_lost)


def brokers_of(kafka: EmbeddedBroker | EmbeddedCluster) -> list[EmbeddedBroker]:
    """The brokers of ``kafka`` (a cluster's, without its controller; the lab's single node itself)."""
    return list(kafka.brokers.values()) if isinstance(kafka, EmbeddedCluster) else [kafka]


def run_schedule(kafka: EmbeddedBroker | EmbeddedCluster, folder: str, seed: int, *, records: int = 1200, partitions: int = 3,
                 processors: int = 2, faults: int = 3, per_record_ms: int = 10, transactional: bool = True,
                 deadline_s: float = 300, client: str = "librdkafka") -> SoakResult:
    """One randomized schedule (``seed`` fixes it): ``records`` inputs over ``partitions`` partitions, ``processors``
    KIP-447 processors (``transactional=False``: at-least-once) in one group under a supervisor, each taking
    ``per_record_ms`` ms per record, on ``client`` ("librdkafka" or "java", Kafka's Java client). Each processor
    SIGKILLs itself once at a step of its batch drawn from ``PROCESSOR.steps`` (:data:`AT_LEAST_ONCE_STEPS`) in a batch
    drawn from its 2nd to 6th (its crash point: a kill inside the batch, where a duplicate can arise); ``faults`` more
    faults are drawn from :data:`FAULTS` at random moments while they process (uniform over the time the processors need
    for the input, from their first output on; a pause lasts :data:`PAUSE_S`, past the group's session timeout).
    ``kafka``: the lab's broker, or a cluster, of which a broker fault kills one broker drawn at random (never the
    controller).

    Raises:
        ValueError: fewer than 100 records per partition (the sources write batches of 100; ``records`` is
            rounded down to a multiple of 100 per partition).
        TimeoutError: the group did not catch up within ``deadline_s`` seconds, or a transaction on the output
            was still open at its coordinator :data:`SETTLE_S` seconds later (the message names the group or the
            output topic; :func:`~labkit.kafka.hanging.open_at_coordinator` lists the transactions). The
            schedule ends once both are done, the supervisor still running: the final read_committed read would
            otherwise wait on a killed processor's transaction that its restart had not yet aborted.
    """
    per = records // partitions // 100 * 100  # the sources write batches of 100
    if per == 0:
        raise ValueError(f"records={records}: at least 100 per partition ({100 * partitions} for {partitions})")
    rng = random.Random(seed)
    exp = Experiment(f"soak{seed}{'' if transactional else '-alo'}", kafka.bootstrap_servers, folder=folder)
    brokers = brokers_of(kafka)
    src, out = exp.topic("input", partitions), exp.topic("output", partitions)
    for p in range(partitions):
        exp.participant(f"source-{p}", "producer", topic=src, partition=p, iterations=per // 100, batch=100).start()
    for p in range(partitions):
        exp.participants[f"source-{p}"].wait(120)
    group = f"{src}-{uuid.uuid4().hex[:4]}"
    at_step = random.Random(f"{seed}-steps")  # apart from rng: the moments, victims and kinds stay the seed's
    steps = PROCESSOR.steps if transactional else AT_LEAST_ONCE_STEPS
    sup = Supervisor().start()
    procs = [sup.supervise(exp.participant(f"proc-{i}", "processor", topic=src, output_topic=out, group_id=group,
                                           transactional_id=f"{group}-{i}", batch=50, idle_ms=600_000,
                                           stop_when_caught_up=False,  # the schedule's faults may come after
                                           per_record_ms=per_record_ms,
                                           transactional=transactional, call_deadline_ms=20_000, client=client,
                                           crash_at=at_step.choice(steps),
                                           crash_iteration=at_step.randint(2, 6)).start(),
                           RestartPolicy(backoff_ms=200, limit=50))
             for i in range(processors)]
    wait_for(lambda: any(e.kind == "ack" and e.participant.startswith("proc-") for e in exp.history.events()),
             f"soak {seed}: the processors never wrote an output", 120)
    drawn, ready_times, started = [rng.choice(FAULTS) for _ in range(faults)], [], time.monotonic()
    done, skipped, marks = [], [], {}  # marks: a restarted broker -> its log's size before the schedule's restarts
    window_s = records * per_record_ms / processors / 1000  # from the first output on
    try:
        for fault, at in zip(drawn, sorted(rng.uniform(1, max(window_s, 2)) for _ in drawn)):
            time.sleep(max(0.0, started + at - time.monotonic()))
            victim = rng.choice(procs)
            if fault == "broker":
                broker = rng.choice(brokers) if len(brokers) > 1 else brokers[0]
                marks.setdefault(broker, broker.log_size())
                ready_times.append(exp.restart_broker(broker))
            else:
                try:  # the victim may crash itself at its step, or be restarting, at any moment
                    victim.crash() if fault == "kill" else victim.pause()
                except ParticipantStateError:
                    skipped.append(f"{fault} ({victim.name} {victim.status})")
                    continue
                if fault == "pause":
                    time.sleep(PAUSE_S)
                    with contextlib.suppress(ParticipantStateError):  # it crashed itself just before SIGSTOP
                        victim.resume()
            done.append(fault)
        reloads = _wait_caught_up(exp, group, src, marks, deadline_s, f"soak {seed}: group {group} caught up")
        wait_for(lambda: not open_at_coordinator(exp.bootstrap, out),  # with the supervisor still restarting
                 f"soak {seed}: the transactions open on {out} ended", SETTLE_S, interval_s=1.0)
    finally:
        sup.stop()
        exp.stop_all()
    hanging = find_hanging(exp.bootstrap, out)
    abort_hanging(exp.bootstrap, hanging)
    exp.final_reads(src, out)
    result = exp.check(out, src)
    events = exp.history.events()
    race_lost = race_losses(events, result.anomalies, hanging)
    race_unprocessed = sum(a.name == "unprocessed" and derived_id(a.value_id) in race_lost for a in result.anomalies)
    done += [f"kill at {e.step}" for e in events if e.kind == "crash" and e.participant.startswith("proc-") and e.step]
    recovery = []
    for ready in ready_times:
        nxt = next((e.mono_ns for e in events if e.mono_ns > ready and e.participant.startswith("proc-")
                    and _progress(e)), None)
        if nxt is not None:
            recovery.append((nxt - ready) / 1e9)
    return SoakResult(seed, per * partitions, done, skipped, result.counts(), recovery,
                      [f"{e.participant} in {e.step}" for e in events if e.kind == "stalled"], len(race_lost),
                      race_unprocessed, sum(sup.restarts.values()), sum(e.kind == "offset_reset" for e in events), reloads)


def race_losses(events: list[Event], anomalies: list[Anomaly], hanging: pd.DataFrame) -> set[str]:
    """The value ids of the lost writes Kafka's marker race explains: each written on a partition where a transaction
    was left hanging (``hanging``: :func:`~labkit.kafka.hanging.find_hanging`'s rows, with ``partition``,
    ``start_offset`` and the ``transactional_id`` the coordinator holds for its producer id), at or after its start
    offset, **by that producer**: the writer's transactional.id (its ``txn_begin`` of the write's transaction) is the
    one the coordinator names, which KIP-98 maps to one producer id. A loss written by any other producer is not the
    race's, nor one whose hanging producer id no coordinator names."""
    tid_of = {(e.participant, e.txn): e.transactional_id for e in events if e.kind == "txn_begin"}
    race = [(r.partition, r.transactional_id, r.start_offset) for r in hanging.itertuples() if r.transactional_id]
    writer = {(e.participant, e.topic, e.partition, e.offset): tid_of.get((e.participant, e.txn))
              for e in events if e.kind == "ack"}
    return {a.value_id for a in anomalies if a.name == "lost write"
            and any(a.partition == p and a.offset >= start
                    and writer.get((a.participant, a.topic, a.partition, a.offset)) == tid for p, tid, start in race)}


def _progress(event: Event) -> bool:
    """Whether a history event is a processor's input offsets committed: a committed transaction, or an
    at-least-once offset commit that did not fail."""
    return (event.kind == "txn_end" and event.outcome == "committed"
            or event.kind == "offsets_committed" and event.error is None)


def _wait_caught_up(exp: Experiment, group: str, topic: str, marks: dict, deadline_s: float, what: str) -> int:
    """Wait until ``group`` caught up on ``topic``; restart a broker of ``marks`` whose log shows :data:`LOAD_RACE`
    (since its mark) when the group made no commit for :data:`STUCK_S`, as an operator would. Returns how many
    such restarts were needed.

    Raises:
        TimeoutError: not caught up within ``deadline_s`` seconds.
    """
    reloads, reloaded_ns = 0, 0

    def caught_up() -> bool:  # if not, and stuck, restarts the brokers showing the race
        nonlocal reloads, reloaded_ns
        if caught_up_in_child(exp.bootstrap, group, topic):
            return True
        progress = max((e.mono_ns for e in exp.history.events() if _progress(e)), default=0)
        if time.monotonic_ns() - max(progress, reloaded_ns) > STUCK_S * 1e9:
            for broker in [b for b, mark in marks.items() if b.logged_since(mark, LOAD_RACE)]:
                marks[broker] = broker.log_size()
                reloaded_ns = exp.restart_broker(broker)
                reloads += 1
        return False

    wait_for(caught_up, what, deadline_s, interval_s=0.5)
    return reloads


def summary(results: list[SoakResult]) -> str:
    """One paragraph: schedules, records, faults carried out (and skipped), anomalies, recovery times (median,
    max), stalls."""
    total = lambda key: sum(r.counts[key] for r in results)  # noqa: E731
    rec = [s for r in results for s in r.recovery_s]
    faults = [f for r in results for f in r.faults]
    return (f"{len(results)} schedules, {sum(r.records for r in results)} records, "
            f"{faults.count('kill')} processor kills at random moments and "
            f"{sum(f.startswith('kill at ') for f in faults)} at a step, {faults.count('pause')} pauses, {faults.count('broker')} broker "
            f"kills ({sum(len(r.skipped) for r in results)} drawn faults skipped: victim not running), "
            f"{sum(r.restarts for r in results)} supervisor restarts: {total('duplicate')} duplicates, "
            f"{total('lost write')} lost writes ({sum(r.race_lost for r in results)} to Kafka's marker race), "
            f"{total('unprocessed')} unprocessed ({sum(r.race_unprocessed for r in results)} to the marker race); "
            f"{sum(r.resets for r in results)} starts below the committed offset corrected (librdkafka's reset); "
            f"{sum(r.reloads for r in results)} broker restarts for a group stuck by "
            f"Kafka's coordinator load race; recovery after a broker restart median "
            f"{statistics.median(rec) if rec else float('nan'):.1f} s, max {max(rec, default=float('nan')):.1f} s; "
            f"stalls: {', '.join(s for r in results for s in r.stalls) or 'none'}")
