"""MODELLED, KIP-932 share partition as Kafka 4.4 implements it, plus KIP-1289's pending acknowledgements.

One share partition's records as the share-partition leader holds them, and the part of the share
coordinator that persists them in ``__share_group_state``. No threads, no clock of its own: the caller
says when a lock expires. Sources (each rule names one):

* [KIP-932] / Kafka 4.4 ``SharePartition``: acquiring a record makes it ACQUIRED and adds one to its
  delivery count; ACCEPT makes it ACKNOWLEDGED, REJECT ARCHIVED, RELEASE AVAILABLE again; a lock
  expiry or the member leaving is a RELEASE; a released record whose delivery count reached
  ``share.delivery.count.limit`` is ARCHIVED instead (4.4 passes through ARCHIVING when the group has a
  dead-letter queue: the model does not, it has none). ACKNOWLEDGED and ARCHIVED are terminal. An
  acknowledgement of a record below the SPSO (terminal, whoever acknowledged it) is skipped without an error:
  the broker passes over it before it looks at the record's state or holder (4.4.0's ``SharePartition.acknowledge``,
  "All offsets in the acknowledgement batch {} are already archived", and per in-flight batch and per offset in
  ``acknowledgeBatchRecords`` / ``acknowledgePerOffsetBatchRecords``: SharePartition.java lines 1043-1046, 2222
  and 2322 by the line table of kafka_2.13-4.4.0.jar's ``kafka/server/share/SharePartition.class``; notebook 06
  part 3 saw the broker answer such a late ACCEPT NONE on both clients, :func:`labkit.lessons.share_close.late_accept`).
  An acknowledgement of any other record the member does not hold (AVAILABLE, another member's, or terminal above
  a record still in flight) fails with INVALID_RECORD_STATE.
  ACQUIRED is never persisted: a reload from ``__share_group_state`` makes an acquired record AVAILABLE
  again with its last persisted delivery count (KIP-932: delivery counts are inexact after failures).
* [KIP-932] SPSO: the lowest offset that is not terminal (the broker moves it once the state change is
  written to the share coordinator, ``rollbackOrProcessStateUpdates``; the model at once).
  SPEO: one past the highest offset ever acquired.
* [KIP-1289 seed §4.2-4.4] a transactional acknowledgement is written to ``__share_group_state`` as
  pending for its producer id; ``complete(pid, commit)`` (the seed's ``completeTransaction``) makes it
  real on COMMIT and discards it on ABORT; a reload replays the log, markers included.
* [draft PR 22357] a record acknowledged in a transaction is TX_PENDING (:data:`PENDING`) until the
  transaction's marker; it cannot be acquired meanwhile, and staging cancels its acquisition lock (the
  transaction timeout bounds the hold: the model's "freeze", its default); an abort keeps the delivery
  count (the model's "keep", its default); only ACCEPT and REJECT are allowed in a transaction.
* [our choice, the open questions of notebook 07] what a lock expiry does to a pending record
  (``lock_while_pending``) and whether an abort keeps the delivery count (``count_on_abort``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from labkit.core.history import Event

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED"
PENDING = "TX_PENDING"
TERMINAL = (ACKNOWLEDGED, ARCHIVED)
ACK_TYPES = ("ACCEPT", "RELEASE", "REJECT")
TXN_ACK_TYPES = ("ACCEPT", "REJECT")  # [draft PR 22357]
LOCK_WHILE_PENDING = ("freeze", "abort", "release")
COUNT_ON_ABORT = ("keep", "revert")
INVALID_RECORD_STATE = "INVALID_RECORD_STATE"
INVALID_REQUEST = "INVALID_REQUEST"


class Record(NamedTuple):
    """One offset: ``state``, ``count`` (delivery count), ``holder`` (the member that ACQUIRED it, or
    whose transaction holds it PENDING), ``pid`` (producer id of the pending transaction)."""

    state: str = AVAILABLE
    count: int = 0
    holder: str | None = None
    pid: int | None = None


@dataclass
class SharePartition:
    """A share partition of ``records`` offsets (0..records-1), already written to the topic.

    Args:
        records: how many records the partition holds (offsets).
        limit: ``share.delivery.count.limit`` (Kafka's default 5; the broker's minimum 2).
        lock_while_pending: what a lock expiry does to a PENDING record: "freeze" (nothing: the lock
            does not run while the transaction is open), "abort" (the caller aborts the transaction),
            "release" (the record is released as if it were ACQUIRED; the pending acknowledgement stays).
        count_on_abort: "keep" (an aborted delivery counts, so a record that keeps aborting is archived
            at the limit) or "revert" (the abort takes the delivery back).
        release_in_txn: allow RELEASE inside a transaction (the draft forbids it; open question (c)).
    Raises:
        ValueError: an option outside :data:`LOCK_WHILE_PENDING` / :data:`COUNT_ON_ABORT`, or limit < 1.
    """

    records: int
    limit: int = 5
    lock_while_pending: str = "freeze"
    count_on_abort: str = "keep"
    release_in_txn: bool = False
    offsets: list[Record] = field(default_factory=list)
    pending: dict[int, dict[int, str]] = field(default_factory=dict)  # pid -> offset -> ACCEPT/REJECT (replaced,
    # never changed in place: clones share them)
    log: list[tuple] = field(default_factory=list)  # __share_group_state, see reload()
    speo: int = 0

    def __post_init__(self) -> None:
        if self.lock_while_pending not in LOCK_WHILE_PENDING or self.count_on_abort not in COUNT_ON_ABORT:
            raise ValueError(f"lock_while_pending must be one of {LOCK_WHILE_PENDING} and count_on_abort one of "
                             f"{COUNT_ON_ABORT}, not {self.lock_while_pending!r} / {self.count_on_abort!r}")
        if self.limit < 1:
            raise ValueError(f"limit must be at least 1 delivery, not {self.limit}")
        self.offsets = self.offsets or [Record() for _ in range(self.records)]

    def clone(self) -> "SharePartition":
        c = object.__new__(SharePartition)
        c.__dict__.update(self.__dict__)
        c.offsets, c.pending, c.log = list(self.offsets), dict(self.pending), list(self.log)
        return c

    def key(self) -> tuple:
        """Everything that decides what happens next (the log's past excluded), hashable."""
        return tuple(self.offsets), tuple(sorted((p, tuple(sorted(a.items()))) for p, a in self.pending.items()))

    @property
    def spso(self) -> int:
        return next((o for o, r in enumerate(self.offsets) if r.state not in TERMINAL), self.records)

    def _set(self, offset: int, record: Record) -> None:
        self.offsets[offset] = record
        self.log.append(("state", offset, record.state, record.count))

    def acquire(self, member: str, max_records: int, only: list[int] | None = None) -> list[int]:
        """[KIP-932] Up to ``max_records`` AVAILABLE offsets (of ``only``, when given), lowest first, become
        ACQUIRED by ``member`` (delivery count + 1, not persisted). Returns them."""
        got = [o for o, r in enumerate(self.offsets) if r.state == AVAILABLE and (only is None or o in only)]
        got = got[:max_records]
        for o in got:
            self.offsets[o] = Record(ACQUIRED, self.offsets[o].count + 1, member)
            self.speo = max(self.speo, o + 1)
        return got

    def _released(self, r: Record) -> Record:
        return Record(ARCHIVED if r.count >= self.limit else AVAILABLE, r.count)

    def acknowledge(self, member: str, offset: int, ack_type: str) -> str | None:
        """[KIP-932, Kafka 4.4 ``SharePartition.acknowledge``] ShareAcknowledge of one offset by ``member``
        (a member id) with ``ack_type`` (one of :data:`ACK_TYPES`).

        Returns:
            None: applied, or skipped because ``offset`` is below the SPSO (:attr:`spso`: the record is terminal
            already; the broker skips it whoever sends it and answers no error, and nothing changes);
            INVALID_RECORD_STATE: ``offset`` is at or above the SPSO and ``member`` does not hold it ACQUIRED.
        Raises:
            ValueError: an unknown ``ack_type`` (the broker answers INVALID_REQUEST).
        """
        if ack_type not in ACK_TYPES:
            raise ValueError(f"ack_type must be one of {ACK_TYPES}, not {ack_type!r}")
        if offset < self.spso:
            return None
        r = self.offsets[offset]
        if r.state != ACQUIRED or r.holder != member:
            return INVALID_RECORD_STATE
        new = {"ACCEPT": Record(ACKNOWLEDGED, r.count), "REJECT": Record(ARCHIVED, r.count)}.get(ack_type)
        self._set(offset, new or self._released(r))
        return None

    def release(self, offset: int) -> bool:
        """[KIP-932] The acquisition lock of ``offset`` expired: an ACQUIRED record is released (ARCHIVED
        at the limit). A PENDING one: "release" releases it too, "freeze" and "abort" leave it (the
        caller aborts the transaction for "abort"). Returns whether the record changed."""
        r = self.offsets[offset]
        if r.state == ACQUIRED or (r.state == PENDING and self.lock_while_pending == "release"):
            self._set(offset, self._released(r))
            return True
        return False

    def member_left(self, member: str) -> list[int]:
        """[KIP-932] ``member`` left or crashed (its share session closed): its ACQUIRED records are
        released. PENDING ones stay with their transaction. Returns the released offsets."""
        return [o for o, r in enumerate(self.offsets) if r.state == ACQUIRED and r.holder == member and self.release(o)]

    def acknowledge_in_txn(self, member: str, offset: int, ack_type: str, pid: int) -> str | None:
        """[KIP-1289] TxnShareAcknowledge of one offset for producer ``pid``: the record becomes PENDING
        and the acknowledgement is persisted as pending. Returns None, INVALID_REQUEST for RELEASE
        [draft PR 22357], or INVALID_RECORD_STATE when ``member`` does not hold the record, below the SPSO
        too: [our choice] unlike :meth:`acknowledge`'s skip (the drafts do not say), so that the transaction
        aborts instead of committing an output for a record another member's acknowledgement settled."""
        if ack_type not in TXN_ACK_TYPES + (("RELEASE",) if self.release_in_txn else ()):
            return INVALID_REQUEST
        r = self.offsets[offset]
        if r.state != ACQUIRED or r.holder != member:
            return INVALID_RECORD_STATE
        self.pending[pid] = {**self.pending.get(pid, {}), offset: ack_type}
        self.offsets[offset] = Record(PENDING, r.count, member, pid)
        self.log.append(("pending", offset, r.count, pid, ack_type, member))
        return None

    def complete(self, pid: int, commit: bool) -> dict[int, str]:
        """[KIP-1289 seed §4.3] ``completeTransaction``: the WriteTxnMarkers of producer ``pid``'s
        transaction reached ``__share_group_state``. COMMIT applies its pending acknowledgements (ACCEPT:
        ACKNOWLEDGED; REJECT: ARCHIVED), whatever state the record is in by then; ABORT discards them and
        the records still PENDING for ``pid`` go back to AVAILABLE (count kept or reverted, ARCHIVED at
        the limit). Returns offset to the acknowledgement type it applied or discarded."""
        acks = self.pending.pop(pid, {})
        self.log.append(("marker", pid, commit))
        for o, ack_type in sorted(acks.items()):
            r = self.offsets[o]
            if commit:
                done = {"ACCEPT": Record(ACKNOWLEDGED, r.count), "REJECT": Record(ARCHIVED, r.count)}
                self.offsets[o] = done.get(ack_type) or self._released(r)
            elif r.state == PENDING and r.pid == pid:
                self.offsets[o] = self._released(Record(PENDING, r.count - (self.count_on_abort == "revert")))
        return acks

    def reload(self) -> None:
        """The share coordinator (and so the share-partition leader) restarted: the state is rebuilt from
        the ``__share_group_state`` log alone, whose entries are ``("state", offset, state, count)``,
        ``("pending", offset, count, pid, ack_type, member)`` (a transactional write) and
        ``("marker", pid, commit)`` (WriteTxnMarkers). ACQUIRED is not in it: those records are AVAILABLE
        again with their last persisted delivery count; acknowledgements whose marker is not in the log
        stay pending."""
        log, self.log = self.log, []
        self.offsets, self.pending = [Record() for _ in range(self.records)], {}
        for entry in log:
            if entry[0] == "marker":
                self.complete(entry[1], entry[2])
                continue
            self.log.append(entry)
            if entry[0] == "state":
                self.offsets[entry[1]] = Record(entry[2], entry[3])
            else:
                _, o, count, pid, ack_type, member = entry
                self.pending.setdefault(pid, {})[o] = ack_type
                self.offsets[o] = Record(PENDING, count, member, pid)


def replay_client_events(events: list[Event], topic: str, records: int, limit: int, lock_ms: int,
                         slack_ms: int = 1000) -> tuple[SharePartition, list[str]]:
    """Run what real share consumers did (a history of notebook 06's role, ``topic`` partition 0) through
    the model, and say where the model disagrees with the broker's answers.

    ``delivered`` acquires that offset for that consumer (the model must have it AVAILABLE, with the same
    delivery count); ``ack_committed`` acknowledges (the model's error must be the broker's); ``crash``,
    ``stop``, ``finished`` and ``fenced`` make the member leave. Timing is where they cannot agree
    exactly: the client sees an acquisition up to ``slack_ms`` after the broker made it, so a lock
    expires in the model ``lock_ms`` after the client's delivery, or already ``lock_ms - slack_ms`` after
    it when the next event is another consumer getting the record, or the holder's acknowledgement
    that the broker refused (inside that window, the broker's clock decided). An acknowledgement the client sent
    while the model still held the lock, and the broker accepted, was taken before the lock expired, however late its
    answer reached the client (on a busy machine, more than a second after it was sent). Likewise an acknowledgement
    of a record another consumer's acknowledgement made terminal less than ``slack_ms`` before (by the
    clients' events) may be refused by the broker although the model skips it (below the SPSO): the broker
    may have taken it first, or before that acknowledgement's state was written and the SPSO moved; then
    the broker's INVALID_RECORD_STATE is not a disagreement.

    Args:
        events: the experiment's history (any order; ordered here by ``mono_ns``).
        topic: the share group's topic (partition 0) whose events are replayed.
        records: how many records the partition holds (offsets 0..records-1).
        limit: the group's ``share.delivery.count.limit``.
        lock_ms: the acquisition lock's duration (``group.share.record.lock.duration.ms``), ms.
        slack_ms: how late, at most, a client's event is after the broker's act (ms).
    Returns:
        ``(model, disagreements)``: compare ``model.offsets`` with the broker's persisted states.
    """
    sp, since, settled, asked, found = SharePartition(records, limit), {}, {}, {}, []
    for e in sorted(events, key=lambda e: e.mono_ns):
        for o, at in list(since.items()):
            early = e.offset == o and (e.kind == "delivered" or e.error == INVALID_RECORD_STATE)
            # the holder's acknowledgement, sent inside the lock, not answered yet: the broker may have taken it
            # before the lock expired, whenever its answer comes back (unless the record went to another consumer)
            if o in asked and not early:
                continue
            if e.mono_ns - at >= (lock_ms - slack_ms * early) * 1_000_000 and sp.offsets[o].state == ACQUIRED:
                sp.release(o)
                del since[o]
        if e.topic not in (topic, None):
            continue
        if e.kind == "acknowledged" and e.offset in since and sp.offsets[e.offset].holder == e.participant:
            asked[e.offset] = e.participant
        elif e.kind == "delivered":
            asked.pop(e.offset, None)
            if sp.acquire(e.participant, 1, only=[e.offset]) != [e.offset]:
                found.append(f"{e.participant} got offset {e.offset}, which the model has {sp.offsets[e.offset].state}")
                continue
            since[e.offset] = e.mono_ns
            if sp.offsets[e.offset].count != e.delivery_count:
                found.append(f"offset {e.offset}: delivery count {e.delivery_count}, model {sp.offsets[e.offset].count}")
        elif e.kind == "ack_committed":
            asked.pop(e.offset, None)
            skipped = e.offset < sp.spso
            error = sp.acknowledge(e.participant, e.offset, e.ack_type)
            since.pop(e.offset, None) if error is None else None
            if not skipped and error is None and sp.offsets[e.offset].state in TERMINAL:
                settled[e.offset] = e.mono_ns
            raced = (skipped and e.error == INVALID_RECORD_STATE and e.offset in settled
                     and e.mono_ns - settled[e.offset] < slack_ms * 1_000_000)
            if error != e.error and not raced:
                found.append(f"{e.participant}'s {e.ack_type} of offset {e.offset}: broker {e.error}, model {error}")
        elif e.kind in ("crash", "stop", "finished", "fenced"):
            sp.member_left(e.participant)
            asked = {o: p for o, p in asked.items() if p != e.participant}
    return sp, found
