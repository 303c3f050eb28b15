"""MODELLED, KIP-98 transaction coordinator and a data partition's LSO, as used by KIP-1289's model.

Kafka's transactions exist (KIP-98); this is their model, for notebook 07's proposal to run on. Sources:

* [KIP-98] / Kafka ``TransactionCoordinator``: one entry per ``transactional.id`` with its producer id and epoch; EMPTY
  → ONGOING → PREPARE_COMMIT → COMPLETE_COMMIT, or PREPARE_ABORT → COMPLETE_ABORT; each transition is written to
  ``__transaction_state`` (the :attr:`TxnCoordinator.log`) before it is answered; EndTxn returns once PREPARE_* is
  written, WriteTxnMarkers then go to every partition of the transaction, one by one (each partition's leader answers on
  its own; the coordinator keeps which answered in memory only, so a recovered coordinator sends them all again, and a
  partition gets a marker twice: harmless, Kafka's ``TransactionMarkerChannelManager``). InitProducerId bumps the epoch
  (fencing the previous instance: PRODUCER_FENCED) and aborts the transaction it left ONGOING; while markers are pending
  it answers CONCURRENT_TRANSACTIONS.
* [KIP-98] ``transaction.timeout.ms``: the coordinator aborts a transaction open longer; since KIP-360
  it bumps the epoch, so the producer's next call fails with INVALID_PRODUCER_EPOCH (abortable).
* [KIP-1289 seed §4.1] AddShareAcksToTxn adds a ``__share_group_state`` partition to the transaction:
  the coordinator does not tell it apart from any other partition; markers go there too.
* [KIP-98] a data partition's LSO is the first offset of its earliest open transaction;
  read_committed returns committed records below it.
"""

from __future__ import annotations

from typing import NamedTuple

ONGOING, PREPARE_COMMIT, PREPARE_ABORT = "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT"
COMPLETE_COMMIT, COMPLETE_ABORT, EMPTY = "COMPLETE_COMMIT", "COMPLETE_ABORT", "EMPTY"
PRODUCER_FENCED, INVALID_PRODUCER_EPOCH = "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"
CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE = "CONCURRENT_TRANSACTIONS", "COORDINATOR_NOT_AVAILABLE"


class Txn(NamedTuple):
    """The coordinator's entry for one ``transactional.id``: producer id and epoch, transaction state,
    the partitions in the transaction, the instance that last called InitProducerId (``owner``), the
    transaction's number (1, 2, ...), when it began (virtual ms), and the partitions whose marker is
    written (``marked``: in memory, never logged)."""

    tid: str
    pid: int
    epoch: int = 0
    state: str = EMPTY
    partitions: frozenset = frozenset()
    owner: str = ""
    number: int = 0
    began_ms: int = 0
    marked: frozenset = frozenset()


