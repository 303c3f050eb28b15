"""Notebook 05, the unassigned-partition bug (KAFKA-20191) on the real broker: a group member with a
valid epoch commits, inside its transaction, an offset for a partition assigned to another member,
and the broker (Kafka 4.3.1 and 4.4.0) accepts it. The other member, once it restarts, resumes from
that offset. Also the client-side guard an application can use today, before any broker validates
the commit (KIP-1287, modelled in :mod:`labkit.models.kip1287`)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from labkit.broker.probe import KAFKA_LOG, admin
from labkit.broker.settings import CONSUMER_SESSION_TIMEOUT_MS
from labkit.crashlab.experiment import Experiment
from labkit.errors import LabkitError
from labkit.exercise import Verdict, unanswered
from labkit.kafka.records import committed_offsets
from labkit.models import kip1287
from labkit.waiting import Deadline, wait_for

# The proposed fix, MODELLED (KIP-1287): notebook 05 replays B's commit through the group coordinator's model and
# names its two candidate errors.
GroupModel = kip1287.GroupModel
STALE_MEMBER_EPOCH, UNASSIGNED_PARTITION = kip1287.STALE_MEMBER_EPOCH, kip1287.UNASSIGNED_PARTITION


class UnassignedPartitionError(LabkitError):
    """Offsets were about to be committed for partitions outside the consumer's assignment."""


