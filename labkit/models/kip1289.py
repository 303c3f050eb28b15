"""MODELLED, KIP-1289 (KAFKA-19883), not in any Kafka release: transactional share acknowledgements.

A deterministic world, no threads, a virtual clock: share consumers that are also transactional
producers run the seed's consume-transform-produce loop (§2.1: poll, ``send(output)``,
``send_share_acks_to_transaction``, ``commit_transaction``) against N input share partitions
(:class:`~labkit.models.share_partition.SharePartition`, of one or more topics), each with its state on
a ``__share_group_state`` partition (a share coordinator per state partition), a
:class:`~labkit.models.txn_coordinator.TxnCoordinator` and an output
:class:`~labkit.models.txn_coordinator.DataPartition`; faults are steps like any other. Each step
writes the history events a real run writes (:mod:`labkit.core.history`), so notebook 06's
share timeline and checker work on it unchanged. Sources of the rules: the modules above, and

* [KIP-1289 seed §2.1, §4.1-4.2] ``send_share_acks_to_transaction`` = AddShareAcksToTxn (the
  ``__share_group_state`` partition of each acknowledged share partition joins the transaction, as
  ``ShareCoordinator.partitionFor(groupId, topicPartition)`` maps it) + TxnShareAcknowledge (pending
  acks); the KIP page now names the Java method ``sendShareAcknowledgementsToTransaction`` and takes a
  ``Map<TopicIdPartition, List<AcknowledgementBatch>>``: several share partitions in one call.
* [seed §4.1] WriteTxnMarkers go to every partition of the transaction; the coordinator tells a
  ``__share_group_state`` partition from no other. [KIP-98] each partition gets its marker on its own
  (a step per partition here), so a coordinator crash can fall between two of them.
* [seed §6] crash before commit: the coordinator aborts (here on the restart's InitProducerId or at
  ``transaction.timeout.ms``); zombie: fenced by the new instance's epoch; coordinator crash after
  PREPARE_COMMIT: recovery sends the markers again.
* [our choice] a poll acquires up to ``batch`` records of *each* share partition (each share-partition
  leader answers the ShareFetch for its own); a consumer whose TxnShareAcknowledge fails (it no longer
  holds a record) aborts; after an abort it RELEASEs what it still holds and polls again; a crashed
  consumer's share session closes at once, its records released with their delivery counted (a process killed
  on a live host: the broker sees the connection close, notebook 06; after a host or network failure they would
  wait for the lock: the ``lock_expiry`` fault); a share coordinator crash takes the share-partition leaders
  whose state it keeps with it (one step).
"""

from __future__ import annotations

from typing import NamedTuple

from labkit.broker.settings import SHARE_LOCK_MS
from labkit.core.history import Event
from labkit.learn import marks
from labkit.models import invariants
from labkit.models.coordinators import CoordinatorSteps
from labkit.models.share_partition import ACQUIRED, AVAILABLE, PENDING, SharePartition
from labkit.models.txn_coordinator import (ONGOING, PREPARE_ABORT, PREPARE_COMMIT, PRODUCER_FENCED, DataPartition,
                                           TxnCoordinator)

#: Faults and how many of each a world allows by default (one of each kind).
FAULTS = {"crash": 1, "zombie": 1, "timeout": 1, "tc_crash": 1, "sc_crash": 1, "lock_expiry": 1}
PREPARING = (PREPARE_COMMIT, PREPARE_ABORT)
INPUT, OUTPUT, STATE_TOPIC = "input", "output", "__share_group_state"
NEXT = {"holding": "produce", "produced": "send_acks", "acked": "commit"}


class Client(NamedTuple):
    """One instance of a consumer-producer: its participant ``name``, ``transactional.id``, the producer
    epoch it holds, whether it runs (``alive``), where it is in its loop (``pc``: idle, holding,
    produced, acked) and the records it ``held`` since its poll, as ``(share partition index, offset)``."""

    name: str
    tid: str
    epoch: int = 0
    alive: bool = True
    pc: str = "idle"
    held: tuple = ()


