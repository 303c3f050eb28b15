"""Notebook 09, what exactly-once assumes of replication, on a three-broker cluster
(:class:`~labkit.broker.multinode.EmbeddedCluster`): a leader killed under an open transaction (it holds), an
output partition short of in-sync replicas (it refuses), and the guard lowered (an unclean leader election loses a
committed transaction). Its opening question (:data:`QUESTION`) is answered by :func:`loss_outcome` from part 3's run.
"""

from __future__ import annotations

import contextlib
import time

import pandas as pd
from confluent_kafka import Producer

from labkit.broker.multinode import EmbeddedCluster
from labkit.broker.probe import KAFKA_LOG
from labkit.core.background import Periodic
from labkit.core.errors import BrokerUnreachableError, LabkitError
from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.api_versions import broker_features
from labkit.kafka.wire import Reader, Writer, call, error_name
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.learn.predictions import Question
from labkit.crashlab.broker_restart import broker_restart_in_transaction

#: The notebook's opening question, on part 3's run (answered by :func:`loss_outcome`).
QUESTION = Question(
    "09", "an output partition has two replicas, min.insync.replicas=1 and unclean.leader.election.enable=true. "
          "Its follower's broker dies; a transaction then commits on the leader alone; then the leader's broker dies "
          "and the follower's broker comes back. What becomes of the committed transaction's records?",
    {"kept": "Kept: the producer was told they committed, so they are in the log for good",
     "lost": "Lost: the follower that missed them becomes leader, and the old leader, back, drops them",
     "offline": "Neither, yet: the partition stays offline until the old leader's broker returns"},
    {"kept": "A commit is as durable as the replicas that hold it: with the follower gone the leader alone made up "
             "the ISR, and min.insync.replicas=1 let it take the records and the COMMIT marker (the leader refuses an "
             "acks=all write only while the ISR is smaller than min.insync.replicas, Partition.appendRecordsToLeader; "
             "it answers one once the high watermark passes it, that is once every ISR member has it, here the leader "
             "alone: DelayedProduce, Partition.checkEnoughReplicasReachOffset); nothing else ever held them.",
     "offline": "That is what the default, unclean.leader.election.enable=false, does (the part's control run shows "
                "it). With it true on the topic, the KRaft controller elects any live replica once no in-sync one is "
                "left (PartitionChangeBuilder), and does so as the follower's broker is unfenced."})

#: A topic's settings in part 3's runs and in their control (part 2), as given to CreateTopics.
GUARDED = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
LOWERED = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}


def pair(cluster: EmbeddedCluster) -> tuple[int, int, int]:
    """``(leader, follower, spare)`` node ids for an output partition of parts 1 to 3: the leader and the follower
    never lead ``__transaction_state`` (its one partition: the lab's ``transaction.state.log.num.partitions=1``), and
    lead ``__consumer_offsets`` only where the cluster allows no better (their kills then move no transaction
    coordinator; part 4 kills a coordinator on purpose). Killing the transaction coordinator's broker right after a
    commit makes the next coordinator send the COMMIT markers of transactions it had not yet completed again
    (``TransactionCoordinator.onElection`` loads the log; a transaction still in PrepareCommit gets its markers
    anew): measured, the output's leader then held a second COMMIT marker of each writer (offsets 8 and 9 after 0-7),
    which a follower picked as the coordinator's broker had given part 3's log end an offset no writer wrote. On a
    fresh cluster it first waits for both topics to have leaders (asking for them has them created).

    Raises:
        LabkitError: fewer than 3 brokers.
        TimeoutError: either topic without a leader after 30 s.
    """
    if len(cluster.brokers) < 3:
        raise LabkitError(f"notebook 09 needs a cluster of 3 brokers or more, not {len(cluster.brokers)}")
    leaders: dict[str, set[int]] = {}

    def both_led() -> bool:
        leaders.update({topic: cluster.leaders(topic) for topic in ("__transaction_state", "__consumer_offsets")})
        return all(leaders.values())

    # a fresh cluster has neither topic: the Metadata request that names them has them created (seen on 4.4.0: led
    # within 2 s), and reading "no leaders" then picked the coordinators' broker as the leader to kill
    wait_for(both_led, "leaders of __transaction_state and __consumer_offsets", timeout_s=30.0,
             hint="the nodes' server.log files")
    order = sorted(cluster.brokers, key=lambda n: (n in leaders["__transaction_state"],
                                                   n in leaders["__consumer_offsets"], n))
    return order[0], order[1], order[2]


