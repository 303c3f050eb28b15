"""Notebook 05, the non-member path: a transactional producer that is **not a member** of a consumer group moves
the group's committed offset for a partition a live member holds, on the real broker.

The group coordinator skips every check of a TxnOffsetCommit that carries generation (member epoch) -1, no member
id and no group instance id, whether or not the group has members: ``ConsumerGroup.validateOffsetCommit``
(KIP-848 groups) returns ``CommitPartitionValidator.NO_OP`` before it looks a member up (apache/kafka PR #17914,
KAFKA-18060), and ``ClassicGroup.validateOffsetCommit`` checks a member only when one of the three fields is
given (apache/kafka PR #7897, KIP-447); both alike in Kafka 4.3.1 and 4.4.0. A plain OffsetCommit with the same
fields is refused in a group with members (UNKNOWN_MEMBER_ID).

The outsider here is a librdkafka (confluent-kafka) consumer configured with the group's ``group.id`` that never
subscribes (the way an application with ``assign()`` runs): its ``consumer_group_metadata()`` carries -1 and no
member id, and a transactional producer sends it with ``send_offsets_to_transaction``. Kafka's Java client sends
the same three fields from ``new ConsumerGroupMetadata(groupId)`` (``ConsumerGroupMetadata(String)``: -1, "",
``Optional.empty()``). The model of the coordinator's rules, with KIP-1287's draft, is
:mod:`labkit.models.kip1287` (MODELLED).
"""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from labkit.broker.probe import KAFKA_LOG
from labkit.broker.settings import kafka_version
from labkit.crashlab.experiment import Experiment
from labkit.kafka.records import committed_offsets, produce
from labkit.kafka.group_member import GroupMember, describe_assignments
from labkit.kafka.group_metadata import metadata_epoch
from labkit.lessons.unassigned import LIBRDKAFKA_TXN_VERSION
from labkit.models import kip1287
from labkit.waiting import wait_until

#: The outsider's name in the experiment's history.
OUTSIDER = "non-member"


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


def nonmember_commit(exp: Experiment, protocol: str = "consumer", *, records: int = 12, member_offset: int = 3,
                     txn_offset: int = 9, plain_offset: int = 7) -> dict:
    """On the real broker: member A (:class:`~labkit.kafka.group_member.GroupMember`, ``group.protocol`` =
    ``protocol``) joins a group on a one-partition topic of ``records`` records, holds partition 0 and commits
    ``member_offset`` in its own transaction. Then an :class:`Outsider` commits ``txn_offset`` for partition 0 in a
    transaction, and ``plain_offset`` with a plain OffsetCommit; after each the group's committed offset is read
    (:func:`~labkit.kafka.records.committed_offsets`), and who holds the partition.

    Returns:
        ``{"protocol", "release", "topic", "group", "member_id", "member_epoch", "outsider", "rows", "held_by"}``:
        the outsider's group metadata (:func:`metadata_fields`), ``rows`` one dict per commit ``{"protocol",
        "client", "request", "generation", "member id", "offset", "answer", "committed after"}``, and ``held_by``
        the partition's holders when the outsider's commits were done (member id to partitions,
        :func:`~labkit.kafka.group_member.describe_assignments`).
    """
    topic = exp.topic("nonmember", partitions=1)
    produce(exp.bootstrap, topic, [f"r{i}" for i in range(records)])
    group = f"{exp.name}-nonmember-{uuid.uuid4().hex[:6]}"
    member = GroupMember(exp, group, topic, protocol=protocol, name="member-A")
    outsider = None
    try:
        member.join(partitions=1)
        rows = []

        def row(client: str, request: str, fields: dict, offset: int, answer: str, before: int) -> None:
            # an offset committed in a transaction is read once the commit's marker has reached the group coordinator
            expected = offset if answer == "NONE" else before
            wait_until(lambda: committed_offsets(exp.bootstrap, group, topic)[0] == expected, 60)
            rows.append({"protocol": protocol, "client": client, "request": request,
                         "generation": fields["generation"], "member id": fields["member_id"] or "(none)",
                         "offset": offset, "answer": answer,
                         "committed after": committed_offsets(exp.bootstrap, group, topic)[0]})

        a_fields = {"generation": member.epoch, "member_id": member.member_id}
        row("member A", "TxnOffsetCommit", a_fields, member_offset, member.commit_offsets({0: member_offset})[0],
            committed_offsets(exp.bootstrap, group, topic)[0])
        outsider = Outsider(exp, group, topic)
        fields = outsider.metadata
        before = rows[-1]["committed after"]
        row("non-member", "TxnOffsetCommit", fields, txn_offset, outsider.txn_commit({0: txn_offset}), before)
        before = rows[-1]["committed after"]
        row("non-member", "OffsetCommit", fields, plain_offset, outsider.plain_commit({0: plain_offset}), before)
        member.consumer.poll(0)
        held_by = describe_assignments(exp.bootstrap, group)
        return {"protocol": protocol, "release": kafka_version(), "topic": topic, "group": group,
                "member_id": member.member_id, "member_epoch": a_fields["generation"], "outsider": fields,
                "rows": rows, "held_by": held_by}
    finally:
        if outsider is not None:
            outsider.close()
        member.close()


def replay_nonmember(run: dict, release: str | None = None) -> list[dict]:
    """MODELLED: the outsider's two commits of :func:`nonmember_commit` replayed through
    :mod:`labkit.models.kip1287`'s rules, beside the broker's answers, against the group as it was (member A holding
    partition 0 at its epoch): one dict per commit ``{"request", "real", "4.2", "release", "kip1287 v5",
    "kip1287 v6 (as drafted)", "kip1287 v6 (non-member checked)"}``. TxnOffsetCommit as librdkafka sends it
    (:data:`~labkit.lessons.unassigned.LIBRDKAFKA_TXN_VERSION`) except in the two v6 columns; "non-member checked"
    is a reading no draft proposes (:data:`~labkit.models.kip1287.NON_MEMBER_READINGS`)."""
    rule = kip1287.rule_of(release or run["release"])
    model = kip1287.GroupModel.from_assignments(run["held_by"], epoch=run["member_epoch"])
    out = []
    for r in run["rows"]:
        if r["client"] != "non-member":
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
