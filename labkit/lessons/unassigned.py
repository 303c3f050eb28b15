"""Notebook 05, the unassigned-partition bug (KAFKA-20191) on the real broker: a group member with its
current member epoch commits, inside its transaction, an offset for a partition assigned to another
member, and the broker (Kafka 4.3.1 and 4.4.0) accepts it. The other member, once it restarts, resumes
from that offset. Which epochs the broker checks partition by partition (KIP-1251), shown with real
commits at three epochs (:func:`epoch_paths`), and a plain OffsetCommit doing the same. Also the
client-side guard an application can use today, before any broker validates the commit (KIP-1287,
modelled in :mod:`labkit.models.kip1287`), and the draft's wire numbers against the release's
(:func:`draft_collisions`, read from its jar)."""

from __future__ import annotations

import struct
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from labkit.broker.probe import KAFKA_LOG, admin
from labkit.broker.settings import CONSUMER_SESSION_TIMEOUT_MS, kafka_version
from labkit.crashlab.experiment import Experiment
from labkit.errors import LabkitError
from labkit.exercise import Verdict, unanswered
from labkit.kafka import protocol
from labkit.kafka.records import committed_offsets
from labkit.models import kip1287
from labkit.waiting import Deadline, wait_for

# The proposed fix, MODELLED (KIP-1287): notebook 05 replays B's commits through the group coordinator's model
# (Kafka 4.2's rule, the running release's, the draft's) and names the draft's two candidate errors.
GroupModel = kip1287.GroupModel
STALE_MEMBER_EPOCH, UNASSIGNED_PARTITION = kip1287.STALE_MEMBER_EPOCH, kip1287.UNASSIGNED_PARTITION
#: What notebooks 05 and 07 show of the drafts' numbers, read from the running release's jar.
draft_collisions = protocol.draft_collisions
#: Member epochs at the broker (ConsumerGroupDescribe); ``protocol`` is a group protocol's name below.
describe_consumer_group = protocol.describe_consumer_group
#: The TxnOffsetCommit version the model assumes librdkafka 2.16 sends: any below 6 answers alike (the broker
#: sends STALE_MEMBER_EPOCH as ILLEGAL_GENERATION below 6, which is what librdkafka gets).
LIBRDKAFKA_TXN_VERSION = 5

_CGMD_MAGIC = b"CGMDv2:"


class GroupMetadataFormatError(LabkitError):
    """Bytes that are not librdkafka's serialised consumer group metadata (``CGMDv2:``)."""


def metadata_epoch(metadata: bytes) -> int:
    """The member epoch (consumer protocol) or generation (classic) in ``consumer.consumer_group_metadata()``:
    the epoch every offset commit made with that metadata carries. confluent-kafka returns librdkafka's
    serialised form (``rd_kafka_consumer_group_metadata_write``): ``CGMDv2:``, then the epoch as a native
    int32, then the group id and the member id, NUL-terminated (read from librdkafka 2.16's output).

    Raises:
        GroupMetadataFormatError: not that format (another librdkafka?).
    """
    if not metadata.startswith(_CGMD_MAGIC) or len(metadata) < len(_CGMD_MAGIC) + 4:
        raise GroupMetadataFormatError(f"not librdkafka's CGMDv2 group metadata: {metadata[:12]!r}...")
    return struct.unpack_from("=i", metadata, len(_CGMD_MAGIC))[0]