def elr_version(bootstrap: str) -> int | None:
    """The finalized ``eligible.leader.replicas.version`` of the cluster of the broker at ``bootstrap``'s first
    address (KIP-966: 1 on, 0 off; ``None`` if not finalized, as a cluster formatted before metadata version 4.1-IV0
    and never upgraded answers), as the broker answers ApiVersions (KIP-584's FinalizedFeatures). Kafka's
    ``EligibleLeaderReplicasVersion``: level 1 is the default of a cluster formatted at metadata version 4.1-IV0 or
    later (its bootstrap metadata version).

    Raises:
        what :func:`labkit.kafka.api_versions.broker_features` raises (no answer within 5 s).
    """
    return broker_features(bootstrap).get("eligible.leader.replicas.version", {}).get("finalized")


#: ListOffsets' API key, the version sent (6: the first flexible one) and its timestamp for the log's end (LATEST).
_LIST_OFFSETS, _LIST_OFFSETS_VERSION, _LATEST = 2, 6, -1
#: The replica id of a debugging client: Kafka answers its ListOffsets without an isolation level, with the log end.
_DEBUGGING_REPLICA_ID = -2


def log_end_offset(address: str, topic: str, partition: int = 0, timeout_s: float = 5.0) -> int | None:
    """The log end offset of ``topic``'s ``partition`` on the broker at ``address`` (``"host:port"``): the offset
    its next appended record would take, appended but not yet replicated records included. A ListOffsets request for
    the latest offset sent as a debugging client (replica id -2): Kafka answers a consumer's (-1) with the high
    watermark or the last stable offset, a debugging client's with the local log's end, and from any replica, not
    only the leader (``ReplicaManager.fetchOffset``, ``Partition.fetchOffsetForTimestamp``). ``None`` if the broker
    answers an error for the partition (e.g. it holds no replica of it).

    Raises:
        BrokerUnreachableError: no answer within ``timeout_s`` seconds (e.g. the broker is down).
    """
    def request_partition(w: Writer, p: int) -> None:
        w.pack(">i", p).pack(">i", -1).pack(">q", _LATEST).no_tags()  # no current leader epoch: not fenced by it

    def request_topic(w: Writer, name: str) -> None:
        w.compact_string(name).compact_array([partition], request_partition).no_tags()

    body = (Writer().pack(">i", _DEBUGGING_REPLICA_ID).pack(">b", 0)
            .compact_array([topic], request_topic).no_tags().bytes())
    r = call(address, _LIST_OFFSETS, _LIST_OFFSETS_VERSION, body, timeout_s)
    r.int32()  # throttle

    def answer_partition(r: Reader) -> int | None:
        _index, code, _timestamp, offset, _epoch = r.int32(), r.int16(), r.int64(), r.int64(), r.int32()
        r.tags()
        return None if error_name(code) else offset

    def answer_topic(r: Reader) -> list:
        r.compact_string()
        parts = r.compact_array(answer_partition)
        r.tags()
        return parts

    ((offset,),) = r.compact_array(answer_topic)
    return offset


#: How often the lab reads the output's log end offset on its leader while part 2's writers wait, s.
LOG_END_INTERVAL_S = 0.25


