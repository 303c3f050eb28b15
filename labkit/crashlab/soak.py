"""A soak of read-process-write under random faults, modelled on Kafka's own system test
``transactions_test``: consume-transform-produce processors (KIP-447 transactions, or at-least-once as the
negative control) are SIGKILLed at random moments, SIGSTOPped past their session timeout, and the broker is
kill -9'd and restarted, while a :class:`~labkit.crashlab.supervisor.Supervisor` restarts whatever ends badly.
The schedule ends once the group's committed offsets reach the input's high watermarks; then the checker
reads the output at read_committed.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from dataclasses import dataclass, field

from labkit.broker import EmbeddedBroker
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.hanging import abort_hanging, find_hanging
from labkit.crashlab.supervisor import RestartPolicy, Supervisor
from labkit.records import committed_offsets, high_watermarks
from labkit.waiting import wait_for

#: The faults a schedule draws from.
FAULTS = ("kill", "pause", "broker")


@dataclass
class SoakResult:
    """One schedule's outcome. ``recovery_s``: per broker restart, from the broker being ready to the next
    committed transaction (or offset commit). ``race_lost``: lost writes explained by a hanging transaction that
    a broker kill left in the output (Kafka's marker race), found and aborted before the final read."""

    seed: int
    records: int
    faults: list[str]
    counts: dict[str, int]
    recovery_s: list[float] = field(default_factory=list)
    stalls: list[str] = field(default_factory=list)
    race_lost: int = 0
    restarts: int = 0

    @property
    def clean(self) -> bool:
        """No duplicate, no unprocessed input, and no lost write beyond the marker race's."""
        return (self.counts["duplicate"] == 0 and self.counts["unprocessed"] == 0
                and self.counts["lost write"] == self.race_lost)


def group_caught_up(bootstrap: str, group: str, topic: str) -> bool:
    """Whether ``group``'s committed offsets of ``topic`` have reached its high watermarks."""
    try:
        done = committed_offsets(bootstrap, group, topic)
    except Exception:  # noqa: BLE001: the coordinator is loading or the broker is down: not yet
        return False
    ends = high_watermarks(bootstrap, topic)
    return all(end == 0 or done[p] >= end for p, end in ends.items())


def run_schedule(broker: EmbeddedBroker, folder: str, seed: int, *, records: int = 1200, partitions: int = 3,
                 processors: int = 2, faults: int = 3, per_record_ms: int = 10, transactional: bool = True,
                 deadline_s: float = 300) -> SoakResult:
    """One randomized schedule (``seed`` fixes it): ``records`` inputs over ``partitions`` partitions,
    ``processors`` KIP-447 processors (``transactional=False``: at-least-once) in one group under a supervisor,
    each taking ``per_record_ms`` ms per record, and ``faults`` faults drawn from :data:`FAULTS` at random
    moments while they process (uniform over the time the processors need for the input, from their first
    output on; a pause lasts 16 s, past the group's 10 s session timeout).

    Raises:
        ValueError: fewer than 100 records per partition (the sources write batches of 100; ``records`` is
            rounded down to a multiple of 100 per partition).
        TimeoutError: the group did not catch up within ``deadline_s`` seconds (the message names it).
    """
    per = records // partitions // 100 * 100  # the sources write batches of 100
    if per == 0:
        raise ValueError(f"records={records}: at least 100 per partition ({100 * partitions} for {partitions})")
    rng = random.Random(seed)
    exp = Experiment(f"soak{seed}{'' if transactional else '-alo'}", broker.bootstrap_servers, folder=folder)
    src, out = exp.topic("input", partitions), exp.topic("output", partitions)
    for p in range(partitions):
        exp.participant(f"source-{p}", "producer", topic=src, partition=p, iterations=per // 100, batch=100).start()
    for p in range(partitions):
        exp.participants[f"source-{p}"].wait(120)
    group = f"{src}-{uuid.uuid4().hex[:4]}"
    sup = Supervisor().start()
    procs = [sup.supervise(exp.participant(f"proc-{i}", "processor", topic=src, output_topic=out, group_id=group,
                                           transactional_id=f"{group}-{i}", batch=50, idle_ms=600_000,
                                           per_record_ms=per_record_ms,
                                           transactional=transactional, call_deadline_ms=20_000).start(),
                           RestartPolicy(backoff_ms=200, limit=50))
             for i in range(processors)]
    wait_for(lambda: any(e.kind == "ack" and e.participant.startswith("proc-") for e in exp.history.events()),
             f"soak {seed}: the processors never wrote an output", 120)
    drawn, ready_times, started = [rng.choice(FAULTS) for _ in range(faults)], [], time.monotonic()
    window_s = records * per_record_ms / processors / 1000  # from the first output on
    try:
        for fault, at in zip(drawn, sorted(rng.uniform(1, max(window_s, 2)) for _ in drawn)):
            time.sleep(max(0.0, started + at - time.monotonic()))
            victim = rng.choice(procs)
            if fault == "broker":
                ready_times.append(exp.restart_broker(broker))
            elif victim.status == "running" and fault == "kill":
                victim.crash()
            elif victim.status == "running":  # well past the session timeout (10 s): the group moves on
                victim.pause()
                time.sleep(16)
                victim.resume()
        wait_for(lambda: group_caught_up(exp.bootstrap, group, src), f"soak {seed}: group {group} caught up",
                 deadline_s, interval_s=0.5)
    finally:
        sup.stop()
        exp.stop_all()
    hanging = find_hanging(exp.bootstrap, out)
    abort_hanging(exp.bootstrap, hanging)
    exp.final_reads(src, out)
    result = exp.check(out, src)
    race = {(r.partition, r.start_offset) for r in hanging.itertuples()}
    race_lost = sum(1 for a in result.anomalies if a.name == "lost write"
                    and any(a.partition == p and a.offset >= start for p, start in race))
    events = exp.history.events()
    recovery = []
    for ready in ready_times:
        nxt = next((e.mono_ns for e in events if e.mono_ns > ready and e.participant.startswith("proc-")
                    and (e.kind == "txn_end" and e.outcome == "committed" or e.kind == "offsets_committed")), None)
        if nxt is not None:
            recovery.append((nxt - ready) / 1e9)
    return SoakResult(seed, per * partitions, drawn, result.counts(), recovery,
                      [f"{e.participant} in {e.step}" for e in events if e.kind == "stalled"], race_lost,
                      sum(sup.restarts.values()))


def summary(results: list[SoakResult]) -> str:
    """One paragraph: schedules, records, faults, anomalies, recovery times (median, max), stalls."""
    total = lambda key: sum(r.counts[key] for r in results)  # noqa: E731
    rec = [s for r in results for s in r.recovery_s]
    faults = [f for r in results for f in r.faults]
    return (f"{len(results)} schedules, {sum(r.records for r in results)} records, "
            f"{faults.count('kill')} processor kills, {faults.count('pause')} pauses, {faults.count('broker')} broker "
            f"kills, {sum(r.restarts for r in results)} supervisor restarts: {total('duplicate')} duplicates, "
            f"{total('lost write')} lost writes ({sum(r.race_lost for r in results)} to Kafka's marker race), "
            f"{total('unprocessed')} unprocessed; recovery after a broker restart median "
            f"{statistics.median(rec) if rec else float('nan'):.1f} s, max {max(rec, default=float('nan')):.1f} s; "
            f"stalls: {', '.join(s for r in results for s in r.stalls) or 'none'}")