def with_epoch(metadata: bytes, epoch: int) -> bytes:
    """``metadata`` (see :func:`metadata_epoch`) carrying ``epoch`` instead: a commit made with it reaches the
    group coordinator as if the member's client were at that epoch (a lagging client, say).

    Raises:
        GroupMetadataFormatError: see :func:`metadata_epoch`.
    """
    metadata_epoch(metadata)
    start = len(_CGMD_MAGIC)
    return metadata[:start] + struct.pack("=i", epoch) + metadata[start + 4:]


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

    @property
    def epoch(self) -> int:
        """The member epoch (generation, classic) this member's commits carry now (:func:`metadata_epoch`)."""
        return metadata_epoch(self.consumer.consumer_group_metadata())

    def join(self, partitions: int = 1, timeout_s: float = 60.0) -> list[int]:
        """Poll (without keeping records) until exactly ``partitions`` partitions have been assigned
        for 2 s in a row; returns them.

        Raises:
            TimeoutError: no such stable assignment within ``timeout_s``.
        """
        hold({self: partitions}, timeout_s)
        return self.assignment

    def commit_offsets(self, offsets: dict[int, int], *, guard: bool = False,
                       epoch: int | None = None) -> dict[int, str]:
        """Commit ``offsets`` ({partition: offset}) for the group inside one transaction with
        ``send_offsets_to_transaction(..., consumer_group_metadata())`` (a TxnOffsetCommit request).

        Args:
            guard: send them with :func:`send_offsets_guarded`, which checks first that every partition is
                assigned to this member.
            epoch: send this member epoch instead of the member's own (:func:`with_epoch`), as a client that
                has not yet heard of its new epoch would.
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
                metadata = self.consumer.consumer_group_metadata()
                if epoch is not None:
                    metadata = with_epoch(metadata, epoch)
                self.producer.send_offsets_to_transaction(tps, metadata, 30)
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
        "member_b", "a_committed", "member_a", "b_epoch", "b_broker_epoch", "group_epoch", "path"}``: the victim
        partition v, the broker's answer to B's commit, the guard's refusal (tried first, with
        ``guard=True``), the group's assignments at the time (member id to partitions), B's member id, the
        offset A had committed on v, the epoch B's commit carried (:func:`metadata_epoch`), and, with the
        consumer protocol, B's member epoch and the group epoch at the broker just before
        (:func:`~labkit.kafka.protocol.describe_consumer_group`; ``None`` with the classic protocol), and the path
        of KIP-1251's check that B's commit took (:func:`~labkit.models.kip1287.commit_path`; ``None`` with the
        classic protocol). Final reads are recorded.
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
    b_broker_epoch = group_epoch = None
    if protocol == "consumer":  # B's epoch at the broker, to compare with the one its commit carries
        described = describe_consumer_group(exp.bootstrap, group)
        group_epoch = described["group_epoch"]
        b_broker_epoch = next(m["member_epoch"] for m in described["members"] if m["member_id"] == b.member_id)
    b_epoch = b.epoch
    answer = b.commit_offsets({victim: skip_to})
    member_b = b.member_id
    a.crash()
    b.close()
    a.restart()  # its crashed self holds its partition until its session times out; idle_ms counts from then
    a.wait(180)
    exp.final_reads(src, out)
    return {"input": src, "output": out, "group": group, "victim": victim, "answer": answer[victim],
            "guard_error": guard_error, "assignments": assignments, "member_b": member_b,
            "a_committed": a_committed, "member_a": a, "b_epoch": b_epoch, "b_broker_epoch": b_broker_epoch,
            "group_epoch": group_epoch,
            "path": None if b_broker_epoch is None else kip1287.commit_path(b_epoch, b_broker_epoch)}


def hold(members: dict[GroupMember, int], timeout_s: float = 60.0) -> None:
    """Poll every member of ``members`` (member -> how many partitions it should hold), without keeping records,
    until each holds exactly that many, for 2 s in a row.

    Raises:
        TimeoutError: no such stable assignment within ``timeout_s`` (s); the message names what each holds.
    """
    deadline, stable = Deadline(timeout_s), None
    while not deadline.expired():
        for member in members:
            member.consumer.poll(0.2 / len(members))
        if all(len(member.assignment) == n for member, n in members.items()):
            stable = stable or Deadline(2)
            if stable.expired():
                return
        else:
            stable = None
    holds = "; ".join(f"{m.name} holds {m.assignment}, not {n} partition(s)" for m, n in members.items())
    raise TimeoutError(f"no stable assignment of {next(iter(members)).topic} for 2 s within {timeout_s:g} s ({holds})")


def epoch_paths(exp: Experiment, *, plain_offset: int = 5) -> dict:
    """Which epochs the group coordinator checks partition by partition, on the real broker (consumer protocol).

    Member B joins a two-partition topic alone (both partitions, at member epoch ``first_epoch``), then member A
    joins and gets one, A's; B keeps the other, its own (since ``first_epoch``: the uniform assignor is sticky).
    Both are :class:`GroupMember` s that only hold their assignment. B then commits offsets in four transactions
    (TxnOffsetCommit through librdkafka), each with its metadata carrying another epoch (:func:`with_epoch`):

    ====================  ============  ====================================================
    epoch B sends          partition     path in ``ConsumerGroup.validateOffsetCommit`` (4.3+)
    ====================  ============  ====================================================
    B's epoch              A's           current: no partition checked
    B's epoch - 1          B's own       lagging: own partition assigned at <= that epoch
    B's epoch - 1          A's           lagging: A's partition is not B's
    B's epoch + 1          B's own       newer than the broker's: refused
    ====================  ============  ====================================================

    Last, a plain OffsetCommit: ``B.consumer.commit(offsets=[A's partition at plain_offset],
    asynchronous=False)`` (librdkafka sends B's current member epoch), and A's committed offset read back.

    Returns:
        ``{"topic", "group", "own", "victim", "first_epoch", "b_epoch", "b_broker_epoch", "a_epoch",
        "group_epoch", "rows", "plain"}``: partitions, epochs (B's from its metadata and at the broker, A's,
        the group's), ``rows`` one dict per commit above ``{"request", "epoch", "partition", "path", "answer"}``
        (``answer`` the broker's: "NONE" or the error name librdkafka got), and ``plain`` ``{"answer",
        "committed"}`` (the error name or "NONE"; the group's committed offset on A's partition afterwards).
    """
    topic = exp.topic("paths", partitions=2)
    group = f"{exp.name}-paths-{uuid.uuid4().hex[:6]}"
    b = GroupMember(exp, group, topic, name="member-B")
    a = None
    try:
        b.join(partitions=2)
        first_epoch = b.epoch
        a = GroupMember(exp, group, topic, name="member-A")
        hold({b: 1, a: 1})
        (own,), (victim,) = b.assignment, a.assignment
        described = describe_consumer_group(exp.bootstrap, group)
        epochs = {m["member_id"]: m["member_epoch"] for m in described["members"]}
        b_epoch = b.epoch
        requests = [("B's epoch, A's partition", b_epoch, victim), ("B's epoch - 1, B's own partition", b_epoch - 1, own),
                    ("B's epoch - 1, A's partition", b_epoch - 1, victim),
                    ("B's epoch + 1, B's own partition", b_epoch + 1, own)]
        rows = []
        for request, epoch, partition in requests:
            answer = b.commit_offsets({partition: 0}, epoch=epoch)[partition]
            rows.append({"request": request, "epoch": epoch, "partition": partition,
                         "path": kip1287.commit_path(epoch, epochs[b.member_id]), "answer": answer})
        try:
            done = b.consumer.commit(offsets=[TopicPartition(topic, victim, plain_offset)], asynchronous=False)
            plain_answer = done[0].error.name() if done[0].error else "NONE"
        except KafkaException as exc:
            plain_answer = exc.args[0].name()
        plain = {"answer": plain_answer, "committed": committed_offsets(exp.bootstrap, group, topic)[victim]}
        return {"topic": topic, "group": group, "own": own, "victim": victim, "first_epoch": first_epoch,
                "b_epoch": b_epoch, "b_broker_epoch": epochs[b.member_id], "a_epoch": epochs[a.member_id],
                "group_epoch": described["group_epoch"], "rows": rows, "plain": plain}
    finally:
        b.close()
        if a is not None:
            a.close()


def replay_paths(paths: dict, release: str | None = None) -> list[dict]:
    """MODELLED: each commit of :func:`epoch_paths` replayed through :mod:`labkit.models.kip1287`'s rules, beside
    the broker's answer: one dict per row ``{"request", "path", "real", "4.2", "release", "kip1287"}``, where
    "release" is the rule of ``release`` (default the running one: "4.3" or "4.4"), with TxnOffsetCommit
    :data:`LIBRDKAFKA_TXN_VERSION` as librdkafka sends it, and "kip1287" the draft's rule at its version 6
    (answer UNASSIGNED_PARTITION)."""
    rule = kip1287.rule_of(release or kafka_version())
    model = GroupModel()
    model.add("B", paths["b_broker_epoch"], {paths["own"]: paths["first_epoch"]})
    model.add("A", paths["a_epoch"], {paths["victim"]: paths["a_epoch"]})
    out = []
    for row in paths["rows"]:
        ask = lambda **kw: model.txn_offset_commit("B", row["epoch"], [row["partition"]], **kw)[row["partition"]]  # noqa: E731
        out.append({"request": row["request"], "path": row["path"], "real": row["answer"],
                    "4.2": ask(rule="4.2", version=LIBRDKAFKA_TXN_VERSION),
                    "release": ask(rule=rule, version=LIBRDKAFKA_TXN_VERSION), "kip1287": ask(rule="kip1287")})
    return out


def replay_commit(bug: dict, release: str | None = None) -> list[dict]:
    """MODELLED: B's commit of :func:`unassigned_commit` (consumer protocol) replayed through each rule of
    :mod:`labkit.models.kip1287`, after the broker's real answer: one dict per row ``{"coordinator", "real or
    modelled", "answer"}``. B's epoch and the assignment are the broker's (``b_broker_epoch``,
    ``assignments``); B's commit carried ``b_epoch``."""
    release = release or kafka_version()
    model = GroupModel.from_assignments(bug["assignments"], epoch=bug["b_broker_epoch"])
    ask = lambda **kw: model.txn_offset_commit(bug["member_b"], bug["b_epoch"], [bug["victim"]], **kw)[bug["victim"]]  # noqa: E731
    v = LIBRDKAFKA_TXN_VERSION
    return [
        {"coordinator": f"Kafka {release}, real broker", "real or modelled": "real", "answer": bug["answer"]},
        {"coordinator": "Kafka 4.2's rule (history)", "real or modelled": "modelled", "answer": ask(rule="4.2", version=v)},
        {"coordinator": f"Kafka {kip1287.rule_of(release)}'s rule (this release)", "real or modelled": "modelled",
         "answer": ask(rule=kip1287.rule_of(release), version=v)},
        {"coordinator": "KIP-1287 draft, TxnOffsetCommit v5", "real or modelled": "modelled",
         "answer": ask(rule="kip1287", version=5)},
        {"coordinator": "KIP-1287 draft, v6, error UNASSIGNED_PARTITION", "real or modelled": "modelled",
         "answer": ask(rule="kip1287")},
        {"coordinator": "KIP-1287 draft, v6, error STALE_MEMBER_EPOCH", "real or modelled": "modelled",
         "answer": ask(rule="kip1287", unassigned_error=STALE_MEMBER_EPOCH)},
    ]


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