def sample_log_end(exp: Experiment, address: str, broker: str, topic: str,
                   interval_s: float = LOG_END_INTERVAL_S) -> Periodic:
    """Read ``topic``'s partition 0 log end offset on the broker at ``address`` (:func:`log_end_offset`) every
    ``interval_s`` seconds in the background and write each reading into ``exp``'s history, a ``log_end`` event of
    participant ``broker`` (e.g. "broker-2"): when that replica appended records, as the lab saw it, to
    ``interval_s``. Every reading, not only the changes: the timeline draws a write not in the log up to the last
    reading before its ack that had not reached it (:func:`labkit.crashlab.timeline.writes`), and a reading that
    repeats the last is what says so of a write sent since. A reading without an answer (the broker unreachable
    within a second, or no replica there) writes nothing.

    Returns:
        The running :class:`~labkit.core.background.Periodic`; ``stop()`` it, and it reads once more.
    """
    def read() -> None:
        with contextlib.suppress(BrokerUnreachableError):
            offset = log_end_offset(address, topic, timeout_s=max(interval_s, 1.0))
            if offset is not None:
                exp.history.append("log_end", broker, topic=topic, partition=0, offset=offset)

    sampler = Periodic("labkit-log-end", read, interval_s, last_round=True)
    sampler.start()
    return sampler


def _frame(states: list[dict]) -> pd.DataFrame:
    """The moments' partition states as a table, an offline partition's leader, high watermark and leader's log end
    offset shown <NA>."""
    return pd.DataFrame(states).astype({"leader": "Int64", "high_watermark": "Int64", "log_end_offset": "Int64"})


def _moment(cluster: EmbeddedCluster, topic: str, moment: str, state: dict | None = None) -> dict:
    """A row of a run's table: ``state`` (:meth:`EmbeddedCluster.partition_state`'s, read now if ``None``) at
    ``moment``, with ``log_end_offset``, the log end offset of the replica on the broker ``state`` names leader
    (:func:`log_end_offset`, read right after; ``None`` while the partition is offline or that broker is gone)."""
    state = cluster.partition_state(topic) if state is None else state
    leo = None
    if state["leader"] is not None:
        with contextlib.suppress(BrokerUnreachableError):  # that broker died since: as unknown as an offline leader's
            leo = log_end_offset(cluster.brokers[state["leader"]].bootstrap_servers, topic)
    return {"moment": moment, **state, "log_end_offset": leo}


def _kill(exp: Experiment, cluster: EmbeddedCluster, node: int) -> None:
    cluster.kill(node)
    exp.history.append("crash", f"broker-{node}")


def _restart(exp: Experiment, cluster: EmbeddedCluster, node: int) -> int:
    """Restart ``node``'s broker and log its ``start`` once the lab sees it ready; returns the monotonic ns the restart
    began (the broker may serve, and rejoin ISRs, before the lab sees it ready)."""
    began_ns = time.monotonic_ns()
    cluster.restart(node)
    exp.history.append("start", f"broker-{node}")
    return began_ns


