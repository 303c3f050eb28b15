"""Notebook 05, the unassigned-partition bug (KAFKA-20191) on the real broker, and its opening question
(:data:`QUESTION`, answered by :func:`epochs_outcome` from part 2's commits): a group member with its
current member epoch commits, inside its transaction, an offset for a partition assigned to another
member, and the broker (Kafka 4.3.2 and 4.4.0) accepts it. The other member, once it restarts, resumes
from that offset. Which epochs the broker checks partition by partition (KIP-1251), shown with real
commits at three epochs (:func:`epoch_paths`), and a plain OffsetCommit doing the same. Also the
client-side guard an application can use today, before any broker validates the commit (KIP-1287,
modelled in :mod:`labkit.models.kip1287`), and the draft's wire numbers against the release's
(:func:`draft_collisions`: API key and version asked of the broker, the error code read from the release's jar)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import KafkaException, TopicPartition

from labkit.broker.settings import kafka_version
from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.kafka import protocol
from labkit.kafka.group_member import GroupMember, classic_session, describe_assignments, hold
from labkit.kafka.group_metadata import LIBRDKAFKA_TXN_VERSION
from labkit.kafka.offset_guard import UnassignedPartitionError
from labkit.kafka.records import committed_offsets
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.learn.predictions import Question
from labkit.models import kip1287

#: The notebook's opening question: which of member B's two transactional commits for member A's partition the
#: group coordinator accepts (answered in part 2).
QUESTION = Question(
    "05", "member B commits, in a transaction, an offset for a partition the group assigned to member A, once with its "
          "current member epoch and once with an epoch one lower. Which of the two does the broker accept?",
    {"current_only": "The one with B's current epoch; the lower one is refused",
     "lower_only": "The one with the lower epoch; the current one is refused",
     "both": "Both",
     "neither": "Neither: the partition is not B's"},
    {"lower_only": "It is the other way round: the current epoch is trusted for every partition, and only an epoch "
                   "behind the member's has its partitions checked (KIP-1251, ConsumerGroup.validateOffsetCommit).",
     "both": "Since Kafka 4.3 (KIP-1251) an epoch behind the member's is checked partition by partition: accepted "
             "only for partitions the member has held since that epoch, and A's partition was never B's.",
     "neither": "With the member's current epoch the group coordinator checks no partition at all "
                "(ConsumerGroup.validateOffsetCommit): that is the bug, KAFKA-20191. Only the lower epoch's commit "
                "had its partition checked, and was refused."})


def epochs_outcome(paths: dict) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from :func:`epoch_paths`' commits for A's partition (its
    ``rows``: the broker's answers, "NONE" for accepted), each known by the path ``ConsumerGroup.validateOffsetCommit``
    took for it against B's epoch at the broker (``path``: "current" for the commit with B's current epoch, "lagging"
    for the one with an epoch behind it), not by the epoch B's client believed it had.

    Raises:
        LabkitError: ``paths`` lacks either commit, or B's client sent an epoch other than the broker's as its current
            one, so that no commit took the current path (the lab's failure, named).
    """
    rows = [row for row in paths["rows"] if row["partition"] == paths["victim"]]
    if sorted(row["path"] for row in rows) != ["current", "lagging"]:
        raise LabkitError(f"part 2 holds no commit for A's partition at B's epoch at the broker "
                          f"({paths['b_broker_epoch']}; B's client sent {paths['b_epoch']}) and one behind it: {rows}")
    answers = {row["path"]: row["answer"] == "NONE" for row in rows}
    return {(True, False): "current_only", (False, True): "lower_only", (True, True): "both",
            (False, False): "neither"}[answers["current"], answers["lagging"]]


# The proposed fix, MODELLED (KIP-1287): notebook 05 replays B's commits through the group coordinator's model
# (Kafka 4.2's rule, the running release's, the draft's) and names the draft's two candidate errors.
GroupModel = kip1287.GroupModel
STALE_MEMBER_EPOCH, UNASSIGNED_PARTITION = kip1287.STALE_MEMBER_EPOCH, kip1287.UNASSIGNED_PARTITION
#: The drafts' numbers against the running release (05 shows all three; 07 the two the broker answers).
draft_collisions = protocol.draft_collisions
#: Member epochs at the broker (ConsumerGroupDescribe); ``protocol`` is a group protocol's name below.
describe_consumer_group = protocol.describe_consumer_group


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


def commit_rows(rows: list[dict]) -> list[dict]:
    """The commits of :func:`labkit.lessons.nonmember_commit.nonmember_commit` (its runs' ``rows``) as notebook 05
    shows them, narrow enough for JupyterLab's notebook column at 1280x800 (848 px) and the book's: one dict per commit
    ``{"client", "library", "request", "metadata sent", "offset", "answer", "committed", "protocol"}``, where
    "metadata sent" is the generation (member epoch) and member id the commit carried (the id's first 8 characters),
    and "committed" the group's committed offset before and after the commit (``"3 → 9"``; -1001: none yet)."""
    def sent(r: dict) -> str:
        member = r["member id"]
        return f"generation {r['generation']}, " + ("no member id" if member == "(none)" else
                                                     f"member {member if len(member) <= 9 else member[:8] + '…'}")

    return [{"client": r["client"], "library": r["library"], "request": r["request"], "metadata sent": sent(r),
             "offset": r["offset"], "answer": r["answer"],
             "committed": f"{r['committed before']} → {r['committed after']}", "protocol": r["protocol"]}
            for r in rows]


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


@marked
def check_guard(answer: object, bug: dict) -> Verdict:
    """Notebook 05's exercise: ``answer`` is a function ``(assignment, offsets) -> offsets`` that keeps, of
    ``offsets`` (``{partition: offset}``), only the partitions in ``assignment`` (a list of partition numbers).
    Checked on member B's real assignment from part 1's run (``bug``, from :func:`unassigned_commit`) with the
    commit B made there, and on two edge cases."""
    if (v := unanswered(answer, "a function (assignment, offsets) -> offsets")):
        return v
    if not callable(answer):
        return Verdict("wrong", "The answer is a function: def guard(assignment, offsets): ... return {...}")
    own = bug["assignments"].get(bug["member_b"], [])
    cases = [(own, {bug["victim"]: 9, **{p: 0 for p in own}}), ([0, 1], {0: 5, 1: 7}), ([], {0: 1})]
    for assignment, offsets in cases:
        expected = {p: o for p, o in offsets.items() if p in assignment}
        try:
            got = answer(list(assignment), dict(offsets))
        except Exception as exc:  # noqa: BLE001: the learner's code failing is a wrong answer
            return Verdict("wrong", f"guard({assignment}, {offsets}) raised {exc!r}.")
        if got != expected:
            return Verdict("wrong", f"guard({assignment}, {offsets}) returned {got!r}. B's commit in part 1 went "
                                    "through because nothing compared the offsets with the assignment: keep only "
                                    "the partitions the member holds.")
    return Verdict("right", f"With B's real assignment {own}, the guard dropped partition {bug['victim']} (A's) "
                            "and kept B's own; nothing outside the assignment would reach the group coordinator.")
