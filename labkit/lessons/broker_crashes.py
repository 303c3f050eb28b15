"""Notebook 08, broker crashes: its opening question (:data:`QUESTION`, answered by :func:`open_transaction_outcome`
from the run); what a kill -9 of the broker (the transaction coordinator) does to a transactional processor, and what
the application must do about it."""

from __future__ import annotations

import time
import uuid

import pandas as pd
import plotly.graph_objects as go
from confluent_kafka import Consumer, Producer, TopicPartition

from labkit.broker import EmbeddedBroker
from labkit.broker.multinode import EmbeddedCluster
from labkit.core.errors import LabkitError
from labkit.core.waiting import Deadline, wait_for, wait_until
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.broker_restart import broker_restart_in_transaction
from labkit.crashlab.supervisor import RestartPolicy, Supervisor
from labkit.crashlab.timeline import timeline_figure
from labkit.kafka.hanging import abort_hanging, find_hanging
from labkit.kafka.producers import describe_transaction
from labkit.kafka.records import caught_up_in_child, high_watermarks, last_stable_offsets, produce, read_topic
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.learn.predictions import Question

#: The notebook's opening question: what a broker crash does to a transaction open on it (answered in part 1).
QUESTION = Question(
    "08", "a transaction is open (its records written, not yet committed) when the broker, which is also its "
          "transaction coordinator, is killed with kill -9 and restarted a second later. What becomes of it?",
    {"lost": "Lost: its records are gone from the log",
     "aborted": "Aborted: its records stay in the log, marked aborted, and its input is processed again",
     "carried_on": "Carried on: the producer goes on and commits it"},
    {"lost": "A kill -9 ends the broker's process, not the machine: the records the leader had appended and "
             "acknowledged are in its log files (the operating system's page cache survives the process), and the "
             "restarted broker reads its log back.",
     "aborted": "The coordinator keeps each transaction's state in __transaction_state and reloads it when it starts; "
                "on reload it completes only transactions it had decided (PrepareCommit, PrepareAbort: "
                "TransactionStateManager.loadTransactionsForTxnTopicPartition). An Ongoing one stays Ongoing, and is "
                "aborted only if the producer lets transaction.timeout.ms pass (TransactionCoordinator."
                "abortTimedOutTransactions) or is fenced."})


