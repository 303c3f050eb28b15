"""Notebook 05, the non-member path: a transactional producer that is **not a member** of a consumer group moves
the group's committed offset for a partition a live member holds, on the real broker.

The group coordinator skips every check of a TxnOffsetCommit that carries generation (member epoch) -1, no member
id and no group instance id, whether or not the group has members: ``ConsumerGroup.validateOffsetCommit``
(KIP-848 groups) returns ``CommitPartitionValidator.NO_OP`` before it looks a member up (apache/kafka PR #17914,
KAFKA-18060), and ``ClassicGroup.validateOffsetCommit`` checks a member only when one of the three fields is
given (apache/kafka PR #7897, KIP-447); both alike in Kafka 4.3.2 and 4.4.0. A plain OffsetCommit with the same
fields is refused in a group with members (UNKNOWN_MEMBER_ID).

The outsider is run on both clients, against the same live group. On librdkafka (confluent-kafka,
:class:`Outsider`) it is a consumer configured with the group's ``group.id`` that never subscribes (the way an
application with ``assign()`` runs): its ``consumer_group_metadata()`` carries -1 and no member id, and a
transactional producer sends it with ``send_offsets_to_transaction``. On Kafka's own Java client
(:func:`java_outsider_commit`, ``jvm/nonmember/NonMemberCommit.java``) a transactional ``KafkaProducer`` sends
``new ConsumerGroupMetadata(groupId)`` with ``sendOffsetsToTransaction``: ``ConsumerGroupMetadata(String)`` sets
generation -1, member id "" and no group instance id (deprecated since 4.2 for removal in 5.0, KIP-1136, apache/kafka
PR #20728); then the ``groupMetadata()`` of a ``KafkaConsumer`` that never subscribes, what KIP-1136 says to use
instead. The program prints what it sent; both carry the same three fields as librdkafka's. The model of the
coordinator's rules, with KIP-1287's draft, is :mod:`labkit.models.kip1287` (MODELLED).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from labkit.broker.probe import KAFKA_LOG
from labkit.broker.runtime import classpath, ensure_jars, find_java
from labkit.broker.settings import kafka_version
from labkit.core import procs
from labkit.core.waiting import wait_until
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.java import JVM_FLAGS, SOURCE as JAVA_PARTICIPANT
from labkit.kafka.group_member import GroupMember, describe_assignments
from labkit.kafka.group_metadata import LIBRDKAFKA_TXN_VERSION, metadata_epoch
from labkit.kafka.records import committed_offsets, produce
from labkit.models import kip1287

#: The outsider's name in the experiment's history: librdkafka's (:class:`Outsider`).
OUTSIDER = "non-member"
#: The Java outsider's name in the experiment's history (:func:`java_outsider_commit`).
JAVA_OUTSIDER = "non-member-java"
#: ``library`` of the rows of the Java outsider's commit with a ``KafkaConsumer``'s ``groupMetadata()``.
JAVA_CONSUMER_METADATA = "kafka-clients (Java), consumer's metadata"
#: The Java outsider's source, run with the JDK's single-file source launcher (``java -cp <jars> <file>``): kept
#: beside the lab's other Java (``jvm/``) as a file one can read and run by hand, not a string in Python.
JAVA_SOURCE = Path(__file__).resolve().parents[2] / "jvm" / "nonmember" / "NonMemberCommit.java"
#: The Java client's log settings (warnings and errors to stderr), the Java participant's.
JAVA_LOG_CONFIG = JAVA_PARTICIPANT / "log4j2.properties"


class JavaOutsiderError(RuntimeError):
    """The Java outsider did not answer: the JVM failed, printed no JSON line, or ran past its deadline."""


def metadata_fields(metadata: bytes) -> dict:
    """The generation (member epoch), group id and member id in librdkafka's serialised group metadata
    (``CGMDv2:``, the epoch, then the group id and the member id, NUL-terminated;
    :func:`labkit.kafka.group_metadata.metadata_epoch`).

    Raises:
        labkit.kafka.group_metadata.GroupMetadataFormatError: not that format.
    """
    epoch = metadata_epoch(metadata)
    group_id, member_id = metadata[len(b"CGMDv2:") + 4:].split(b"\0")[:2]
    return {"generation": epoch, "group_id": group_id.decode(), "member_id": member_id.decode()}


class Outsider:
    """A client that is not a member of ``group_id``: a consumer with that ``group.id`` that never subscribes, and a
    transactional producer. It commits offsets for the group in a transaction (TxnOffsetCommit) or with a plain
    ``consumer.commit`` (OffsetCommit), both with the consumer's group metadata: generation -1, no member id."""

    def __init__(self, exp: Experiment, group_id: str, topic: str) -> None:
        self.exp, self.topic = exp, topic
        self.consumer = Consumer({"bootstrap.servers": exp.bootstrap, "group.id": group_id, "logger": KAFKA_LOG,
                                  "enable.auto.commit": False})
        self.producer = Producer({"bootstrap.servers": exp.bootstrap, "logger": KAFKA_LOG,
                                  "transactional.id": f"{OUTSIDER}-{uuid.uuid4().hex[:8]}"})
        self.producer.init_transactions(30)
        exp.history.append("start", OUTSIDER)

    @property
    def metadata(self) -> dict:
        """What its commits carry (:func:`metadata_fields`); it sets no ``group.instance.id``."""
        return metadata_fields(self.consumer.consumer_group_metadata())

    def txn_commit(self, offsets: dict[int, int]) -> str:
        """``send_offsets_to_transaction`` of ``offsets`` ({partition: offset}) in a transaction of its own, then
        commit: "NONE" or the error name."""
        tps = [TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        self.producer.begin_transaction()
        try:
            self.producer.send_offsets_to_transaction(tps, self.consumer.consumer_group_metadata(), 30)
            self.producer.commit_transaction(30)
            answer = "NONE"
        except KafkaException as exc:
            answer = exc.args[0].name()
            self.producer.abort_transaction(30)
        self._record(offsets, answer)
        return answer

    def plain_commit(self, offsets: dict[int, int]) -> str:
        """``consumer.commit(offsets=..., asynchronous=False)``: "NONE" or the error name."""
        try:
            done = self.consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                                        asynchronous=False)
            errors = [tp.error.name() for tp in done if tp.error]
            answer = errors[0] if errors else "NONE"
        except KafkaException as exc:
            answer = exc.args[0].name()
        self._record(offsets, answer)
        return answer

    def _record(self, offsets: dict[int, int], answer: str) -> None:
        for p, o in offsets.items():
            self.exp.history.append("offsets_sent", OUTSIDER, topic=self.topic, partition=p, offset=o,
                                    error=None if answer == "NONE" else answer, definite=True)

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(10)
        self.exp.history.append("stop", OUTSIDER)


