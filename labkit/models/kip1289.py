"""MODELLED, KIP-1289 (KAFKA-19883), not in any Kafka release: transactional share acknowledgements.

A deterministic world, no threads, a virtual clock: share consumers that are also transactional
producers run the seed's consume-transform-produce loop (§2.1: poll, ``send(output)``,
``send_share_acks_to_transaction``, ``commit_transaction``) against a
:class:`~labkit.models.share_partition.SharePartition` (input), a
:class:`~labkit.models.txn_coordinator.TxnCoordinator` and an output
:class:`~labkit.models.txn_coordinator.DataPartition`; faults are steps like any other. Each step
writes the history events a real run writes (:mod:`labkit.history`), so notebook 06's
share timeline and checker work on it unchanged. Sources of the rules: the modules above, and

* [KIP-1289 seed §2.1, §4.1-4.2] ``send_share_acks_to_transaction`` = AddShareAcksToTxn (the
  ``__share_group_state`` partition joins the transaction) + TxnShareAcknowledge (pending acks);
  the KIP page now names the Java method ``sendShareAcknowledgementsToTransaction``.
* [seed §6] crash before commit: the coordinator aborts (here on the restart's InitProducerId or at
  ``transaction.timeout.ms``); zombie: fenced by the new instance's epoch; coordinator crash after
  PREPARE_COMMIT: recovery sends the markers again.
* [our choice] a consumer whose TxnShareAcknowledge fails (it no longer holds a record) aborts;
  after an abort it RELEASEs what it still holds and polls again; a crashed consumer's share
  session closes at once (what Kafka 4.4 does on SIGKILL, seen in notebook 06).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from labkit.broker.settings import SHARE_LOCK_MS
from labkit.history import Event
from labkit.models.share_partition import ACQUIRED, PENDING, TERMINAL, SharePartition
from labkit.models.txn_coordinator import (ONGOING, PREPARE_ABORT, PREPARE_COMMIT, PRODUCER_FENCED, DataPartition,
                                           TxnCoordinator)

#: Faults and how many of each a world allows by default (one of each kind).
FAULTS = {"crash": 1, "zombie": 1, "timeout": 1, "tc_crash": 1, "sc_crash": 1, "lock_expiry": 1}
PREPARING = (PREPARE_COMMIT, PREPARE_ABORT)
INPUT, OUTPUT, STATE_PARTITION = "input", "output", "__share_group_state-0"


@dataclass(frozen=True)
class Client:
    """One instance of a consumer-producer: its participant ``name``, ``transactional.id``, the producer
    epoch it holds, whether it runs (``alive``), where it is in its loop (``pc``: idle, holding,
    produced, acked) and the offsets it ``held`` since its poll."""

    name: str
    tid: str
    epoch: int = 0
    alive: bool = True
    pc: str = "idle"
    held: tuple = ()


class World:
    """The modelled system; :meth:`actions` lists what may happen next, :meth:`step` does one.

    Args:
        records: input records (offsets 0..records-1), written before the run.
        consumers: consumer-producers ``c1``, ``c2``... with ``transactional.id`` ``tx-c1``...
        batch: records a poll acquires at most (``max.poll.records``).
        limit, lock_while_pending, count_on_abort, release_in_txn: the share partition's (see
            :class:`~labkit.models.share_partition.SharePartition`).
        decisions: input offset to the acknowledgement type the application chooses (default ACCEPT);
            it writes an output record for every record it does not REJECT.
        faults: fault name to how many may happen (:data:`FAULTS`).
        max_faults: how many faults may happen in all (None: as many as ``faults`` allows).
        aborts: how many times the consumers may choose to call ``abort_transaction`` (None: no limit;
            aborts forced by an error are not counted).
        lock_ms, txn_timeout_ms: ``group.share.record.lock.duration.ms`` and ``transaction.timeout.ms``:
            a lock expiry or a timeout moves the clock to when it would happen.
        step_ms: virtual ms a step takes.
        history: record events (False for the explorer: faster).
    """

    def __init__(self, records: int = 3, consumers: int = 2, *, batch: int = 1, limit: int = 3,
                 lock_while_pending: str = "freeze", count_on_abort: str = "keep", release_in_txn: bool = False,
                 decisions: dict[int, str] | None = None, faults: dict[str, int] | None = None,
                 max_faults: int | None = None, aborts: int | None = None, lock_ms: int = SHARE_LOCK_MS, txn_timeout_ms: int = 10000, step_ms: int = 200,
                 history: bool = True) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; the faults are {', '.join(FAULTS)}")
        self.sp = SharePartition(records, limit, lock_while_pending, count_on_abort, release_in_txn)
        self.tc, self.out = TxnCoordinator(), DataPartition()
        self.batch, self.decisions = batch, dict(decisions or {})
        self.budget = dict(FAULTS if faults is None else faults)
        self.budget["any"] = sum(self.budget.values()) if max_faults is None else max_faults
        self.budget["abort"] = -1 if aborts is None else aborts
        self.lock_ms, self.txn_timeout_ms, self.step_ms = lock_ms, txn_timeout_ms, step_ms
        self.clock_ms, self.acquired_ms = 0, {}
        self.events: list[Event] | None = [] if history else None
        self.clients: dict[str, Client] = {}
        for o in range(records):
            self._emit("ack", "source", topic=INPUT, partition=0, offset=o, value_id=self.value_id(o))
        self._emit("share_offsets", "broker", topic=INPUT, partition=0, offset=0)
        for i in range(1, consumers + 1):
            self._init(Client(f"c{i}", f"tx-c{i}"))

    # -- the state ---------------------------------------------------------------------------------
    def clone(self) -> "World":
        w = object.__new__(World)
        w.__dict__.update(self.__dict__)
        w.sp, w.tc, w.out = self.sp.clone(), self.tc.clone(), self.out.clone()
        w.budget, w.clients, w.acquired_ms = dict(self.budget), dict(self.clients), dict(self.acquired_ms)
        w.events = None if self.events is None else list(self.events)
        return w

    def key(self) -> tuple:
        """The canonical state (no clock, no history): equal keys behave the same from here on."""
        return (self.sp.key(), self.tc.key(), self.out.key(), tuple(sorted(self.clients.values(), key=lambda c: c.name)),
                tuple(sorted(self.budget.items())))

    @staticmethod
    def value_id(offset: int) -> str:
        return f"source-{offset + 1}"

    def _emit(self, kind: str, participant: str, **fields: object) -> None:
        if self.events is not None:
            self.events.append(Event(kind, participant, mono_ns=self.clock_ms * 1_000_000,
                                     wall_ms=self.clock_ms, **fields))

    # -- what may happen ---------------------------------------------------------------------------
    def actions(self, faults: bool = True) -> list[tuple]:
        """Enabled steps, as tuples: ``("poll", name)``, ``("produce", name)``, ``("send_acks", name)``,
        ``("commit", name)``, ``("abort", name)``, ``("markers", tid)``, ``("restart", name)``,
        ``("tc_recover",)``, and with ``faults``: ``("crash", name)``, ``("zombie", name)``,
        ``("timeout", tid)``, ``("tc_crash",)``, ``("sc_crash",)``, ``("lock_expiry", offset)``."""
        out, tc = [], self.tc
        for c in sorted(self.clients.values(), key=lambda c: c.name):
            if not c.alive:
                if c.pc == "crashed" and c.name == self._current(c.tid) and not self._waiting(c):
                    out.append(("restart", c.name))
                continue
            if c.pc == "idle" and any(r.state == "AVAILABLE" for r in self.sp.offsets):
                out.append(("poll", c.name))
            if self._waiting(c):  # the coordinator would answer COORDINATOR_NOT_AVAILABLE / CONCURRENT_TRANSACTIONS
                continue
            nxt = {"holding": "produce", "produced": "send_acks", "acked": "commit"}.get(c.pc)
            if nxt:
                out.append((nxt, c.name))
            if c.pc in ("produced", "acked") and self.budget["abort"]:
                out.append(("abort", c.name))
        out += [("markers", t.tid) for t in sorted(tc.pending_markers(), key=lambda t: t.tid)]
        if tc.down:
            out.append(("tc_recover",))
        b = self.budget
        if not faults or not b["any"]:
            return out
        for c in sorted(self.clients.values(), key=lambda c: c.name):
            if c.alive and b.get("crash"):
                out.append(("crash", c.name))
            if c.alive and b.get("zombie") and c.name == self._current(c.tid) and not self._waiting(c):
                out.append(("zombie", c.name))
        if b.get("timeout") and not tc.down:
            out += [("timeout", t.tid) for t in sorted(tc.txns.values(), key=lambda t: t.tid) if t.state == ONGOING]
        if b.get("tc_crash") and any(t.state == "PREPARE_COMMIT" for t in tc.pending_markers()):
            out.append(("tc_crash",))
        if b.get("sc_crash"):
            out.append(("sc_crash",))
        if b.get("lock_expiry"):
            expirable = (ACQUIRED,) if self.sp.lock_while_pending == "freeze" or tc.down else (ACQUIRED, PENDING)
            out += [("lock_expiry", o) for o, r in enumerate(self.sp.offsets) if r.state in expirable]
        return out

    def _waiting(self, c: Client) -> bool:
        """Whether ``c`` (the instance owning its transactional.id) must wait: the coordinator is down,
        or its last transaction's markers are not written yet. Client libraries retry these."""
        return self.tc.down or (c.name == self._current(c.tid) and self.tc.txns[c.tid].state in PREPARING)

    def _current(self, tid: str) -> str:
        """The name of the instance that owns ``tid`` now."""
        return self.tc.txns[tid].owner if tid in self.tc.txns else ""

    # -- doing it ------------------------------------------------------------------------------------
    def step(self, action: tuple) -> str:
        """Do one enabled step; returns what happened, in words.

        Raises:
            ValueError: ``action`` is not enabled now (the message lists what is).
        """
        if action not in self.actions():
            raise ValueError(f"{action} is not possible now; possible: {self.actions()}")
        self.clock_ms += self.step_ms
        if action[0] in FAULTS:
            self.budget[action[0]] -= 1
            self.budget["any"] -= 1
        before, spso = list(self.sp.offsets), self.sp.spso
        said = getattr(self, f"_{action[0]}")(*action[1:])
        for o, (old, new) in enumerate(zip(before, self.sp.offsets)):
            if new.state != old.state and new.state != ACQUIRED:  # ACQUIRED is never persisted
                self._emit("share_state", "broker", topic=INPUT, partition=0, offset=o, last_offset=o,
                           state=new.state, delivery_count=new.count)
        if self.sp.spso != spso:
            self._emit("share_offsets", "broker", topic=INPUT, partition=0, offset=self.sp.spso)
        return said

    def _set(self, c: Client, **changes: object) -> Client:
        self.clients[c.name] = replace(c, **changes)
        return self.clients[c.name]

    def _init(self, c: Client) -> str:
        error, txn = self.tc.init_producer_id(c.tid, c.name)
        self._set(c, epoch=txn.epoch, alive=True, pc="idle", held=())
        self._emit("start", c.name, transactional_id=c.tid, producer_id=txn.pid, producer_epoch=txn.epoch)
        return f"{c.name} InitProducerId: {c.tid} epoch {txn.epoch}" + (
            "; its open transaction is aborted" if txn.state == "PREPARE_ABORT" else "")

    def _refused(self, c: Client) -> str | None:
        """The coordinator's answer to ``c``'s transactional request; a fenced instance exits (its share
        session closes), a timed-out one aborts (the coordinator did) and gives its records back."""
        error = self.tc.check(c.tid, c.name, c.epoch)
        if error == PRODUCER_FENCED:
            self._set(c, alive=False, pc="fenced", held=())
            self._emit("fenced", c.name, error=error, transactional_id=c.tid)
            self.sp.member_left(c.name)
        elif error:
            self._give_up(self._set(c, epoch=self.tc.txns[c.tid].epoch))
        return error

    def _give_up(self, c: Client) -> None:
        for o in c.held:
            self.sp.acknowledge(c.name, o, "RELEASE")  # fails harmlessly for records it no longer holds
        self._set(c, pc="idle", held=())

    def _poll(self, name: str) -> str:
        c = self.clients[name]
        got = self.sp.acquire(name, self.batch)
        for o in got:
            self.acquired_ms[o] = self.clock_ms
            self._emit("delivered", name, topic=INPUT, partition=0, offset=o, value_id=self.value_id(o),
                       delivery_count=self.sp.offsets[o].count)
        self._set(c, pc="holding", held=tuple(got))
        return f"{name} polled offsets {list(got)}"

    def _produce(self, name: str) -> str:
        c = self.clients[name]
        if error := self._refused(c):
            return f"{name} send(output): {error}"
        txn = self.tc.add(c.tid, self.out.name, self.clock_ms)
        if txn.began_ms == self.clock_ms and len(txn.partitions) == 1:
            self._emit("txn_begin", name, txn=txn.number, transactional_id=c.tid, producer_id=txn.pid,
                       producer_epoch=txn.epoch)
        outputs = [o for o in c.held if self.decisions.get(o, "ACCEPT") != "REJECT"]
        for o in outputs:
            at = self.out.append(o, txn.pid)
            self._emit("send", name, topic=OUTPUT, partition=0, offset=at, value_id=f"{self.value_id(o)}>out",
                       txn=txn.number, producer_id=txn.pid, producer_epoch=txn.epoch)
        self._set(c, pc="produced")
        return f"{name} send(output) for offsets {outputs} in transaction {txn.number}"

    def _send_acks(self, name: str) -> str:
        c = self.clients[name]
        if error := self._refused(c):
            return f"{name} send_share_acks_to_transaction: {error}"
        txn = self.tc.add(c.tid, STATE_PARTITION, self.clock_ms)
        errors = {}
        for o in c.held:
            ack_type = self.decisions.get(o, "ACCEPT")
            errors[o] = self.sp.acknowledge_in_txn(name, o, ack_type, txn.pid)
            self._emit("acknowledged", name, topic=INPUT, partition=0, offset=o, value_id=self.value_id(o),
                       ack_type=ack_type, txn=txn.number, error=errors[o])
        failed = {o: e for o, e in errors.items() if e}
        if failed:
            self.tc.end(c.tid, commit=False)
            self._give_up(c)
            return f"{name} TxnShareAcknowledge refused {failed}: it aborts"
        self._set(c, pc="acked")
        return f"{name} send_share_acks_to_transaction: offsets {list(c.held)} pending in transaction {txn.number}"

    def _commit(self, name: str) -> str:
        return self._end(name, commit=True)

    def _abort(self, name: str) -> str:
        self.budget["abort"] -= 1
        return self._end(name, commit=False)

    def _end(self, name: str, commit: bool) -> str:
        c = self.clients[name]
        call = "commit_transaction" if commit else "abort_transaction"
        if error := self._refused(c):
            return f"{name} {call}: {error}"
        txn = self.tc.end(c.tid, commit)
        self._emit("txn_commit_start" if commit else "txn_end", name, txn=txn.number, transactional_id=c.tid,
                   **({} if commit else {"outcome": "aborted"}))
        if commit:
            self._set(c, pc="idle", held=())
        else:
            self._give_up(c)
        return f"{name} {call}: {txn.state} written"

    def _markers(self, tid: str) -> str:
        t = self.tc.txns[tid]
        commit = t.state == "PREPARE_COMMIT"
        written = self.out.marker(t.pid, commit) if self.out.name in t.partitions else []
        holders = {o: r.holder for o, r in enumerate(self.sp.offsets)}
        acks = self.sp.complete(t.pid, commit) if STATE_PARTITION in t.partitions else {}
        self.tc.markers_written(tid)
        owner = t.owner
        for o, ack_type in sorted(acks.items()):
            self._emit("ack_committed", holders[o] or owner, topic=INPUT, partition=0, offset=o, value_id=self.value_id(o),
                       ack_type=ack_type, error=None if commit else "TRANSACTION_ABORTED", txn=t.number)
        for o in written if commit else []:
            self._emit("effect", owner, topic=INPUT, partition=0, offset=o, value_id=self.value_id(o), txn=t.number)
        if commit:
            self._emit("txn_end", owner, txn=t.number, outcome="committed", transactional_id=tid)
        return (f"WriteTxnMarkers {'COMMIT' if commit else 'ABORT'} for {tid}: {self.out.name} "
                f"({len(written)} records), {STATE_PARTITION} ({len(acks)} acknowledgements)")

    def _restart(self, name: str) -> str:
        return self._init(self.clients[name])

    def _tc_recover(self) -> str:
        self.tc.recover()
        return "transaction coordinator recovered from __transaction_state"

    def _crash(self, name: str) -> str:
        c = self._set(self.clients[name], alive=False, pc="crashed", held=())
        self._emit("crash", name)
        released = self.sp.member_left(c.name)
        return f"{name} crashed (SIGKILL): offsets {released} released, its transaction stays open"

    def _zombie(self, name: str) -> str:
        c = self.clients[name]
        self._emit("pause", name)
        new = f"{name.split('.')[0]}.{sum(x.tid == c.tid for x in self.clients.values()) + 1}"
        return f"{name} paused (a zombie from now on); " + self._init(Client(new, c.tid))

    def _timeout(self, tid: str) -> str:
        t = self.tc.txns[tid]
        self.clock_ms = max(self.clock_ms, t.began_ms + self.txn_timeout_ms)
        self.tc.time_out(tid)
        self._emit("txn_end", t.owner, txn=t.number, outcome="aborted", step="transaction.timeout.ms")
        return f"{tid}'s transaction {t.number} timed out: PREPARE_ABORT, epoch {t.epoch + 1}"

    def _tc_crash(self) -> str:
        self.tc.crash()
        return "transaction coordinator crashed (its markers not sent)"

    def _sc_crash(self) -> str:
        self.sp.reload()
        return "share coordinator crashed and reloaded __share_group_state (acquisitions lost)"

    def _lock_expiry(self, offset: int) -> str:
        r = self.sp.offsets[offset]
        self.clock_ms = max(self.clock_ms, self.acquired_ms.get(offset, 0) + self.lock_ms)
        if r.state == PENDING and self.sp.lock_while_pending == "abort":
            t = next(t for t in self.tc.txns.values() if t.pid == r.pid)
            if t.state != ONGOING:
                return f"offset {offset}'s lock expired while pending, but {t.tid} is already {t.state}"
            self.tc.time_out(t.tid)
            self._emit("txn_end", t.owner, txn=t.number, outcome="aborted", step="lock expiry")
            return f"offset {offset}'s lock expired while pending: {t.tid}'s transaction is aborted"
        self.sp.release(offset)
        return f"offset {offset}'s acquisition lock expired: {self.sp.offsets[offset].state}"

    def observe(self) -> None:
        """The observer's last sample, one step later: the SPSO now (so a timeline shows the final states
        for a moment, as the real runs' observer does)."""
        self.clock_ms += self.step_ms
        self._emit("share_offsets", "broker", topic=INPUT, partition=0, offset=self.sp.spso)

    # -- what it means -------------------------------------------------------------------------------
    def violations(self, final: bool = False) -> list[str]:
        """Exactly-once and KIP-932 invariants broken in this state: an input with more than one
        committed output; a committed output whose record is not ACKNOWLEDGED, or an ACKNOWLEDGED record
        without one; a delivery count above the limit; with ``final``, a record not ACKNOWLEDGED/ARCHIVED."""
        committed = [r.source for r in self.out.records if r.outcome == "committed"]
        found = []
        for o, r in enumerate(self.sp.offsets):
            n = committed.count(o)
            if n > 1:
                found.append(f"duplicate: offset {o}'s output committed {n} times")
            if n and r.state != "ACKNOWLEDGED":
                found.append(f"offset {o}'s output is committed but the record is {r.state}")
            if not n and r.state == "ACKNOWLEDGED":
                found.append(f"loss: offset {o} is ACKNOWLEDGED with no committed output")
            if r.count > self.sp.limit:
                found.append(f"offset {o} delivered {r.count} times, over the limit {self.sp.limit}")
            if final and r.state not in TERMINAL:
                found.append(f"offset {o} ended {r.state}")
        return found