def leader_kill_in_transaction(exp: Experiment, cluster: EmbeddedCluster, clients: tuple[str, ...] = CLIENTS,
                               hold_ms: int = 4000) -> dict:
    """Part 1: a KIP-447 processor per client (:func:`~labkit.crashlab.broker_restart.broker_restart_in_transaction`:
    one input per transaction, each held open ``hold_ms`` ms after its output's acknowledgement) writes to an output
    partition on all three brokers (the cluster's replication factor 3, min.insync.replicas=2); while every one holds
    a transaction open the lab kill -9s the output partition's leader and waits for the controller to elect another
    (a Metadata answer naming a live leader), then restarts the killed broker once every processor is done, and waits
    until it is back in the ISR.

    Returns:
        ``{"runs": {client: run}, "states": DataFrame (moment, leader, replicas, isr, high_watermark, live,
        log_end_offset: the leader's, :func:`log_end_offset`),
        "killed": node id, "leaderless_s": seconds from the kill to a new leader in the metadata}``; each ``run`` as
        :func:`~labkit.crashlab.broker_restart.broker_restart_in_transaction` returns it.
    Raises:
        What :func:`~labkit.crashlab.broker_restart.broker_restart_in_transaction` raises; TimeoutError: no new leader
        within 60 s.
    """
    leader, follower, spare = pair(cluster)
    states, timing = [], {}

    def kill_leader(runs: dict) -> int:
        out = next(iter(runs.values()))["output"]
        states.append(_moment(cluster, out, "before the kill"))
        killed = cluster.kill_leader(out)
        exp.history.append("crash", f"broker-{killed}")
        killed_ns = time.monotonic_ns()
        after = cluster.await_partition(out, lambda s: s["leader"] not in (None, killed), "a new leader")
        elected_ns = time.monotonic_ns()
        timing.update(killed=killed, leaderless_s=(elected_ns - killed_ns) / 1e9)
        states.append(_moment(cluster, out, "new leader elected", after))
        return elected_ns

    runs = broker_restart_in_transaction(exp, None, clients=clients, hold_ms=hold_ms, fault=kill_leader,
                                         output_replicas=[leader, follower, spare])
    out = next(iter(runs.values()))["output"]
    states.append(_moment(cluster, out, "processors done"))
    killed = timing["killed"]
    _restart(exp, cluster, killed)
    states.append(_moment(cluster, out, "killed broker back in the ISR",
                          cluster.await_partition(out, lambda s: killed in s["isr"], f"broker {killed} back in the ISR")))
    return {"runs": runs, "states": _frame(states), "killed": killed, "leaderless_s": timing["leaderless_s"]}


def _writers(exp: Experiment, topic: str, clients: tuple[str, ...], label: str, first: int, records: int) -> list:
    """One transactional producer per client, each committing one transaction of ``records`` records to ``topic``."""
    return [exp.participant(f"{label}-{client}", "producer", client=client, topic=topic, mode="transactional",
                            transactional_id=f"{exp.name}-{label}-{client}-{exp.run_id}", iterations=1,
                            batch=records, first=first, call_deadline_ms=20_000).start() for client in clients]


def _finish(writers: list, timeout_s: float = 120.0) -> None:
    for w in writers:
        status = w.wait(timeout_s)
        if status != "finished":
            raise LabkitError(f"{w.name} ended {status!r}, not having committed its transaction: see "
                              f"{w.stderr_log}")