def java_outsider_commit(exp: Experiment, group_id: str, topic: str, offsets: dict[int, int], *,
                         metadata_from: str = "constructor", deadline_s: float = 60.0) -> dict:
    """Kafka's own Java client as the outsider: ``jvm/nonmember/NonMemberCommit.java`` (:data:`JAVA_SOURCE`), run
    with the JDK's source launcher on the running release's jars (:func:`~labkit.broker.runtime.ensure_jars`), makes a
    ``KafkaProducer`` with a fresh ``transactional.id``, then ``initTransactions``, ``beginTransaction``,
    ``sendOffsetsToTransaction(offsets, metadata)`` and ``commitTransaction``. The commit is recorded in ``exp``'s
    history as :data:`JAVA_OUTSIDER`'s ``offsets_sent``, as :class:`Outsider` records librdkafka's.

    Args:
        exp: the experiment (its ``bootstrap`` and history).
        group_id, topic: the group the offsets are committed for, and their topic.
        offsets: {partition: offset} to commit (offsets count records).
        metadata_from: where ``metadata`` comes from: "constructor", ``new ConsumerGroupMetadata(group_id)``
            (kafka-clients' ``ConsumerGroupMetadata(String)``: generation -1, member id "", no group instance id;
            deprecated since 4.2 for removal in 5.0, KIP-1136); or "consumer:classic" / "consumer:consumer",
            ``KafkaConsumer#groupMetadata()`` (what KIP-1136 says to use instead) of a consumer with ``group.id`` =
            ``group_id`` and that ``group.protocol`` that never subscribes.
        deadline_s: seconds the whole run may take (JVM start, compiling the source, the commit); each blocking call
            of the clients (``max.block.ms``, ``default.api.timeout.ms``) and each close gets 0.4 of it.
    Returns:
        What the program printed: ``{"client"`` ("kafka-clients <version>"), ``"metadata_from"``, ``"answer"``
        ("NONE" or the error's ``Errors`` name, else the exception's class name), ``"exception"``, ``"message"``
        (``None`` when it went through), ``"generation"``, ``"member_id"``, ``"group_instance_id"}`` (what the
        ``ConsumerGroupMetadata`` it sent held).
    Raises:
        JavaOutsiderError: the JVM ran past ``deadline_s`` (it is killed), exited non-zero, or printed no JSON line
            (its stderr's end is quoted).
        JavaError, MavenError: no Java 17+, or the release's jars are not cached and cannot be resolved.
    """
    cp = classpath(ensure_jars(progress=False))
    pairs = ",".join(f"{p}:{o}" for p, o in offsets.items())
    argv = [find_java(), *JVM_FLAGS, f"-Dlog4j2.configurationFile={JAVA_LOG_CONFIG}", "-cp", cp, str(JAVA_SOURCE),
            exp.bootstrap, group_id, topic, pairs, f"{JAVA_OUTSIDER}-{uuid.uuid4().hex[:8]}",
            str(int(deadline_s * 1000 * 0.4)), metadata_from]
    exp.history.append("start", JAVA_OUTSIDER)
    try:
        child = procs.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = child.communicate(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            raise JavaOutsiderError(f"the Java outsider ran past {deadline_s:g} s and was killed; stderr: "
                                    f"{err.strip()[-800:]}") from None
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if child.returncode or not lines:
            raise JavaOutsiderError(f"the Java outsider exited {child.returncode} with no answer; stderr: "
                                    f"{err.strip()[-800:]}")
        result = json.loads(lines[-1])
        for p, o in offsets.items():
            exp.history.append("offsets_sent", JAVA_OUTSIDER, topic=topic, partition=p, offset=o,
                               error=None if result["answer"] == "NONE" else result["answer"], definite=True)
        return result
    finally:
        exp.history.append("stop", JAVA_OUTSIDER)


def nonmember_commit(exp: Experiment, protocol: str = "consumer", *, records: int = 12, member_offset: int = 3,
                     txn_offset: int = 9, plain_offset: int = 7, java_offset: int = 10,
                     java_consumer_offset: int = 11, java_deadline_s: float = 90.0) -> dict:
    """On the real broker: member A (:class:`~labkit.kafka.group_member.GroupMember`, librdkafka, ``group.protocol``
    = ``protocol``) joins a group on a one-partition topic of ``records`` records, holds partition 0 and commits
    ``member_offset`` in its own transaction. Then a librdkafka :class:`Outsider` commits ``txn_offset`` for
    partition 0 in a transaction, and ``plain_offset`` with a plain OffsetCommit; then Kafka's Java client commits
    ``java_offset`` in a transaction with ``new ConsumerGroupMetadata(group)``, and ``java_consumer_offset`` with
    the ``groupMetadata()`` of a ``KafkaConsumer`` (``group.protocol`` = ``protocol``) that never subscribes
    (:func:`java_outsider_commit`; ``java_deadline_s`` seconds for each of the two JVMs). After
    each commit the group's committed offset is read (:func:`~labkit.kafka.records.committed_offsets`, waiting at
    most 60 s for the expected one), and at the end who holds the partition. Offsets count records.

    Returns:
        ``{"protocol", "release", "topic", "group", "member_id", "member_epoch", "outsider", "java", "rows",
        "held_by"}``: librdkafka's outsider's group metadata (:func:`metadata_fields`), ``java`` the Java outsider's
        two answers (:func:`java_outsider_commit`, "constructor" first), ``rows`` one dict per commit
        ``{"protocol", "client", "library", "request", "generation", "member id", "offset", "answer",
        "committed before", "committed after"}`` (``library``: "librdkafka", "kafka-clients (Java)" or, with
        ``KafkaConsumer#groupMetadata()``, :data:`JAVA_CONSUMER_METADATA`; "committed before" -1001 where the group
        had none), and ``held_by`` the partition's holders when the outsiders' commits were done (member id to
        partitions, :func:`~labkit.kafka.group_member.describe_assignments`).
    Raises:
        JavaOutsiderError, JavaError, MavenError: the Java outsider could not run (:func:`java_outsider_commit`).
        TimeoutError: a committed offset was not the expected one within 60 s (:func:`~labkit.core.waiting.wait_until`).
    """
    topic = exp.topic("nonmember", partitions=1)
    produce(exp.bootstrap, topic, [f"r{i}" for i in range(records)])
    group = f"{exp.name}-nonmember-{uuid.uuid4().hex[:6]}"
    member = GroupMember(exp, group, topic, protocol=protocol, name="member-A")
    outsider = None
    try:
        member.join(partitions=1)
        rows = []

        def row(client: str, library: str, request: str, fields: dict, offset: int, answer: str) -> None:
            before = rows[-1]["committed after"] if rows else first
            # an offset committed in a transaction is read once the commit's marker has reached the group coordinator
            expected = offset if answer == "NONE" else before
            wait_until(lambda: committed_offsets(exp.bootstrap, group, topic)[0] == expected, 60)
            rows.append({"protocol": protocol, "client": client, "library": library, "request": request,
                         "generation": fields["generation"], "member id": fields["member_id"] or "(none)",
                         "offset": offset, "answer": answer, "committed before": before,
                         "committed after": committed_offsets(exp.bootstrap, group, topic)[0]})

        a_fields = {"generation": member.epoch, "member_id": member.member_id}
        first = committed_offsets(exp.bootstrap, group, topic)[0]  # before member A's commit
        row("member A", "librdkafka", "TxnOffsetCommit", a_fields, member_offset,
            member.commit_offsets({0: member_offset})[0])
        outsider = Outsider(exp, group, topic)
        fields = outsider.metadata
        row("non-member", "librdkafka", "TxnOffsetCommit", fields, txn_offset, outsider.txn_commit({0: txn_offset}))
        row("non-member", "librdkafka", "OffsetCommit", fields, plain_offset, outsider.plain_commit({0: plain_offset}))
        java = [java_outsider_commit(exp, group, topic, {0: java_offset}, deadline_s=java_deadline_s)]
        row("non-member", "kafka-clients (Java)", "TxnOffsetCommit", java[0], java_offset, java[0]["answer"])
        java.append(java_outsider_commit(exp, group, topic, {0: java_consumer_offset},
                                         metadata_from=f"consumer:{protocol}", deadline_s=java_deadline_s))
        row("non-member", JAVA_CONSUMER_METADATA, "TxnOffsetCommit", java[1], java_consumer_offset, java[1]["answer"])
        member.consumer.poll(0)
        held_by = describe_assignments(exp.bootstrap, group)
        return {"protocol": protocol, "release": kafka_version(), "topic": topic, "group": group,
                "member_id": member.member_id, "member_epoch": a_fields["generation"], "outsider": fields,
                "java": java, "rows": rows, "held_by": held_by}
    finally:
        if outsider is not None:
            outsider.close()
        member.close()


def replay_nonmember(run: dict, release: str | None = None) -> list[dict]:
    """MODELLED: librdkafka's outsider's two commits of :func:`nonmember_commit` replayed through
    :mod:`labkit.models.kip1287`'s rules, beside the broker's answers, against the group as it was (member A holding
    partition 0 at its epoch): one dict per commit ``{"request", "real", "4.2", "release", "kip1287 v5",
    "kip1287 v6 (as drafted)", "kip1287 v6 (non-member checked)"}``. TxnOffsetCommit as librdkafka sends it
    (:data:`~labkit.kafka.group_metadata.LIBRDKAFKA_TXN_VERSION`) except in the two v6 columns; "non-member checked"
    is a reading no draft proposes (:data:`~labkit.models.kip1287.NON_MEMBER_READINGS`). The Java outsider's commit
    (``library`` "kafka-clients (Java)") is left out: which TxnOffsetCommit version it sent is not recorded."""
    rule = kip1287.rule_of(release or run["release"])
    model = kip1287.GroupModel.from_assignments(run["held_by"], epoch=run["member_epoch"])
    out = []
    for r in run["rows"]:
        if r["client"] != "non-member" or r.get("library", "librdkafka") != "librdkafka":
            continue
        transactional = r["request"] == "TxnOffsetCommit"
        version = LIBRDKAFKA_TXN_VERSION if transactional else None

        def ask(which: str, **kw) -> str:
            return model.offset_commit(kip1287.NO_MEMBER, r["generation"], [0], rule=which,
                                       transactional=transactional, **{"version": version, **kw})[0]

        out.append({"request": r["request"], "real": r["answer"], "4.2": ask("4.2"), "release": ask(rule),
                    "kip1287 v5": ask("kip1287"),
                    "kip1287 v6 (as drafted)": ask("kip1287", version=6 if transactional else None),
                    "kip1287 v6 (non-member checked)": ask("kip1287", version=6 if transactional else None,
                                                            non_member="checked")})
    return out
