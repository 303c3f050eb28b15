"""MODELLED, KIP-1287 (KAFKA-20191), not in any Kafka release: offset commit validation in the group coordinator.

How the group coordinator validates an offset commit (TxnOffsetCommit, and plain OffsetCommit) from a member
of a consumer group (``group.protocol=consumer``, KIP-848), by rule, so that a notebook can replay a request
recorded on the real broker through each of them:

* ``"4.2"`` (history): the request's member epoch must equal the member's epoch at the broker; no partition
  is checked (``ConsumerGroup.validateOffsetCommit`` -> ``validateMemberEpoch``, strict equality, before
  apache/kafka PR #21692).
* ``"4.3"`` and ``"4.4"`` (Kafka 4.3.2 and 4.4.0 alike; KIP-1251, "Assignment epochs for consumer groups",
  apache/kafka PR #21692): ``ConsumerGroup.validateOffsetCommit`` returns a ``CommitPartitionValidator``:

  - client epoch == broker epoch (the **current-epoch path**): ``CommitPartitionValidator.NO_OP``, every
    partition accepted, whoever it is assigned to. This is KAFKA-20191's hole.
  - client epoch > broker epoch: STALE_MEMBER_EPOCH ("newer than current member epoch").
  - client epoch < broker epoch (the **lagging path**): ``createAssignmentEpochValidator`` checks each
    partition: it must be assigned to this member (or pending revocation from it) at an assignment epoch
    <= the client epoch, else STALE_MEMBER_EPOCH ("not assigned or pending revocation for member", "older
    than assignment epoch"). ``OffsetMetadataManager`` throws it out of the partition loop, so one such
    partition fails the whole request, every partition with the same error.

  On TxnOffsetCommit, ``OffsetMetadataManager.commitTransactionalOffset`` sends STALE_MEMBER_EPOCH as
  ILLEGAL_GENERATION below version 6: 4.4.0 by the request's version
  (``TxnOffsetCommitRequest.supportsStaleMemberEpochError``, in 4.4.0's kafka-clients only), 4.3.2 always (its
  TxnOffsetCommit goes up to 5; version 6 is 4.4.0's, KIP-1319, topic ids). The two rules differ in nothing else.
* ``"kip1287"`` (proposed, seed 001): from TxnOffsetCommit version 6, every partition on every path must
  satisfy ``assignmentEpoch(partition) <= clientEpoch <= brokerEpoch`` (-1 for a partition not assigned to
  this member), answered partition by partition; versions 5 and below keep the release's rule. The draft
  names two errors for a partition that fails (its table and compatibility section: STALE_MEMBER_EPOCH; its
  Public Interfaces: UNASSIGNED_PARTITION, code 134): ``unassigned_error`` picks one. Its version 6 and its
  code 134 are both taken in Kafka 4.4.0 (:func:`labkit.kafka.protocol.draft_collisions`).

The **assignment epoch** of a partition is the member epoch at which the partition was assigned to the
member (KIP-1251); a partition the member keeps across rebalances keeps it.

**The non-member path** (every rule): a request with generation or member epoch -1
(``JoinGroupRequest.UNKNOWN_GENERATION_ID``), no member id (``UNKNOWN_MEMBER_ID``, "") and no group instance id
comes from no member at all. The same in consumer and classic groups:

* The group is empty: accepted, transactional or not (the admin client, a consumer with ``assign()``:
  ``ConsumerGroup.validateOffsetCommit``'s and ``ClassicGroup.validateOffsetCommit``'s first check).
* The group has members, TxnOffsetCommit: accepted, **every partition, whoever holds it**, before any member is
  looked up (``ConsumerGroup.validateOffsetCommit`` returns ``CommitPartitionValidator.NO_OP``: apache/kafka PR
  #17914, KAFKA-18060, reviewed in November 2024; ``ClassicGroup.validateOffsetCommit`` checks a member only if one
  of the three fields is given, since KIP-447's apache/kafka PR #7897). Read in the 4.3.2 and 4.4.0 jars alike;
  the "4.2" rule assumes it too (no 4.2 jar checked). It is what the Java client's ``new
  ConsumerGroupMetadata(groupId)`` sends (-1, "", no instance id), and a librdkafka consumer that never subscribed
  (:mod:`labkit.lessons.nonmember_commit`).
* The group has members, plain OffsetCommit: UNKNOWN_MEMBER_ID (``ConsumerGroup``: no member ""; ``ClassicGroup``:
  a non-empty group).

The KIP-1287 draft (seed 001) does not mention this path: its rule needs the member's epoch at the broker, and
there is no member. ``non_member`` picks the reading: "as drafted" (the path stays as it is, the default) or
"checked" (from TxnOffsetCommit version 6, a non-member holds no partition, so every partition fails as an
unassigned one: a variant no draft proposes). Versions 5 and below keep the release's rule either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NONE = "NONE"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
STALE_MEMBER_EPOCH = "STALE_MEMBER_EPOCH"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
UNASSIGNED_PARTITION = "UNASSIGNED_PARTITION"  # proposed code 134, GROUP_DELETION_FAILED in Kafka 4.4.0
RULES = ("4.2", "4.3", "4.4", "kip1287")
#: What a request from no member carries (``JoinGroupRequest.UNKNOWN_MEMBER_ID`` and ``UNKNOWN_GENERATION_ID``).
NO_MEMBER, NO_EPOCH = "", -1
#: KIP-1287's readings of the non-member path (the draft is silent on it): see the module's docstring.
NON_MEMBER_READINGS = ("as drafted", "checked")
#: TxnOffsetCommit's newest version in each release's rule (``TxnOffsetCommitRequest.json``'s validVersions).
NEWEST_TXN_OFFSET_COMMIT = {"4.2": 5, "4.3": 5, "4.4": 6, "kip1287": 6}
FIRST_VALIDATING_VERSION = 6  # the draft's; Kafka 4.4.0's v6 is KIP-1319's
FIRST_STALE_MEMBER_EPOCH_VERSION = 6  # TxnOffsetCommit below it answers ILLEGAL_GENERATION instead (KIP-1319)


def rule_of(release: str) -> str:
    """The rule of a Kafka release: "4.3.2" -> "4.3", "4.4.0" -> "4.4", "4.2.0" -> "4.2".

    Raises:
        ValueError: a release the model has no rule for (the message lists them).
    """
    rule = ".".join(release.split(".")[:2])
    if rule not in RULES:
        raise ValueError(f"no rule for Kafka {release}; the model knows {', '.join(r for r in RULES if r[0].isdigit())}")
    return rule


def commit_path(client_epoch: int, broker_epoch: int) -> str:
    """The path of Kafka 4.3/4.4's ``ConsumerGroup.validateOffsetCommit`` that a commit carrying ``client_epoch``
    takes for a member whose epoch at the broker is ``broker_epoch``: "current" (equal), "lagging" (older) or
    "newer"."""
    return "current" if client_epoch == broker_epoch else "lagging" if client_epoch < broker_epoch else "newer"


@dataclass
class Member:
    """A consumer group member as the coordinator sees it.

    Args:
        member_id: the member id.
        epoch: the member epoch the broker holds (it rises with each new assignment).
        assignment: partition number to its assignment epoch (KIP-1251): the member epoch at which the
            partition was assigned to this member.
        pending_revocation: partitions the member is giving up but has not yet confirmed, to their assignment
            epoch; 4.3/4.4's lagging path accepts them too (``ConsumerGroupMember.pendingRevocationEpoch``).
    """

    member_id: str
    epoch: int
    assignment: dict[int, int] = field(default_factory=dict)
    pending_revocation: dict[int, int] = field(default_factory=dict)

    def assigned_at(self, partition: int) -> int:
        """The partition's assignment epoch for this member, -1 if it holds it neither assigned nor pending
        revocation."""
        return self.assignment.get(partition, self.pending_revocation.get(partition, -1))


@dataclass
class GroupModel:
    """The coordinator's view of one group: its members by id."""

    members: dict[str, Member] = field(default_factory=dict)

    @classmethod
    def from_assignments(cls, assignments: dict[str, list[int]], epoch: int = 1,
                         assigned_at: dict[str, dict[int, int]] | None = None) -> "GroupModel":
        """A group built from a real group's description (member id to assigned partitions, e.g.
        :func:`labkit.kafka.group_member.describe_assignments`). Every member gets ``epoch`` (a broker's
        ConsumerGroupDescribe shows each member's, :func:`labkit.kafka.protocol.describe_consumer_group`)
        and each partition the assignment epoch ``assigned_at[member][partition]`` if given, else
        ``epoch``."""
        assigned_at = assigned_at or {}
        return cls({m: Member(m, epoch, {p: assigned_at.get(m, {}).get(p, epoch) for p in parts})
                    for m, parts in assignments.items()})

    def add(self, member_id: str, epoch: int, assignment: dict[int, int],
            pending_revocation: dict[int, int] | None = None) -> Member:
        """Add or replace a member; returns it."""
        self.members[member_id] = Member(member_id, epoch, dict(assignment), dict(pending_revocation or {}))
        return self.members[member_id]

    def path(self, member_id: str, client_epoch: int) -> str:
        """Which path of 4.3/4.4's ``ConsumerGroup.validateOffsetCommit`` a commit takes: "current" (client
        epoch == the member's epoch at the broker: no partition checked), "lagging" (older: each partition
        checked against its assignment epoch), "newer" (refused), or "unknown member"."""
        member = self.members.get(member_id)
        return "unknown member" if member is None else commit_path(client_epoch, member.epoch)

    def offset_commit(self, member_id: str, client_epoch: int, partitions: list[int], *, rule: str = "4.4",
                      transactional: bool = True, version: int | None = None,
                      unassigned_error: str = UNASSIGNED_PARTITION, group_instance_id: str | None = None,
                      non_member: str = "as drafted") -> dict[int, str]:
        """The per-partition answer to an offset commit from ``member_id`` carrying ``client_epoch``, as the
        client reads it on the wire.

        Args:
            partitions: partition numbers whose offsets the request commits.
            rule: one of :data:`RULES` ("4.2" is history; "4.3" and "4.4" are the current releases; see
                :func:`rule_of`).
            transactional: TxnOffsetCommit (True) or OffsetCommit v9+ (False; it always names STALE_MEMBER_EPOCH).
            version: TxnOffsetCommit request version; default the rule's newest
                (:data:`NEWEST_TXN_OFFSET_COMMIT`). librdkafka 2.16 sends one below 6.
            unassigned_error: the error KIP-1287 returns for a partition that fails its rule:
                UNASSIGNED_PARTITION or STALE_MEMBER_EPOCH (the seed names both).
            group_instance_id: the request's group instance id (static membership), ``None`` if it has none.
            non_member: how the "kip1287" rule reads the non-member path (:data:`NON_MEMBER_READINGS`): a
                request with ``member_id`` :data:`NO_MEMBER`, ``client_epoch`` :data:`NO_EPOCH` and no
                ``group_instance_id``.
        Returns:
            Partition to error name ("NONE" when accepted).
        Raises:
            ValueError: unknown ``rule`` or ``unassigned_error``, or a version the rule's release lacks (the
                message lists the choices).
        """
        if rule not in RULES:
            raise ValueError(f"unknown rule {rule!r}; the rules are {', '.join(RULES)}")
        if unassigned_error not in (UNASSIGNED_PARTITION, STALE_MEMBER_EPOCH):
            raise ValueError(f"unassigned_error must be {UNASSIGNED_PARTITION} or {STALE_MEMBER_EPOCH}")
        if non_member not in NON_MEMBER_READINGS:
            raise ValueError(f"non_member must be one of {', '.join(map(repr, NON_MEMBER_READINGS))}")
        version = NEWEST_TXN_OFFSET_COMMIT[rule] if version is None else version
        if transactional and version > NEWEST_TXN_OFFSET_COMMIT[rule]:
            raise ValueError(f"TxnOffsetCommit v{version} does not exist under rule {rule} "
                             f"(its newest is v{NEWEST_TXN_OFFSET_COMMIT[rule]})")
        stale = STALE_MEMBER_EPOCH if not transactional or version >= FIRST_STALE_MEMBER_EPOCH_VERSION \
            else ILLEGAL_GENERATION
        if client_epoch < 0 and not self.members:
            return dict.fromkeys(partitions, NONE)  # an empty group: the admin client, a consumer with assign()
        if transactional and self.is_non_member(member_id, client_epoch, group_instance_id):
            # KAFKA-18060's shortcut and the classic group's: no member looked up, no partition checked
            checked = rule == "kip1287" and non_member == "checked" and version >= FIRST_VALIDATING_VERSION
            return dict.fromkeys(partitions, unassigned_error if checked else NONE)
        member = self.members.get(member_id)
        if member is None:
            return dict.fromkeys(partitions, UNKNOWN_MEMBER_ID)
        if rule == "kip1287" and transactional and version >= FIRST_VALIDATING_VERSION:
            return {p: self._kip1287(member, client_epoch, p, unassigned_error) for p in partitions}
        path = self.path(member_id, client_epoch)
        if path == "current":
            return dict.fromkeys(partitions, NONE)  # 4.2, 4.3, 4.4: no partition is checked
        if path == "newer" or rule == "4.2":
            return dict.fromkeys(partitions, stale)
        # 4.3/4.4 lagging path (KIP-1251); kip1287 below v6 keeps it
        ok = all(0 <= member.assigned_at(p) <= client_epoch for p in partitions)
        return dict.fromkeys(partitions, NONE if ok else stale)  # one failing partition fails the request

    @staticmethod
    def is_non_member(member_id: str, client_epoch: int, group_instance_id: str | None = None) -> bool:
        """Whether a request with these fields takes the non-member path (no member id, epoch -1, no instance id)."""
        return member_id == NO_MEMBER and client_epoch == NO_EPOCH and group_instance_id is None

    def txn_offset_commit(self, member_id: str, client_epoch: int, partitions: list[int], **kw) -> dict[int, str]:
        """:meth:`offset_commit` of a TxnOffsetCommit (``send_offsets_to_transaction``)."""
        return self.offset_commit(member_id, client_epoch, partitions, transactional=True, **kw)

    @staticmethod
    def _kip1287(member: Member, client_epoch: int, partition: int, unassigned_error: str) -> str:
        if client_epoch > member.epoch:
            return STALE_MEMBER_EPOCH
        assigned_at = member.assigned_at(partition)
        if assigned_at == -1:
            return unassigned_error
        return NONE if assigned_at <= client_epoch else STALE_MEMBER_EPOCH