class World(CoordinatorSteps):
    """The modelled system; :meth:`actions` lists what may happen next, :meth:`step` does one (the
    clients' steps here, the coordinators' and brokers' in :class:`~labkit.models.coordinators.CoordinatorSteps`).

    Args:
        records: input records of each share partition (offsets 0..records-1), written before the run.
        consumers: consumer-producers ``c1``, ``c2``... with ``transactional.id`` ``tx-c1``...
        partitions: the input share partitions: a number N (``input-0``..``input-N-1``) or their names
            (``"orders-0"``: topic ``orders``, partition 0).
        state_partitions: the ``__share_group_state`` partition number of each share partition (default:
            each its own; equal numbers share a share coordinator).
        batch: records a poll acquires at most from each share partition (``max.poll.records``).
        limit, lock_while_pending, count_on_abort, release_in_txn: the share partitions' (see
            :class:`~labkit.models.share_partition.SharePartition`).
        decisions: ``(share partition index, offset)`` (or an offset of the first share partition) to the
            acknowledgement type the application chooses (default ACCEPT); it writes an output record for
            every record it does not REJECT.
        faults: fault name to how many may happen (:data:`FAULTS`).
        max_faults: how many faults may happen in all (None: as many as ``faults`` allows).
        aborts: how many times the consumers may choose to call ``abort_transaction`` (None: no limit;
            aborts forced by an error are not counted).
        lock_ms, txn_timeout_ms: ``group.share.record.lock.duration.ms`` and ``transaction.timeout.ms``:
            a lock expiry or a timeout moves the clock to when it would happen.
        step_ms: virtual ms a step takes.
        history: record events (False for the explorer: faster); a world with its history is a run of the model,
            as a notebook shows one, and publishes ``("experiment", "started")`` (:mod:`labkit.learn.marks`).
    Raises:
        ValueError: an unknown fault, or ``state_partitions`` not one per share partition.
    """

    def __init__(self, records: int = 3, consumers: int = 2, *, partitions: int | tuple = 1,
                 state_partitions: tuple | None = None, batch: int = 1, limit: int = 3,
                 lock_while_pending: str = "freeze", count_on_abort: str = "keep", release_in_txn: bool = False,
                 decisions: dict | None = None, faults: dict[str, int] | None = None,
                 max_faults: int | None = None, aborts: int | None = None, lock_ms: int = SHARE_LOCK_MS,
                 txn_timeout_ms: int = 10000, step_ms: int = 200, history: bool = True) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; the faults are {', '.join(FAULTS)}")
        names = [f"{INPUT}-{p}" for p in range(partitions)] if isinstance(partitions, int) else list(partitions)
        self.inputs = [(n.rsplit("-", 1)[0], int(n.rsplit("-", 1)[1])) for n in names]
        self.names = names
        self.state_of = list(range(len(names)) if state_partitions is None else state_partitions)
        if len(self.state_of) != len(names):
            raise ValueError(f"state_partitions gives {len(self.state_of)} partitions for {len(names)} share partitions")
        self.state_names = [f"{STATE_TOPIC}-{k}" for k in self.state_of]
        # each __share_group_state partition: the share partitions whose state it keeps
        self.hosted = {s: [i for i, t in enumerate(self.state_names) if t == s] for s in self.state_names}
        self.sps = [SharePartition(records, limit, lock_while_pending, count_on_abort, release_in_txn) for _ in names]
        self.tc, self.out = TxnCoordinator(), DataPartition()
        self.batch = batch
        self.decisions = {(k if isinstance(k, tuple) else (0, k)): v for k, v in (decisions or {}).items()}
        self.budget = dict(FAULTS if faults is None else faults)
        self.budget["any"] = sum(self.budget.values()) if max_faults is None else max_faults
        self.budget["abort"] = -1 if aborts is None else aborts
        self.lock_ms, self.txn_timeout_ms, self.step_ms = lock_ms, txn_timeout_ms, step_ms
        self.clock_ms, self.acquired_ms = 0, {}
        self.events: list[Event] | None = [] if history else None
        if history:  # a run of the model, as a notebook shows one: an experiment (labkit.learn.marks), not an exploration
            marks.publish(marks.EXPERIMENT, "started")
        self.clients: dict[str, Client] = {}
        for i, sp in enumerate(self.sps):
            for o in range(sp.records):
                self._emit("ack", "source", i, o, value_id=self.value_id(i, o))
            self._emit("share_offsets", "broker", i, 0)
        for n in range(1, consumers + 1):
            self._init(Client(f"c{n}", f"tx-c{n}"))

    # -- the state ---------------------------------------------------------------------------------
    @property
    def sp(self) -> SharePartition:
        """The first share partition (in a one-partition world, the only one)."""
        return self.sps[0]

    def clone(self) -> "World":
        w = object.__new__(World)
        w.__dict__.update(self.__dict__)
        w.sps, w.tc, w.out = [sp.clone() for sp in self.sps], self.tc.clone(), self.out.clone()
        w.budget, w.clients = dict(self.budget), dict(self.clients)
        if self.events is not None:  # without a history, acquired_ms stays empty (it only sets the clock)
            w.events, w.acquired_ms = list(self.events), dict(self.acquired_ms)
        return w

    def key(self) -> tuple:
        """The state under its own names (no clock, no history): equal keys behave the same from here on.
        :mod:`labkit.models.symmetry` gives the key under canonical names."""
        return (tuple(sp.key() for sp in self.sps), self.tc.key(), self.out.key(),
                tuple(sorted(self.clients.values(), key=lambda c: c.name)), tuple(sorted(self.budget.items())))

    def value_id(self, i: int, offset: int) -> str:
        """The id of share partition ``i``'s record at ``offset`` in the history (``input-0/1``...)."""
        return f"{self.names[i]}/{offset}"

    def label(self, record: tuple) -> str:
        """``(share partition index, offset)`` as people read it: ``input-0:1``."""
        return f"{self.names[record[0]]}:{record[1]}"

    def _emit(self, kind: str, participant: str, i: int | None = None, offset: int | None = None, **fields) -> None:
        if self.events is not None:
            where = {} if i is None else {"topic": self.inputs[i][0], "partition": self.inputs[i][1], "offset": offset}
            self.events.append(Event(kind, participant, mono_ns=self.clock_ms * 1_000_000, wall_ms=self.clock_ms,
                                     **where, **fields))

    # -- what may happen ---------------------------------------------------------------------------
    def actions(self, faults: bool = True) -> list[tuple]:
        """Enabled steps, as tuples: ``("poll", name)``, ``("produce", name)``, ``("send_acks", name)``,
        ``("commit", name)``, ``("abort", name)``, ``("markers", tid, partition)``, ``("restart", name)``,
        ``("tc_recover",)``, and with ``faults``: ``("crash", name)``, ``("zombie", name)``,
        ``("timeout", tid)``, ``("tc_crash",)``, ``("sc_crash", state partition)``,
        ``("lock_expiry", share partition, offset)``."""
        out, tc, b = [], self.tc, self.budget
        clients = sorted(self.clients.values(), key=lambda c: c.name)
        available = any(r.state == AVAILABLE for sp in self.sps for r in sp.offsets)
        for c in clients:
            waiting = self._waiting(c)
            if not c.alive:
                if c.pc == "crashed" and c.name == self._current(c.tid) and not waiting:
                    out.append(("restart", c.name))
                continue
            if c.pc == "idle" and available:
                out.append(("poll", c.name))
            if waiting:  # the coordinator would answer COORDINATOR_NOT_AVAILABLE / CONCURRENT_TRANSACTIONS
                continue
            if c.pc in NEXT:
                out.append((NEXT[c.pc], c.name))
            if c.pc in ("produced", "acked") and b["abort"]:
                out.append(("abort", c.name))
        for t in sorted(tc.pending_markers(), key=lambda t: t.tid):
            out += [("markers", t.tid, p) for p in sorted(t.partitions - t.marked)]
        if tc.down:
            out.append(("tc_recover",))
        if not faults or not b["any"]:
            return out
        for c in clients:
            if c.alive and b.get("crash"):
                out.append(("crash", c.name))
            if c.alive and b.get("zombie") and c.name == self._current(c.tid) and not self._waiting(c):
                out.append(("zombie", c.name))
        if b.get("timeout") and not tc.down:
            out += [("timeout", t.tid) for t in sorted(tc.txns.values(), key=lambda t: t.tid) if t.state == ONGOING]
        if b.get("tc_crash") and any(t.state == PREPARE_COMMIT for t in tc.pending_markers()):
            out.append(("tc_crash",))
        if b.get("sc_crash"):
            out += [("sc_crash", s) for s in sorted(set(self.state_names))]
        if b.get("lock_expiry"):
            expirable = (ACQUIRED,) if self.sp.lock_while_pending == "freeze" or tc.down else (ACQUIRED, PENDING)
            out += [("lock_expiry", self.names[i], o) for i, sp in enumerate(self.sps)
                    for o, r in enumerate(sp.offsets) if r.state in expirable]
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
        if tuple(action) not in self.actions():
            raise ValueError(f"{action} is not possible now; possible: {self.actions()}")
        return self.apply(tuple(action))

    def apply(self, action: tuple) -> str:
        """:meth:`step` without checking that ``action`` is enabled: for a caller that took it from
        :meth:`actions` of this very state (the explorer)."""
        self.clock_ms += self.step_ms
        if action[0] in FAULTS:
            self.budget[action[0]] -= 1
            self.budget["any"] -= 1
        if self.events is None:
            return getattr(self, f"_{action[0]}")(*action[1:])
        before = [(list(sp.offsets), sp.spso) for sp in self.sps]
        said = getattr(self, f"_{action[0]}")(*action[1:])
        for i, (sp, (offsets, spso)) in enumerate(zip(self.sps, before)):
            for o, (old, new) in enumerate(zip(offsets, sp.offsets)):
                if new.state != old.state and new.state != ACQUIRED:  # ACQUIRED is never persisted
                    self._emit("share_state", "broker", i, o, last_offset=o, state=new.state, delivery_count=new.count)
            if sp.spso != spso:
                self._emit("share_offsets", "broker", i, sp.spso)
        return said

    def _set(self, c: Client, **changes: object) -> Client:
        self.clients[c.name] = c._replace(**changes)
        return self.clients[c.name]

    def _init(self, c: Client) -> str:
        error, txn = self.tc.init_producer_id(c.tid, c.name)
        self._set(c, epoch=txn.epoch, alive=True, pc="idle", held=())
        self._emit("start", c.name, transactional_id=c.tid, producer_id=txn.pid, producer_epoch=txn.epoch)
        return f"{c.name} InitProducerId: {c.tid} epoch {txn.epoch}" + (
            "; its open transaction is aborted" if txn.state == PREPARE_ABORT else "")

    def _refused(self, c: Client) -> str | None:
        """The coordinator's answer to ``c``'s transactional request; a fenced instance exits (its share
        session closes), a timed-out one aborts (the coordinator did) and gives its records back."""
        error = self.tc.check(c.tid, c.name, c.epoch)
        if error == PRODUCER_FENCED:
            self._set(c, alive=False, pc="fenced", held=())
            self._emit("fenced", c.name, error=error, transactional_id=c.tid)
            self._left(c.name)
        elif error:
            self._give_up(self._set(c, epoch=self.tc.txns[c.tid].epoch))
        return error

    def _left(self, name: str) -> list[str]:
        return [self.label((i, o)) for i, sp in enumerate(self.sps) for o in sp.member_left(name)]

    def _give_up(self, c: Client) -> None:
        for i, o in c.held:
            self.sps[i].acknowledge(c.name, o, "RELEASE")  # fails harmlessly for records it no longer holds
        self._set(c, pc="idle", held=())

    def _poll(self, name: str) -> str:
        got = []
        for i, sp in enumerate(self.sps):
            for o in sp.acquire(name, self.batch):
                got.append((i, o))
                if self.events is not None:
                    self.acquired_ms[i, o] = self.clock_ms
                self._emit("delivered", name, i, o, value_id=self.value_id(i, o), delivery_count=sp.offsets[o].count)
        self._set(self.clients[name], pc="holding", held=tuple(got))
        return f"{name} polled {', '.join(map(self.label, got))}"

    def _produce(self, name: str) -> str:
        c = self.clients[name]
        if error := self._refused(c):
            return f"{name} send(output): {error}"
        txn = self.tc.add(c.tid, self.out.name, self.clock_ms)
        if txn.began_ms == self.clock_ms and len(txn.partitions) == 1:
            self._emit("txn_begin", name, txn=txn.number, transactional_id=c.tid, producer_id=txn.pid,
                       producer_epoch=txn.epoch)
        outputs = [r for r in c.held if self.decisions.get(r, "ACCEPT") != "REJECT"]
        for i, o in outputs:
            at = self.out.append((i, o), txn.pid)
            self._emit("send", name, topic=OUTPUT, partition=0, offset=at, value_id=f"{self.value_id(i, o)}>out",
                       txn=txn.number, producer_id=txn.pid, producer_epoch=txn.epoch)
        self._set(c, pc="produced")
        return f"{name} send(output) for {[self.label(r) for r in outputs]} in transaction {txn.number}"

    def _send_acks(self, name: str) -> str:
        c = self.clients[name]
        if error := self._refused(c):
            return f"{name} send_share_acks_to_transaction: {error}"
        for state in sorted({self.state_names[i] for i, _ in c.held}):  # AddShareAcksToTxn
            txn = self.tc.add(c.tid, state, self.clock_ms)
        errors = {}
        for i, o in c.held:  # TxnShareAcknowledge, to each share coordinator
            ack_type = self.decisions.get((i, o), "ACCEPT")
            errors[i, o] = self.sps[i].acknowledge_in_txn(name, o, ack_type, txn.pid)
            self._emit("acknowledged", name, i, o, value_id=self.value_id(i, o), ack_type=ack_type, txn=txn.number,
                       error=errors[i, o])
        failed = {self.label(r): e for r, e in errors.items() if e}
        if failed:
            self.tc.end(c.tid, commit=False)
            self._give_up(c)
            return f"{name} TxnShareAcknowledge refused {failed}: it aborts"
        self._set(c, pc="acked")
        return (f"{name} send_share_acks_to_transaction: {', '.join(map(self.label, c.held))} pending in "
                f"transaction {txn.number}")

    def _commit(self, name: str) -> str:
        return self._end(name, commit=True)

    def _abort(self, name: str) -> str:
        if self.budget["abort"] > 0:  # -1: no limit, and no count (it would tell states apart that behave alike)
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

    def _restart(self, name: str) -> str:
        return self._init(self.clients[name])

    def _crash(self, name: str) -> str:
        self._set(self.clients[name], alive=False, pc="crashed", held=())
        self._emit("crash", name)
        return f"{name} crashed (SIGKILL): {self._left(name) or 'nothing'} released, its transaction stays open"

    def _zombie(self, name: str) -> str:
        c = self.clients[name]
        self._emit("pause", name)
        new = f"{name.split('.')[0]}.{sum(x.tid == c.tid for x in self.clients.values()) + 1}"
        return f"{name} paused (a zombie from now on); " + self._init(Client(new, c.tid))

    def observe(self) -> None:
        """The observer's last sample, one step later: the SPSO of each share partition now (so a timeline
        shows the final states for a moment, as the real runs' observer does)."""
        self.clock_ms += self.step_ms
        for i, sp in enumerate(self.sps):
            self._emit("share_offsets", "broker", i, sp.spso)

    # -- what it means -------------------------------------------------------------------------------
    def violations(self, final: bool = False) -> list[str]:
        """The invariants this state breaks (:func:`labkit.models.invariants.state_violations`); with
        ``final``, also a record not ACKNOWLEDGED or ARCHIVED."""
        return invariants.state_violations(self, final)
