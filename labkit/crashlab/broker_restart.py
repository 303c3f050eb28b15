"""Kill and restart the broker while transactional processors hold a transaction open.

A crash step of the engine, on any client of :data:`labkit.crashlab.registry.CLIENTS`: KIP-447 processors
(:mod:`labkit.crashlab.roles.processor`) each hold a transaction open after producing its output; the lab waits
until every one of them does, kills the broker (or runs a fault of the caller's, such as a leader's kill on a
cluster) and reads from the history whether each processor's next client call returned or hung. Notebook 08 runs it
on a broker (librdkafka's hang after a restart, issues 5456 and 5511 of librdkafka) and notebook 09 on a cluster
(its ``fault``: an unclean leader election).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from labkit.broker import EmbeddedBroker
from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_for, wait_until
from labkit.crashlab.experiment import Experiment

#: Seconds the processors of :func:`broker_restart_in_transaction` may take to all hold a transaction open (each starts
#: a JVM or librdkafka, joins its group and begins a transaction): about 10 s here; 90 s was overrun on one busy core
#: (``make test SPEED=half``, the suite's other workers beside it). Only a failing run waits that long.
HOLD_DEADLINE_S = 300
#: The least time (ms) left of every processor's hold when the lab kills the broker: a processor counts as holding its
#: transaction open only within ``hold_ms`` minus this of its output's acknowledgement, so that the kill, which
#: follows the lab's last look at the history by a moment (longer on a busy machine), still lands inside every hold.
HOLD_LEFT_MS = 1500


def broker_restart_in_transaction(exp: Experiment, broker: EmbeddedBroker | None, *,
                                  clients: tuple[str, ...] = ("librdkafka",), mitigation: bool = True, inputs: int = 6,
                                  hold_ms: int = 2500, call_deadline_ms: int = 15_000, config: dict | None = None,
                                  fault: Callable[[dict], int] | None = None,
                                  output_replicas: list[int] | None = None) -> dict:
    """Kill the broker while every processor holds a transaction open; tell which recovered.

    A KIP-447 processor per client of ``clients`` (:data:`labkit.crashlab.registry.CLIENTS`; ``processor-<client>``,
    one input per transaction, each on input and output topics of its own) holds each transaction open ``hold_ms`` ms
    after producing its output; once every processor has committed a transaction and holds the next one open, the
    broker is kill -9'd and restarted (one restart for all of them). Then: does each processor's next client call
    return (and the processor go on to process every input), or does it hang?

    The hang is librdkafka's (issues 5456, 5511): when every broker is down it re-bootstraps, and its cached
    group coordinator keeps pointing at the dead connection, so ``send_offsets_to_transaction`` waits until
    another connection changes state (the broker's ``connections.max.idle.ms``, 600 s), past its timeout.
    labkit's librdkafka processor sets ``metadata.recovery.strategy=none`` on its transactional producer and its
    consumer (no re-bootstrap: the old connection reconnects); ``mitigation=False`` puts librdkafka's default
    (``rebootstrap``) back. The Java processor always runs with the Java client's default, ``rebootstrap``
    (``CommonClientConfigs.DEFAULT_METADATA_RECOVERY_STRATEGY``, KIP-1102): ``mitigation`` does not apply to it.

    Args:
        exp: the experiment (its broker must be ``broker``).
        broker: the :class:`EmbeddedBroker` to kill and restart (``None`` with ``fault``).
        clients: the processors' clients, run side by side.
        mitigation: whether the librdkafka processors keep labkit's ``metadata.recovery.strategy=none``.
        inputs: records in each input topic (one partition).
        hold_ms: how long a processor waits after producing each output, transaction open (ms); more than
            :data:`HOLD_LEFT_MS`. With several clients, the kill waits for a moment when every one holds with
            :data:`HOLD_LEFT_MS` to spare: a hold of twice that or more leaves such a moment in every cycle.
        call_deadline_ms: the lab's deadline for each client call (ms), past which a processor is
            reported stalled.
        config: extra client configs for every processor (e.g. another mitigation to try).
        fault: in place of the broker's restart, ``fault(runs)`` (``runs``: the return value as built so far, with
            each client's topics): the lab's fault, returning the monotonic time (ns) from which a commit counts
            as recovered (e.g. notebook 09's leader kill on a cluster, returning when a new leader is elected).
        output_replicas: the brokers (node ids, preferred leader first) of every output topic, on a cluster.
    Returns:
        ``{client: {"outcome", "recovery_s", "stalled_in", "processor", "source", "input", "output", "check"}}``:
        ``processor`` and ``source`` are the participants; outcome
        "recovered" (a transaction committed within ``call_deadline_ms`` of the broker being back; the call
        may have been flagged stalled meanwhile if the broker took longer than the deadline to come back) or
        "stalled" (no commit by then: ``stalled_in`` names the call; the processor is then crashed, as a
        supervisor would);
        ``recovery_s``: from the broker being ready to that commit (``None`` if stalled); ``check``: the
        checker's result on the output once the processor ended (``None`` if stalled).
    Raises:
        ValueError: ``hold_ms`` is not more than :data:`HOLD_LEFT_MS`.
        TimeoutError: the processors never all held a transaction open at once (:data:`HOLD_DEADLINE_S`), or a
            processor neither committed nor was flagged stalled.
        LabkitError: a processor ended (or stalled) before the broker's kill: its status is named (e.g.
            "processor-librdkafka failed: _INVALID_ARG" for a config its client refuses).
        LabkitError: the broker was killed after a processor's hold had ended (the history shows it: the run then
            did not test a transaction open at the crash, and says so rather than report it).
    """
    if hold_ms <= HOLD_LEFT_MS:
        raise ValueError(f"hold_ms must be more than {HOLD_LEFT_MS} ms (HOLD_LEFT_MS), not {hold_ms}")
    runs = {}
    for client in clients:
        src, out = exp.topic(f"input-{client}"), exp.topic(f"output-{client}", replicas=output_replicas)
        source = exp.participant(f"source-{client}", "producer", topic=src, iterations=inputs).start()
        source.wait(60)
        runs[client] = {"input": src, "output": out, "source": source}
    rebootstrap = {} if mitigation else {"metadata.recovery.strategy": "rebootstrap"}
    for client, run in runs.items():
        tid = f"{exp.name}-{client}-{uuid.uuid4().hex[:6]}"
        run["processor"] = exp.participant(
            f"processor-{client}", "processor", client=client, topic=run["input"], output_topic=run["output"],
            group_id=f"{tid}-group", transactional_id=tid, batch=1, sleep_at={"after_produce": hold_ms},
            idle_ms=12_000, call_deadline_ms=call_deadline_ms,
            config=(rebootstrap if client == "librdkafka" else {}) | (config or {})).start()
    procs = [run["processor"] for run in runs.values()]
    fresh_ns = (hold_ms - HOLD_LEFT_MS) * 1_000_000

    def all_hold() -> bool:
        ended = [f"{p.name} {status}" for p in procs if (status := p.status) != "running"]
        if ended:
            raise LabkitError(f"before the broker's kill, {', '.join(ended)} (see its *.stderr.log beside "
                              f"{exp.history.path})")
        return all(holds_transaction(exp.history.events(), p.name, time.monotonic_ns() - fresh_ns) for p in procs)

    wait_for(all_hold, "the processors never all held a transaction open at once", HOLD_DEADLINE_S, interval_s=0.05)
    ready_ns = fault(runs) if fault else exp.restart_broker(broker)
    check_killed_in_hold(exp.history.events(), [p.name for p in procs], hold_ms)

    def committed(name: str):
        return next((e for e in exp.history.events() if e.kind == "txn_end" and e.participant == name
                     and e.mono_ns > ready_ns and e.outcome == "committed"), None)

    # recovered: a commit within the deadline after the broker is back; else stalled (the call it is stuck in
    # was flagged by then: it began before the broker came back)
    wait_until(lambda: all(committed(r["processor"].name) or r["processor"].status not in ("running", "stalled")
                           for r in runs.values()), call_deadline_ms / 1000, 0.05)
    for run in runs.values():
        proc, commit = run["processor"], committed(run["processor"].name)
        run.update(outcome="recovered" if commit else proc.status, stalled_in=None, check=None,
                   recovery_s=(commit.mono_ns - ready_ns) / 1e9 if commit else None)
        if not commit and proc.status in ("running", "stalled"):
            wait_for(lambda: proc.stalled_in, f"{proc.name} neither committed nor was flagged stalled", 10)
            run.update(outcome="stalled", stalled_in=proc.stalled_in)
            proc.crash()
    for run in runs.values():
        if run["outcome"] != "stalled":
            wait_until(lambda: run["processor"].status != "running", 120)
            exp.final_reads(run["input"], run["output"])
            run["check"] = exp.check(run["output"], run["input"])
    return runs


#: A processor's steps through a transaction, as its history records them: an output acknowledged, the offsets sent,
#: the commit asked for, the transaction ended.
TXN_STEPS = ("ack", "offsets_sent", "txn_commit_start", "txn_end")


def _steps(events: list, name: str, before_ns: float = float("inf")) -> list:
    """List processor ``name``'s :data:`TXN_STEPS` events before ``before_ns`` (monotonic ns), in order."""
    return [e for e in events if e.participant == name and e.kind in TXN_STEPS and e.mono_ns < before_ns]


