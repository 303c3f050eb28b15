"""A real consumer group member driven step by step from a notebook (confluent-kafka): it joins, holds its
assignment without processing, and commits offsets inside a transaction; and what the group coordinator says of a
group's assignments."""

from __future__ import annotations

import uuid
from typing import Protocol

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from labkit.broker.probe import KAFKA_LOG, admin
from labkit.broker.settings import CONSUMER_SESSION_TIMEOUT_MS
from labkit.core.history import History
from labkit.core.waiting import Deadline
from labkit.kafka.group_metadata import metadata_epoch, with_epoch
from labkit.kafka.offset_guard import UnassignedPartitionError, send_offsets_guarded


class Experiment(Protocol):
    """What a member needs of its experiment (:class:`labkit.crashlab.experiment.Experiment`, a layer above this
    one): the broker's address and the history its commits go into."""

    bootstrap: str
    history: History


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