class TxnCoordinator:
    """Transaction coordinator: :attr:`txns` in memory, rebuilt by :meth:`recover` from
    ``__transaction_state`` (:attr:`log`, every entry; :attr:`persisted`, the last entry of each
    ``transactional.id``, what compaction keeps).

    Every method that a client request reaches returns an error name or None; :meth:`check` says
    which error a request from ``(owner, epoch)`` gets.
    """

    def __init__(self) -> None:
        self.txns: dict[str, Txn] = {}
        self.persisted: dict[str, Txn] = {}
        self.log: list[Txn] = []
        self.down = False

    def clone(self) -> "TxnCoordinator":
        c = object.__new__(TxnCoordinator)
        c.txns, c.persisted, c.log, c.down = dict(self.txns), dict(self.persisted), list(self.log), self.down
        return c

    def key(self) -> tuple:
        return self.down, tuple((t.tid, t.epoch, t.state, tuple(sorted(t.partitions)), t.owner, tuple(sorted(t.marked)))
                                for t in sorted(self.txns.values(), key=lambda t: t.tid))

    def _write(self, txn: Txn) -> Txn:
        self.txns[txn.tid] = self.persisted[txn.tid] = txn
        self.log.append(txn)
        return txn

    def decision(self, pid: int) -> str | None:
        """PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT... as ``__transaction_state`` last says for
        producer ``pid`` (also while the coordinator is down), or None for an unknown ``pid``."""
        return next((t.state for t in self.persisted.values() if t.pid == pid), None)

    def init_producer_id(self, tid: str, owner: str) -> tuple[str | None, Txn | None]:
        """InitProducerId from instance ``owner``: bumps the epoch, makes ``owner`` the one that may
        use it, aborts an ONGOING transaction (PREPARE_ABORT: markers to send). Returns ``(error, txn)``:
        COORDINATOR_NOT_AVAILABLE while down, CONCURRENT_TRANSACTIONS while markers are pending."""
        if self.down:
            return COORDINATOR_NOT_AVAILABLE, None
        t = self.txns.get(tid) or Txn(tid, pid=1000 + len(self.txns))
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS, None
        return None, self._write(t._replace(epoch=t.epoch + 1, owner=owner,
                                         state=PREPARE_ABORT if t.state == ONGOING else t.state))

    def check(self, tid: str, owner: str, epoch: int) -> str | None:
        """The error a transactional request of ``owner`` at ``epoch`` gets, or None."""
        if self.down:
            return COORDINATOR_NOT_AVAILABLE
        t = self.txns[tid]
        if t.owner != owner:
            return PRODUCER_FENCED
        if t.epoch != epoch or t.state in (PREPARE_ABORT, PREPARE_COMMIT):
            return INVALID_PRODUCER_EPOCH if t.epoch != epoch else CONCURRENT_TRANSACTIONS
        return None

    def add(self, tid: str, partition: str, now_ms: int) -> Txn:
        """AddPartitionsToTxn / AddShareAcksToTxn (after :meth:`check`): begins the transaction if
        none is ONGOING, and adds ``partition`` to it."""
        t = self.txns[tid]
        if t.state != ONGOING:
            t = t._replace(state=ONGOING, partitions=frozenset(), number=t.number + 1, began_ms=now_ms)
        return self._write(t._replace(partitions=t.partitions | {partition}))

    def end(self, tid: str, commit: bool) -> Txn:
        """EndTxn (after :meth:`check`): PREPARE_COMMIT or PREPARE_ABORT is written; markers are pending."""
        return self._write(self.txns[tid]._replace(state=PREPARE_COMMIT if commit else PREPARE_ABORT))

    def time_out(self, tid: str) -> Txn:
        """``transaction.timeout.ms`` passed: abort with an epoch bump (KIP-360)."""
        t = self.txns[tid]
        return self._write(t._replace(state=PREPARE_ABORT, epoch=t.epoch + 1))

    def mark(self, tid: str, partition: str) -> Txn:
        """WriteTxnMarkers reached ``partition`` (one of the transaction's): remembered in memory; once
        every partition has its marker, COMPLETE_COMMIT / COMPLETE_ABORT is written.

        Raises:
            ValueError: ``partition`` is not in the transaction, or its markers are not pending.
        """
        t = self.txns[tid]
        if t.state not in (PREPARE_COMMIT, PREPARE_ABORT) or partition not in t.partitions:
            raise ValueError(f"no marker of {tid} is pending for {partition} ({t.state}, {sorted(t.partitions)})")
        t = self.txns[tid] = Txn(*t[:-1], t.marked | {partition})  # marked is the last field
        return self.markers_written(tid) if t.marked == t.partitions else t

    def markers_written(self, tid: str) -> Txn:
        """Every partition got its marker: COMPLETE_COMMIT / COMPLETE_ABORT is written."""
        t = self.txns[tid]
        return self._write(Txn(t.tid, t.pid, t.epoch, COMPLETE_COMMIT if t.state == PREPARE_COMMIT else COMPLETE_ABORT,
                               frozenset(), t.owner, t.number, t.began_ms, frozenset()))

    def pending_markers(self) -> list[Txn]:
        """Transactions in PREPARE_*, whose markers are still to be written (none while down)."""
        return [] if self.down else [t for t in self.txns.values() if t.state in (PREPARE_COMMIT, PREPARE_ABORT)]

    def crash(self) -> None:
        """The coordinator's broker dies: its memory is gone, requests fail until :meth:`recover`."""
        self.down, self.txns = True, {}

    def recover(self) -> None:
        """A new coordinator loads ``__transaction_state``: the last entry of each transactional.id. A
        transaction in PREPARE_* has its markers sent again to every partition (:meth:`pending_markers`):
        which partitions had them was never logged."""
        self.down = False
        self.txns = dict(self.persisted)


class DataRecord(NamedTuple):
    """A record in a data partition: the input record it was made from (any hashable name), its writer's producer id and
    the outcome of its transaction ("open", "committed", "aborted")."""

    source: int
    pid: int
    outcome: str = "open"


class DataPartition:
    """An output partition written transactionally: :meth:`lso`, :meth:`read_committed`."""

    def __init__(self, name: str = "output-0") -> None:
        self.name, self.records = name, []

    def clone(self) -> "DataPartition":
        c = object.__new__(DataPartition)
        c.name, c.records = self.name, list(self.records)
        return c

    def key(self) -> tuple:
        """The records that still matter (aborted ones are never read), as a sorted tuple."""
        return tuple(sorted((r.source, r.pid, r.outcome) for r in self.records if r.outcome != "aborted"))

    def append(self, source: int, pid: int) -> int:
        """Write one record in producer ``pid``'s open transaction; returns its offset."""
        self.records.append(DataRecord(source, pid))
        return len(self.records) - 1

    def marker(self, pid: int, commit: bool) -> list[int]:
        """The COMMIT/ABORT control record for ``pid``'s open records; returns their sources."""
        done = [i for i, r in enumerate(self.records) if r.pid == pid and r.outcome == "open"]
        outcome = "committed" if commit else "aborted"
        for i in done:
            self.records[i] = DataRecord(self.records[i].source, pid, outcome)
        return [self.records[i].source for i in done]

    def lso(self) -> int:
        """Last stable offset: the first offset of the earliest open transaction (the high watermark
        when none is open)."""
        return next((i for i, r in enumerate(self.records) if r.outcome == "open"), len(self.records))

    def read_committed(self) -> list[int]:
        """The sources of the records a read_committed consumer returns, in offset order."""
        return [r.source for r in self.records[:self.lso()] if r.outcome == "committed"]