def holds_transaction(events: list, name: str, since_ns: int = 0) -> bool:
    """Tell whether processor ``name`` of the history ``events`` holds a transaction open.

    It does once it has committed a transaction and written an output in its next, still open, the output
    acknowledged at ``since_ns`` (monotonic ns) or later: the processor then waits out its hold.
    """
    mine = _steps(events, name)
    return any(e.kind == "txn_end" for e in mine) and mine[-1].kind == "ack" and mine[-1].mono_ns >= since_ns


def check_killed_in_hold(events: list, names: list[str], hold_ms: int) -> None:
    """Check that each processor of ``names`` held its transaction open when the broker was killed.

    It did if its last step before the broker's last crash in ``events`` was an output's acknowledgement, less than
    ``hold_ms`` (ms) before it (the hold begins after the acknowledgement, so it had not ended; a call begun after it
    logs its event only once it returns).

    Raises:
        LabkitError: a processor's hold had ended (each such processor named, with its last step and when).
        StopIteration: ``events`` hold no crash of the broker.
    """
    crash = next(e for e in reversed(events) if e.kind == "crash" and e.participant.split("-")[0] == "broker")
    last = {name: _steps(events, name, crash.mono_ns)[-1] for name in names}
    ended = {name: e for name, e in last.items() if e.kind != "ack" or crash.mono_ns - e.mono_ns >= hold_ms * 1e6}
    if ended:
        raise LabkitError("the broker was killed after the hold of " + ", ".join(
            f"{name} ended (its last {e.kind} came {(crash.mono_ns - e.mono_ns) / 1e9:.2f} s before the kill, the hold "
            f"is {hold_ms / 1000:g} s)" for name, e in ended.items()) + ": this run did not test a transaction open at "
            f"the crash; the machine was too busy for the lab's look at the history to reach the kill within "
            f"HOLD_LEFT_MS ({HOLD_LEFT_MS} ms): run it again with a longer hold_ms")