def open_transaction_outcome(events: list, run: dict) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from its history (``events``: the experiment's, with the
    final reads of ``run``'s output) and ``run`` (one client's entry of :func:`broker_restart_in_transaction`): the
    outputs the processor had acknowledged in the transaction open when the broker crashed, each looked up at the
    partition and offset its acknowledgement gave, in the output partition's log as read after the run (a copy of
    the same output written later, by a transaction that reprocessed its input, is another record at another offset
    and does not count). "lost" if none is at its offset, "aborted" if they are there in an aborted transaction,
    "carried_on" if they are there, committed.

    Raises:
        LabkitError: no broker crash in the history, no transaction open at the crash, the output's log was not read,
            or the log fits no choice (only some of the outputs at their offsets, or with no outcome): the lab's
            failure, named.
    """
    crash = next((e for e in events if e.kind == "crash" and e.participant == "broker"), None)
    if crash is None:
        raise LabkitError("the history holds no crash of the broker")
    name, open_acks = run["processor"].name, []
    for e in events:
        if e.participant == name and e.mono_ns < crash.mono_ns and e.kind in ("ack", "txn_end"):
            open_acks = [] if e.kind == "txn_end" else open_acks + [e]
    if not open_acks:
        raise LabkitError(f"{name} had no transaction open when the broker crashed")
    log = {(e.partition, e.offset): e for e in events if e.kind == "final_read"
           and e.isolation_level == "read_uncommitted" and e.topic == run["output"]}
    if not log:
        raise LabkitError(f"the log of {run['output']} was not read (Experiment.final_reads)")
    at_offsets = [log[a.partition, a.offset] for a in open_acks
                  if (a.partition, a.offset) in log and log[a.partition, a.offset].value_id == a.value_id]
    outcomes = {e.outcome for e in at_offsets}
    if not at_offsets:
        return "lost"
    if len(at_offsets) == len(open_acks) and outcomes in ({"aborted"}, {"committed"}):
        return "aborted" if outcomes == {"aborted"} else "carried_on"
    raise LabkitError(f"the run fits no choice: {len(at_offsets)} of the open transaction's {len(open_acks)} outputs "
                      f"are at their offsets in the log, as {sorted(map(str, outcomes))}")


#: How often :func:`until_stalled` runs the broker restart at most, waiting for librdkafka's processor to stall.
HANG_TRIES = 3


def until_stalled(broker: EmbeddedBroker, name: str = "hang", tries: int = HANG_TRIES, **kwargs) -> list[dict]:
    """Notebook 08's part 2: :func:`broker_restart_in_transaction` with librdkafka's default put back
    (``mitigation=False``) and Kafka's Java client beside it, each try on an :class:`Experiment` of its own, until the
    librdkafka processor stalls, at most ``tries`` times.

    Why tries: once re-bootstrapped, librdkafka's ``TxnOffsetCommit`` waits for its cached group coordinator, a
    decommissioned connection that never changes state again (issue 5511). The request runs again, and then asks for
    the coordinator anew and goes on, only when one of the producer's connections goes up or down
    (``rd_kafka_coord_rkb_monitor_cb`` in ``rdkafka_coord.c``). After a restart the producer's connections have
    usually settled before the request waits (the processor then stalls until the broker closes an idle connection,
    ``connections.max.idle.ms``, 600 s); once in a while one comes up just after, and the processor recovers. Such a
    try is kept and shown, not hidden.

    Args:
        broker: the :class:`EmbeddedBroker` to kill and restart.
        name: the experiments' name; a try's is ``<name>-<try>`` from the second on.
        tries: the most restarts.
        kwargs: passed on to :func:`broker_restart_in_transaction` (e.g. ``hold_ms``).
    Returns:
        One ``{"experiment": Experiment, "runs": <what broker_restart_in_transaction returned>}`` per try, in order;
        the last try's librdkafka outcome is "stalled" unless none stalled.
    Raises:
        what :func:`broker_restart_in_transaction` raises.
    """
    done = []
    for n in range(tries):
        exp = Experiment(name if n == 0 else f"{name}-{n + 1}", broker.bootstrap_servers)
        runs = broker_restart_in_transaction(exp, broker, clients=("librdkafka", "java"), mitigation=False, **kwargs)
        done.append({"experiment": exp, "runs": runs})
        if runs["librdkafka"]["outcome"] == "stalled":
            break
    return done


def tries_table(tries: list[dict]) -> pd.DataFrame:
    """One row per try of :func:`until_stalled`: each client's outcome, the call it stalled in, and its next commit
    after the broker was back (s); "—" where there is none (it stalled, or did not)."""
    columns = {"outcome": "outcome", "stalled in": "stalled_in", "next commit (s)": "recovery_s"}
    rows = [{f"{client} {label}": run[key] for client, run in t["runs"].items() for label, key in columns.items()}
            for t in tries]
    return pd.DataFrame(rows, index=pd.Index(range(1, len(tries) + 1), name="try")).astype(object).fillna("—")


def client_timelines(exp: Experiment, runs: dict, titles: dict[str, str]) -> dict[str, go.Figure]:
    """One record-state timeline (:func:`labkit.timeline_figure`) per client of a
    :func:`broker_restart_in_transaction` run (``runs``, what it returned; ``titles`` by client): each draws its
    source's and processor's events and the broker's crash and return, in seconds since the experiment's first
    event, on the same x range, so the figures can be read one above the other."""
    events = exp.history.events()
    mine = {client: events[:1] + [e for e in events[1:] if e.participant in {run["source"].name, run["processor"].name,
                                                                             "broker"}] for client, run in runs.items()}
    drawn = {client: timeline_figure(mine[client], title=titles[client]) for client in runs}
    end = max(x for fig in drawn.values() for trace in fig.data for x in (trace.x or ()) if x is not None)
    # drawn again on the common axis, so that each figure's action labels are laid out on the axis it shows
    return {client: timeline_figure(mine[client], title=titles[client], end_s=end * 1.02) for client in runs}


def coordinator_node(exp: Experiment, broker: EmbeddedBroker | EmbeddedCluster) -> EmbeddedBroker:
    """The node that coordinates the experiment's transactions: the broker itself, or the cluster's broker
    that leads ``__transaction_state`` (found with a probe transaction: every ``transactional.id`` maps to
    that topic's one partition here)."""
    if not isinstance(broker, EmbeddedCluster):
        return broker
    probe = f"{exp.name}-probe-{uuid.uuid4().hex[:6]}"
    produce(exp.bootstrap, exp.topic("probe"), [], transactional_id=probe)
    return broker.nodes[broker.transaction_coordinator(probe)]


def commit_then_kill(exp: Experiment, broker: EmbeddedBroker | EmbeddedCluster, trials: int = 4, records: int = 5,
                     finalize_timeout_s: float = 10.0) -> pd.DataFrame:
    """Seed 000, section 6 ("if the TC crashes after logging PREPARE_COMMIT, the transaction is finalized upon
    recovery"), tried on the real broker: a transactional producer commits ``records`` records and the broker
    (its transaction coordinator; in an :class:`~labkit.broker.multinode.EmbeddedCluster`, the broker that
    coordinates the transaction) is kill -9'd the moment ``commit_transaction`` returns, then restarted. After
    the restart, wait up to ``finalize_timeout_s`` s for the last stable offset to reach the high watermark
    (the COMMIT marker written); if it does not, look for a hanging transaction as an operator would
    (:func:`labkit.kafka.hanging.find_hanging`) and abort it (the only way to unblock read_committed readers).

    Returns:
        One row per trial: ``trial``, ``outcome`` ("finalized" or "hanging"), ``finalized_s`` (from the broker
        being ready to LSO = high watermark; ``None`` if hanging), ``coordinator_state`` (DescribeTransactions
        after the restart), ``lso``/``high_watermark`` (before any abort), ``read_committed`` (records a
        read_committed consumer sees in the end, after the abort if one was needed).
    Raises:
        BrokerNotReadyError: the broker did not come back.
    """
    rows = []
    for trial in range(1, trials + 1):
        topic, tid = exp.topic(f"commit{trial}"), f"{exp.name}-{uuid.uuid4().hex[:6]}"
        victim = coordinator_node(exp, broker)
        produce(exp.bootstrap, topic, [f"{tid}-{i}" for i in range(records)], transactional_id=tid)
        ready_ns = exp.restart_broker(victim)
        finalized = wait_until(lambda: last_stable_offsets(exp.bootstrap, topic) == high_watermarks(exp.bootstrap, topic),
                               finalize_timeout_s, 0.05)
        finalized_s = (time.monotonic_ns() - ready_ns) / 1e9 if finalized else None
        lso, hw = last_stable_offsets(exp.bootstrap, topic)[0], high_watermarks(exp.bootstrap, topic)[0]
        hanging = find_hanging(exp.bootstrap, topic) if not finalized else None
        if hanging is not None:
            abort_hanging(exp.bootstrap, hanging)
        rows.append({"trial": trial, "outcome": "finalized" if finalized else "hanging", "finalized_s": finalized_s,
                     "coordinator_state": describe_transaction(exp.bootstrap, tid)["state"], "lso": lso,
                     "high_watermark": hw, "found_hanging": None if hanging is None else len(hanging),
                     "read_committed": len(read_topic(exp.bootstrap, topic, "read_committed"))})
    return pd.DataFrame(rows)


def supervised_processor(exp: Experiment, *, inputs: int = 6, crash_iteration: int = 3,
                         crash_at: str = "after_produce") -> dict:
    """A KIP-447 processor (one input per transaction) under a :class:`~labkit.crashlab.supervisor.Supervisor`,
    SIGKILLed at ``crash_at`` (a processor step, :data:`labkit.crashlab.roles.processor.ROLE`; by default
    ``after_produce``: its transaction open, its output written) of input ``crash_iteration``. The
    supervisor starts it again; the new instance's ``init_transactions`` fences the old epoch and aborts the
    transaction it left (``txn_init`` and ``txn_end`` in the history), and it carries on.

    Returns:
        ``{"input", "output", "processor", "supervisor", "check"}`` once the processor finished (final reads
        recorded).
    Raises:
        TimeoutError: the processor did not finish within 120 s.
    """
    src, out = exp.topic("input"), exp.topic("output")
    exp.participant("source", "producer", topic=src, iterations=inputs).start().wait(60)
    tid = f"{exp.name}-{uuid.uuid4().hex[:6]}"
    proc = exp.participant("processor", "processor", topic=src, output_topic=out, group_id=f"{tid}-group",
                           transactional_id=tid, batch=1, idle_ms=15_000, crash_at=crash_at,
                           crash_iteration=crash_iteration)
    with Supervisor() as sup:
        sup.supervise(proc.start(), RestartPolicy(backoff_ms=500))
        sup.wait(120)
    exp.final_reads(src, out)
    return {"input": src, "output": out, "processor": proc, "supervisor": sup, "check": exp.check(out, src)}


def restart_after_commit(exp: Experiment) -> dict:
    """Notebook 08's exercise run: :func:`supervised_processor` on ``exp`` killed ``after_commit`` of input 3 (about
    40 s), and what its restart did: ``{"outcome"`` (what the new instance's ``init_transactions`` did to the old
    instance's last transaction: "aborted", "committed" or ``None``), ``"first_input"`` (the number ``n`` of the
    first input ``source-<n>`` the restarted instance consumed), ``"read_uncommitted"`` (copies of input 3's output
    ``source-3>out`` that read_uncommitted returns at the end), ``"state"`` (the coordinator's state of the
    ``transactional.id`` when ``init_transactions`` ran)``}``, all from the history. The run is made once per
    experiment: when ``exp``'s history already holds it, it is read back, so every answer is graded against the same
    real run.

    Raises:
        TimeoutError: the processor did not finish within 120 s.
        RuntimeError: the history has no restart, or the restarted instance consumed nothing.
    """
    if not any(e.kind == "txn_init" for e in exp.history.events()):
        supervised_processor(exp, crash_at="after_commit")
    events = exp.history.events()
    init = next(e for e in events if e.kind == "txn_init")  # the restart's
    restart = next((e for e in events if e.kind == "restart"), None)
    first = next((e.value_id for e in events if restart and e.kind == "consume"
                  and e.participant == restart.participant and e.mono_ns > restart.mono_ns), None)
    if first is None:
        raise RuntimeError(f"{exp.name}: no restarted instance consumed an input (restart: {restart})")
    copies = sum(e.kind == "final_read" and e.isolation_level == "read_uncommitted" and e.value_id == "source-3>out"
                 for e in events)
    return {"outcome": init.outcome, "first_input": int(first.rsplit("-", 1)[1]), "read_uncommitted": copies,
            "state": init.state}


#: What notebook 08's exercise asks, and a hint for each part answered wrong (none gives the answer away).
RESTART_HINTS = {
    "outcome": "init_transactions ends what the old instance left unfinished. Once commit_transaction has returned, "
               "the coordinator has logged the decision to commit and writes the markers itself: what is left for "
               "init_transactions to end?",
    "first_input": "The restarted instance starts where the group's committed offset says. Input 3's offset went "
                   "into the same transaction as its output (send_offsets_to_transaction, KIP-447): did that "
                   "transaction commit before the kill?",
    "read_uncommitted": "read_uncommitted returns every copy in the log, aborted ones too: how many times was input "
                        "3's output written, counting the restarted instance?",
}


@marked
def check_restart_prediction(exp: Experiment, answer: object) -> Verdict:
    """Notebook 08's exercise: predict what the supervised processor's restart does when it was killed
    ``after_commit`` (``commit_transaction`` of input 3 returned) instead of part 4's ``after_produce``. ``answer``:
    ``{"outcome": "aborted" | "committed" | None (what init_transactions did to the old instance's last
    transaction), "first_input": <n, int: the first input source-<n> the restarted instance processes>,
    "read_uncommitted": <int: copies of input 3's output read_uncommitted returns>}``. None of the three is in a table
    of the notebook: each follows from what a returned ``commit_transaction`` means. Checked against a real run on
    ``exp`` (:func:`restart_after_commit`: made by the first answer checked, about 40 s; read back for the others);
    each part answered wrong gets its own hint (:data:`RESTART_HINTS`), and the verdict names the wrong parts."""
    keys = tuple(RESTART_HINTS)
    if (v := unanswered(answer, '{"outcome": ..., "first_input": ..., "read_uncommitted": ...}')):
        return v
    if not isinstance(answer, dict) or set(answer) != set(keys):
        return Verdict("wrong", f"The answer is a dict with exactly the keys {sorted(keys)}.")
    real = restart_after_commit(exp)
    wrong = [k for k in keys if answer[k] != real[k] or type(answer[k]) is bool]
    if not wrong:
        asked = {k: real[k] for k in keys}
        ended = ("had nothing to end and only bumped the epoch" if real["outcome"] is None
                 else f"{real['outcome']} it")
        seen = " (the state part 3's table shows after a returned commit)" if real["state"] == "CompleteCommit" else ""
        copies = f"{real['read_uncommitted']} cop{'y' if real['read_uncommitted'] == 1 else 'ies'}"
        return Verdict("right", f"The run agrees: {asked}. init_transactions found the transaction "
                                f"{real['state']}{seen} and {ended}; the group's committed offset started the "
                                f"restarted instance at input {real['first_input']}, and read_uncommitted returned "
                                f"{copies} of input 3's output.")
    return Verdict("wrong", " ".join(RESTART_HINTS[k] for k in wrong) + f" (wrong: {', '.join(wrong)})")


def _commit_then_leave_open(bootstrap: str, topic: str, group: str, committed: int, pending: int) -> Producer:
    """Partition 0 of ``topic`` in ``group``: offset ``committed`` committed in a transaction, ``pending`` sent in a
    second one left open (as a processor SIGKILLed after ``send_offsets_to_transaction`` leaves it). Returns the
    producer holding it open (``transaction.timeout.ms`` 60 000)."""
    member = Consumer(_group_config(bootstrap, group))
    member.subscribe([topic])
    wait_for(lambda: (member.poll(0.2), member.assignment())[1], f"an assignment in group {group}", 30, interval_s=0,
             hint="the broker's server.log")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-held",
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    for offset, commit in ((committed, True), (pending, False)):
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], member.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
    member.close()
    return producer