def probe_produce(bootstrap: str, topic: str, timeout_s: float = 15.0) -> str | None:
    """One record produced with acks=all, no retries and no idempotence, so the broker's answer is not retried
    away: ``None`` if the leader appended it, else the error name it answered (e.g. ``"NOT_ENOUGH_REPLICAS"``,
    ``Partition.appendRecordsToLeader`` with fewer in-sync replicas than the topic's min.insync.replicas).

    Raises:
        TimeoutError: no answer within ``timeout_s`` seconds.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "enable.idempotence": False,
                         "message.timeout.ms": int(timeout_s * 1000), "logger": KAFKA_LOG})
    answer = []
    producer.produce(topic, b"probe", on_delivery=lambda err, _msg: answer.append(err))
    producer.flush(timeout_s + 5)
    if not answer:
        raise TimeoutError(f"the probe produce to {topic} was not answered within {timeout_s:g} s")
    return None if answer[0] is None else answer[0].name()


def follower_lost(exp: Experiment, cluster: EmbeddedCluster, config: dict[str, str], *,
                  clients: tuple[str, ...] = CLIENTS, records: int = 3, offline_s: float = 5.0) -> dict:
    """Parts 2 and 3, one run: an output partition on two brokers (leader, follower; the third broker keeps the
    transaction log's second in-sync replica, ``transaction.state.log.min.isr=2``) with topic configs ``config``
    (:data:`GUARDED` or :data:`LOWERED`). Each client's first writer commits a transaction of ``records`` records
    with both replicas in sync; the follower's broker is killed and the lab waits for the controller to shrink the ISR
    to the leader; the second writers then write their transaction and a probe produce (:func:`probe_produce`) says
    whether the leader appends with acks=all (to a probe topic of the same brokers and configs).

    - Refused (min.insync.replicas=2): the leader does not append the second writers' records (``NOT_ENOUGH_REPLICAS``,
      which both clients retry); after ``offline_s`` the follower's broker is restarted and the writers go on (as
      they do only while the outage is shorter than their transaction and delivery timeouts).
    - Accepted (min.insync.replicas=1): the second writers commit on the leader alone; then the leader's broker is
      killed, the follower's restarted, and the lab watches for ``offline_s`` seconds (or until a leader is elected);
      then the old leader's broker is restarted and the lab waits for both replicas in the ISR.

    From before the second writers start until they end, the leader's log end offset is read into the history every
    :data:`LOG_END_INTERVAL_S` seconds (:func:`sample_log_end`). Then the output is read back
    (:meth:`Experiment.final_reads`) and checked.

    Returns:
        ``{"output", "leader", "follower", "config", "probe" (error name or None), "states" (DataFrame, one row per
        moment, columns as :func:`leader_kill_in_transaction`'s: the leader's log end offset says whether it appended
        the second writers' records, which the high watermark cannot: Kafka 4.3 and 4.4 do not advance it while the ISR
        is smaller than min.insync.replicas, ``Partition.maybeIncrementLeaderHW``, KIP-966), "elected" (the node the
        controller elected while the old leader was down, None if it stayed offline; min.insync.replicas=1 only),
        "restart_began_ns" (monotonic ns the lab began restarting the follower's broker, the refused case only: its
        ``start`` event comes once the lab sees it ready, and the writers may commit in between), "check"}``.
    Raises:
        LabkitError: a writer did not commit; TimeoutError: the cluster did not reach an awaited state in 60 s.
    """
    leader, follower, _ = pair(cluster)
    out, probed = (exp.topic(label, replicas=[leader, follower], config=config) for label in ("output", "probe"))
    _finish(_writers(exp, out, clients, "first", 1, records))
    states = [_moment(cluster, out, "first transactions committed")]
    _kill(exp, cluster, follower)
    states.append(_moment(cluster, out, "follower's broker killed, ISR shrunk",
                          cluster.await_partition(out, lambda s: s["isr"] == [leader], "the ISR shrunk to the leader")))
    cluster.await_partition(probed, lambda s: s["isr"] == [leader], "the probe topic's ISR shrunk to the leader")
    # when the leader appends the second writers' records, as the lab reads its log end offset
    appended = sample_log_end(exp, cluster.brokers[leader].bootstrap_servers, f"broker-{leader}", out)
    try:
        second = _writers(exp, out, clients, "second", records + 1, records)
        probe = probe_produce(cluster.live_bootstrap, probed)  # a topic of the same brokers and configs: not the output
        elected = restart_began_ns = None
        if probe is not None:  # refused: the writers wait; the follower's return lets them on
            time.sleep(offline_s)
            states.append(_moment(cluster, out, f"{offline_s:g} s later, writers waiting"))
            restart_began_ns = _restart(exp, cluster, follower)
            _finish(second)
            appended.stop()
            states.append(_moment(cluster, out, "follower back, second transactions committed"))
        else:
            _finish(second)
            appended.stop()
            states.append(_moment(cluster, out, "second transactions committed on the leader alone"))
            _kill(exp, cluster, leader)
            states.append(_moment(cluster, out, "leader's broker killed",
                                  cluster.await_partition(out, lambda s: s["leader"] is None, "the partition offline")))
            _restart(exp, cluster, follower)
            try:
                state = cluster.await_partition(out, lambda s: s["leader"] is not None, "a leader", timeout_s=offline_s)
                elected = state["leader"]
            except TimeoutError:
                state = cluster.partition_state(out)
            states.append(_moment(cluster, out, "follower's broker back", state))
            _restart(exp, cluster, leader)
            states.append(_moment(cluster, out, "old leader's broker back, both in the ISR", cluster.await_partition(
                out, lambda s: s["isr"] == sorted([leader, follower]), "both replicas in the ISR")))
    finally:
        appended.stop()  # again after a stop above (nothing more), or after an error (it must not read on)
    exp.final_reads(out)
    return {"output": out, "leader": leader, "follower": follower, "config": dict(config), "probe": probe,
            "states": _frame(states), "elected": elected, "restart_began_ns": restart_began_ns, "check": exp.check(out)}


def loss_outcome(run: dict) -> str:
    """Which choice of :data:`QUESTION` part 3's ``run`` (:func:`follower_lost` with min.insync.replicas=1) bore
    out, from its checker (lost writes of committed transactions) and the leader the controller elected:
    "lost" if the checker found lost writes, "offline" if no leader was elected while the old leader was down and
    nothing was lost, "kept" if a leader was elected and nothing was lost.

    Raises:
        LabkitError: the run is not one where the leader accepted the writes alone (its probe was refused).
    """
    if run["probe"] is not None:
        raise LabkitError(f"the leader refused the writes ({run['probe']}): this run does not answer the question")
    if run["check"].count("lost write"):
        return "lost"
    return "offline" if run["elected"] is None else "kept"


#: Part 3's exercise: what to say about the unclean run, and the hint for each part answered wrong.
LOSS_HINTS = {
    "elected": "Which replica's broker was up when the controller elected a leader? The old leader's was still down.",
    "lost": "Count records, not offsets: a transaction's COMMIT marker (a control record) takes an offset of its own "
            "but is no record a consumer reads; and count every client's second transaction.",
    "high_watermark": "The high watermark after the election is the new leader's log end: what had the follower "
                      "copied before its broker was killed (records and control records)?",
}


@marked
def check_loss(run: dict, answer: object) -> Verdict:
    """Notebook 09's exercise, on part 3's unclean run (``run``: :func:`follower_lost`'s result with
    :data:`LOWERED`): ``answer`` is ``{"elected": "follower" | "old leader" (the replica the controller elected
    while the old leader's broker was down), "lost": <int, committed records the checker reports lost>,
    "high_watermark": <int, offset: the partition's high watermark right after that election>}``, each read off the
    notebook's table and check (not printed as such). Each part answered wrong gets its own hint
    (:data:`LOSS_HINTS`).

    Raises:
        LabkitError: ``run`` elected no leader (the unclean election did not happen: nothing to ask about).
    """
    if (v := unanswered(answer, '{"elected": ..., "lost": ..., "high_watermark": ...}')):
        return v
    if not isinstance(answer, dict) or set(answer) != set(LOSS_HINTS):
        return Verdict("wrong", f"The answer is a dict with exactly the keys {sorted(LOSS_HINTS)}.")
    if run["elected"] is None:
        raise LabkitError("the run elected no leader while the old leader was down: the exercise needs part 3's run")
    states = run["states"].set_index("moment")
    real = {"elected": {run["follower"]: "follower", run["leader"]: "old leader"}[run["elected"]],
            "lost": run["check"].count("lost write"),
            "high_watermark": int(states.loc["follower's broker back", "high_watermark"])}
    wrong = [k for k in LOSS_HINTS if type(answer[k]) is not type(real[k]) or answer[k] != real[k]]
    if not wrong:
        return Verdict("right", f"The run agrees: the follower (broker {run['elected']}) was elected with its log "
                                f"ending at offset {real['high_watermark']}, and the {real['lost']} records the old leader alone held "
                                f"were dropped when it came back as a follower and truncated its log to the new "
                                f"leader's.")
    return Verdict("wrong", " ".join(LOSS_HINTS[k] for k in wrong) + f" (wrong: {', '.join(wrong)})")