def check_assigned(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Raise unless every partition in ``offsets`` is in ``consumer.assignment()``.

    Raises:
        UnassignedPartitionError: names the partitions outside the assignment; nothing is sent.
    """
    assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    outside = sorted(f"{tp.topic}[{tp.partition}]" for tp in offsets if (tp.topic, tp.partition) not in assigned)
    if outside:
        raise UnassignedPartitionError(
            f"refusing to commit offsets for {', '.join(outside)}: not assigned to this consumer (its assignment: "
            f"{sorted(f'{t}[{p}]' for t, p in assigned) or 'none'}). Commit only partitions you consumed from.")


def send_offsets_guarded(producer: Producer, consumer: Consumer, offsets: list[TopicPartition],
                         timeout_s: float = 30.0) -> None:
    """``producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())``, after
    :func:`check_assigned`.

    Raises:
        UnassignedPartitionError: a partition is outside the consumer's assignment (nothing sent).
        confluent_kafka.KafkaException: the transaction coordinator or group coordinator refused.
    """
    check_assigned(consumer, offsets)
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), timeout_s)


class GroupMember:
    """A real consumer group member with a transactional producer, driven from the notebook: it
    joins, holds its assignment (it does not process), and commits offsets in a transaction.

    Args:
        exp: the experiment (its history records the member's offset commits).
        group_id, topic: the group and the input topic it subscribes to.
        protocol: ``group.protocol``, "consumer" (KIP-848) or "classic".
        name: participant name in the history.
    """

    def __init__(self, exp: Experiment, group_id: str, topic: str, *, protocol: str = "consumer",
                 name: str = "member-B") -> None:
        self.exp, self.topic, self.name = exp, topic, name
        self.consumer = Consumer({"bootstrap.servers": exp.bootstrap, "group.id": group_id, "group.protocol": protocol,
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "logger": KAFKA_LOG, **classic_session(protocol)})
        self.producer = Producer({"bootstrap.servers": exp.bootstrap, "logger": KAFKA_LOG,
                                  "transactional.id": f"{name}-{uuid.uuid4().hex[:8]}"})
        self.producer.init_transactions(30)
        self.consumer.subscribe([topic])
        exp.history.append("start", name)

    @property
    def assignment(self) -> list[int]:
        """Partitions of the topic assigned to this member now."""
        return sorted(tp.partition for tp in self.consumer.assignment())

    @property
    def member_id(self) -> str:
        """This member's id, as the group coordinator gave it."""
        return self.consumer.memberid()

    def join(self, partitions: int = 1, timeout_s: float = 60.0) -> list[int]:
        """Poll (without keeping records) until exactly ``partitions`` partitions have been assigned
        for 2 s in a row; returns them.

        Raises:
            TimeoutError: no such stable assignment within ``timeout_s``.
        """
        deadline, stable = Deadline(timeout_s), None
        while not deadline.expired():
            self.consumer.poll(0.2)
            if len(self.assignment) == partitions:
                stable = stable or Deadline(2)
                if stable.expired():
                    return self.assignment
            else:
                stable = None
        raise TimeoutError(f"{self.name} did not hold {partitions} partition(s) of {self.topic} for 2 s within "
                           f"{timeout_s:g} s (it holds {self.assignment})")

    def commit_offsets(self, offsets: dict[int, int], *, guard: bool = False) -> dict[int, str]:
        """Commit ``offsets`` ({partition: offset}) for the group inside one transaction with
        ``send_offsets_to_transaction(..., consumer_group_metadata())``.

        Args:
            guard: send them with :func:`send_offsets_guarded`, which checks first that every partition is
                assigned to this member.
        Returns:
            Partition to the broker's answer: "NONE" if the commit went through, else the error name.
        Raises:
            UnassignedPartitionError: with ``guard``, a partition is not this member's; nothing was sent (the
                transaction, empty, is aborted).
        """
        tps = [TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        self.consumer.poll(0)
        self.producer.begin_transaction()
        try:
            if guard:
                send_offsets_guarded(self.producer, self.consumer, tps)
            else:
                self.producer.send_offsets_to_transaction(tps, self.consumer.consumer_group_metadata(), 30)
            self.producer.commit_transaction(30)
            answer = "NONE"
        except UnassignedPartitionError:
            self.producer.abort_transaction(30)
            self.exp.history.append("offsets_sent", self.name, topic=self.topic, error="REFUSED_BY_GUARD",
                                    definite=True)
            raise
        except KafkaException as exc:
            answer = exc.args[0].name()
            self.producer.abort_transaction(30)
        for p, o in offsets.items():
            self.exp.history.append("offsets_sent", self.name, topic=self.topic, partition=p, offset=o,
                                    error=None if answer == "NONE" else answer, definite=True)
        return dict.fromkeys(offsets, answer)

    def close(self) -> None:
        """Leave the group and close both clients."""
        self.consumer.close()
        self.producer.flush(10)
        self.exp.history.append("stop", self.name)


def classic_session(protocol: str) -> dict:
    """Client session settings for ``protocol``: with "classic" the session timeout is the client's
    (default 45 s; here the lab broker's consumer-protocol one,
    :data:`~labkit.broker.settings.CONSUMER_SESSION_TIMEOUT_MS`); with "consumer" (KIP-848) it is the broker's
    ``group.consumer.session.timeout.ms`` and the client must not set it."""
    classic = {"session.timeout.ms": CONSUMER_SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1_000}
    return classic if protocol == "classic" else {}


def describe_assignments(bootstrap: str, group_id: str) -> dict[str, list[int]]:
    """Member id to assigned partition numbers, as the group coordinator describes the group now."""
    client = admin(bootstrap)
    desc = client.describe_consumer_groups([group_id])[group_id].result(10)
    return {m.member_id: sorted(tp.partition for tp in (m.assignment.topic_partitions if m.assignment else []))
            for m in desc.members}


def unassigned_commit(exp: Experiment, protocol: str = "consumer", *, records: int = 12, skip_to: int = 9,
                      per_record_ms: int = 300) -> dict:
    """The KAFKA-20191 scenario on the real broker.

    Member B (:class:`GroupMember`) joins a group on a two-partition input (``records`` records per
    partition) first; then member A (a transactional processor participant) joins and the group
    gives it one partition, v; B keeps the other and processes nothing.
    A processes v a record at a time (each in its own transaction); after three, A is paused. B,
    inside its own transaction, commits offset ``skip_to`` for v, which is not its partition. Then A
    crashes, B leaves, A restarts, takes both partitions and resumes v from ``skip_to``.

    Returns:
        ``{"input", "output", "group", "victim", "answer", "guard_error", "assignments",
        "member_b", "a_committed", "member_a"}``: the victim partition v, the broker's answer to
        B's commit, the guard's refusal (tried first, with ``guard=True``), the group's assignments
        at the time (member id to partitions), B's member id, and the offset A had committed on v.
        Final reads are recorded.
    """
    src, out = exp.topic("input", partitions=2), exp.topic("output", partitions=2)
    for p in (0, 1):
        exp.participant(f"source-p{p}", "producer", topic=src, partition=p, iterations=records).start().wait(60)
    group = f"{exp.name}-{uuid.uuid4().hex[:6]}"
    b = GroupMember(exp, group, src, protocol=protocol)
    b.join(partitions=2)  # B first, alone: it holds both partitions and processes neither
    a = exp.participant("member-A", "processor", topic=src, output_topic=out, group_id=group,
                        group_protocol=protocol, transactional_id=f"{group}-A", batch=1,
                        per_record_ms=per_record_ms, idle_ms=8000, config=classic_session(protocol)).start()
    (mine,) = b.join(partitions=1)  # the group gave A the other one
    victim = 1 - mine
    wait_for(lambda: len(_committed_offsets(exp, victim)) >= 3, f"member-A committed nothing on partition {victim}")
    a.pause()
    assignments = describe_assignments(exp.bootstrap, group)
    # A's last commit may still be landing at the broker (its response unread when SIGSTOP came): the offset
    # A committed is the group's, read until two reads 0.3 s apart agree
    a_committed = None
    for _ in range(20):  # A is stopped: its commit lands within milliseconds, if at all
        before, a_committed = a_committed, committed_offsets(exp.bootstrap, group, src)[victim]
        if a_committed == before:
            break
        time.sleep(0.3)
    try:
        b.commit_offsets({victim: skip_to}, guard=True)
        guard_error = None
    except UnassignedPartitionError as exc:
        guard_error = str(exc)
    answer = b.commit_offsets({victim: skip_to})
    member_b = b.member_id
    a.crash()
    b.close()
    a.restart(idle_ms=30_000)  # its crashed self stays in the group until its session times out
    a.wait(180)
    exp.final_reads(src, out)
    return {"input": src, "output": out, "group": group, "victim": victim, "answer": answer[victim],
            "guard_error": guard_error, "assignments": assignments, "member_b": member_b,
            "a_committed": a_committed, "member_a": a}


def _committed_offsets(exp: Experiment, partition: int) -> list[int]:
    """Input offsets on ``partition`` that member-A consumed in a transaction that committed."""
    events = [e for e in exp.history.events() if e.participant == "member-A"]
    committed_txns = {e.txn for e in events if e.kind == "txn_end" and e.outcome == "committed"}
    txn_of_consume, current = {}, None
    for e in events:  # a consume belongs to the transaction begun right after it (batch=1)
        if e.kind == "consume" and e.partition == partition:
            current = e.offset
        elif e.kind == "txn_begin" and current is not None:
            txn_of_consume[current] = e.txn
            current = None
    return [o for o, t in txn_of_consume.items() if t in committed_txns]


def check_guard(answer: object, bug: dict) -> Verdict:
    """Notebook 05's exercise: ``answer`` is a function ``(assignment, offsets) -> offsets`` that keeps, of
    ``offsets`` (``{partition: offset}``), only the partitions in ``assignment`` (a list of partition numbers).
    Checked on member B's real assignment from part 1's run (``bug``, from :func:`unassigned_commit`) with the
    commit B made there, and on two edge cases."""
    if (v := unanswered(answer, "a function (assignment, offsets) -> offsets")):
        return v
    if not callable(answer):
        return Verdict(False, "The answer is a function: def guard(assignment, offsets): ... return {...}")
    own = bug["assignments"].get(bug["member_b"], [])
    cases = [(own, {bug["victim"]: 9, **{p: 0 for p in own}}), ([0, 1], {0: 5, 1: 7}), ([], {0: 1})]
    for assignment, offsets in cases:
        expected = {p: o for p, o in offsets.items() if p in assignment}
        try:
            got = answer(list(assignment), dict(offsets))
        except Exception as exc:  # noqa: BLE001: the learner's code failing is a wrong answer
            return Verdict(False, f"guard({assignment}, {offsets}) raised {exc!r}.")
        if got != expected:
            return Verdict(False, f"guard({assignment}, {offsets}) returned {got!r}. B's commit in part 1 went "
                                  "through because nothing compared the offsets with the assignment: keep only "
                                  "the partitions the member holds.")
    return Verdict(True, f"With B's real assignment {own}, the guard dropped partition {bug['victim']} (A's) and kept "
                         "B's own; nothing outside the assignment would reach the group coordinator.")