def _group_config(bootstrap: str, group: str) -> dict:
    return {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest"}


def _plain_first_offset(bootstrap: str, topic: str, group: str, join_after_s: float = 3.0) -> int | None:
    """The first offset of partition 0 a plain librdkafka consumer of ``group`` returns, a second member joining
    after ``join_after_s`` s (within 30 s; None if none)."""
    consumer, other = Consumer(_group_config(bootstrap, group)), None
    give_up, join_at = Deadline(30), Deadline(join_after_s)
    consumer.subscribe([topic])
    try:
        while not give_up.expired():
            m = consumer.poll(0.2)
            if m is not None and not m.error() and m.partition() == 0:
                return m.offset()
            if other is None and join_at.expired():
                other = Consumer(_group_config(bootstrap, group))
                other.subscribe([topic])
            if other is not None:
                other.poll(0)
        return None
    finally:
        consumer.close()
        if other is not None:
            other.close()


def start_below_committed(exp: Experiment, committed: int = 50, pending: int = 80) -> pd.DataFrame:
    """librdkafka 2.16 starting a partition below its committed offset (:mod:`labkit.kafka.committed_start`),
    twice on ``exp``'s broker. Input: 2 partitions of 200 records. In a fresh group, partition 0 has offset
    ``committed`` committed and ``pending`` held by an open transaction; a member subscribes and a second joins
    3 s later (the assignment changes while the first one's offset fetch is answered UNSTABLE_OFFSET_COMMIT);
    the open transaction is aborted about 12 s in. Once with plain librdkafka consumers, once with two of labkit's
    processors (their guard on).

    Returns:
        One row per run: ``consumer``, ``committed`` (offset), ``first offset`` of partition 0 consumed,
        ``offset_reset`` (the guard's corrections, from the history). About 40 s.
    Raises:
        TimeoutError: a step did not happen within its deadline (the message names it).
    """
    src = exp.topic("input", 2)
    for p in range(2):
        exp.participant(f"source-{p}", "producer", topic=src, partition=p, iterations=2, batch=100).start()
    for p in range(2):
        exp.participants[f"source-{p}"].wait(60)
    group = f"{src}-plain"
    held = _commit_then_leave_open(exp.bootstrap, src, group, committed, pending)
    try:
        plain = _plain_first_offset(exp.bootstrap, src, group)
    finally:
        held.abort_transaction(30)
    group = f"{src}-guarded"
    held = _commit_then_leave_open(exp.bootstrap, src, group, committed, pending)
    # stopped below once the group caught up; until then they only poll: their own caught-up check (an OffsetFetch
    # of the committed offsets) would run beside the offset fetch whose race this is, and can change its outcome
    spec = dict(topic=src, output_topic=exp.topic("output", 2), group_id=group, batch=20, idle_ms=60_000,
                stop_when_caught_up=False)
    procs = [exp.participant("proc-b", "processor", transactional_id=f"{group}-b", **spec).start()]
    time.sleep(3)  # the second member joins while the first one's offset fetch is answered unstable
    procs.append(exp.participant("proc-c", "processor", transactional_id=f"{group}-c", **spec).start())
    time.sleep(9)
    held.abort_transaction(30)  # the pending offsets go; the committed one stays
    wait_for(lambda: caught_up_in_child(exp.bootstrap, group, src), f"group {group} caught up", 60, interval_s=0.5)
    for p in procs:
        p.stop()
    events = exp.history.events()
    consumed = [e.offset for e in events if e.kind == "consume" and e.partition == 0 and e.topic == src]
    resets = sum(e.kind == "offset_reset" for e in events)
    return pd.DataFrame([("librdkafka consumer", committed, plain, None),
                         ("labkit processor (guard)", committed, min(consumed, default=None), resets)],
                        columns=["consumer", "committed", "first offset", "offset_reset"])
