"""MODELLED, KIP-1287 (KAFKA-20191), not in any Kafka release: TxnOffsetCommit validation.

The group coordinator's validation of TxnOffsetCommit as Kafka 4.3/4.4 does it today and as KIP-1287
proposes. No Kafka release has KIP-1287, so it cannot run on a broker; this model lets a notebook
replay a request recorded on the real broker through both rules.

Today (Kafka 4.3.1 and 4.4.0, consumer protocol, KIP-848): the coordinator checks that the member exists and
that the request's member epoch is the member's current epoch; it does **not** check that the
committed partitions are assigned to the member. (Classic protocol: member id and generation.)

KIP-1287 (TxnOffsetCommit v6, building on KIP-1251's per-partition assignment epochs): for every
partition, ``assignmentEpoch(partition) <= clientEpoch <= brokerEpoch``, where assignmentEpoch is
the member epoch at which the partition was assigned to *this* member (-1 if it is not assigned to it).
Versions 5 and below keep today's behaviour.

The seed KIP names two errors for a partition that fails the rule: its table and its compatibility
section say STALE_MEMBER_EPOCH, its Public Interfaces add UNASSIGNED_PARTITION (code 134). The model
takes the choice as a parameter, default UNASSIGNED_PARTITION, so a notebook can show both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NONE = "NONE"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
STALE_MEMBER_EPOCH = "STALE_MEMBER_EPOCH"
UNASSIGNED_PARTITION = "UNASSIGNED_PARTITION"  # proposed code 134
RULES = ("today", "kip1287")
FIRST_VALIDATING_VERSION = 6


@dataclass
class Member:
    """A consumer group member as the coordinator sees it.

    Args:
        member_id: the member id.
        epoch: the member epoch the broker holds (it rises with each new assignment/heartbeat bump).
        assignment: partition number to its assignment epoch: the member epoch at which the
            partition was assigned to this member (KIP-1251).
    """

    member_id: str
    epoch: int
    assignment: dict[int, int] = field(default_factory=dict)


@dataclass
class GroupModel:
    """The coordinator's view of one group: its members by id."""

    members: dict[str, Member] = field(default_factory=dict)

    @classmethod
    def from_assignments(cls, assignments: dict[str, list[int]], epoch: int = 1) -> "GroupModel":
        """A group built from a real group's description (member id to assigned partitions, e.g.
        :func:`labkit.lessons.unassigned.describe_assignments`). confluent-kafka does not show member
        epochs, so every member gets ``epoch`` and every partition was assigned at that epoch: a
        member whose request the real broker accepted was, by today's rule, at its current epoch."""
        return cls({m: Member(m, epoch, dict.fromkeys(parts, epoch)) for m, parts in assignments.items()})

    def add(self, member_id: str, epoch: int, assignment: dict[int, int]) -> Member:
        """Add or replace a member; returns it."""
        self.members[member_id] = Member(member_id, epoch, dict(assignment))
        return self.members[member_id]

    def txn_offset_commit(self, member_id: str, client_epoch: int, partitions: list[int], *, version: int = 6,
                          rule: str = "kip1287", unassigned_error: str = UNASSIGNED_PARTITION) -> dict[int, str]:
        """The per-partition result of a TxnOffsetCommit from ``member_id`` carrying ``client_epoch``.

        Args:
            partitions: partition numbers whose offsets the request commits.
            version: TxnOffsetCommit request version; KIP-1287's rule applies from v6.
            rule: "today" (Kafka 4.3/4.4) or "kip1287" (proposed).
            unassigned_error: the error KIP-1287 returns for a partition that fails the rule:
                UNASSIGNED_PARTITION or STALE_MEMBER_EPOCH (the seed names both).
        Returns:
            Partition to error name ("NONE" when accepted).
        Raises:
            ValueError: unknown ``rule`` or ``unassigned_error`` (the message lists the choices).
        """
        if rule not in RULES:
            raise ValueError(f"unknown rule {rule!r}; the rules are {', '.join(RULES)}")
        if unassigned_error not in (UNASSIGNED_PARTITION, STALE_MEMBER_EPOCH):
            raise ValueError(f"unassigned_error must be {UNASSIGNED_PARTITION} or {STALE_MEMBER_EPOCH}")
        member = self.members.get(member_id)
        if member is None:
            return dict.fromkeys(partitions, UNKNOWN_MEMBER_ID)
        if rule == "today" or version < FIRST_VALIDATING_VERSION:
            return dict.fromkeys(partitions, NONE if client_epoch == member.epoch else STALE_MEMBER_EPOCH)
        if client_epoch > member.epoch:
            return dict.fromkeys(partitions, STALE_MEMBER_EPOCH)
        result = {}
        for p in partitions:
            assigned_at = member.assignment.get(p, -1)
            if assigned_at == -1:
                result[p] = unassigned_error
            elif assigned_at <= client_epoch:
                result[p] = NONE
            else:  # assigned to this member after the epoch the client sent
                result[p] = STALE_MEMBER_EPOCH
        return result
