"""The exactly-once checker: a pure function from an experiment's history to named anomalies.

It reads only the history (:mod:`labkit.core.history`), including its ``final_read`` events
(what a read_committed and a read_uncommitted consumer see at the end). Value ids follow
:func:`labkit.core.history.value_id` (``"<writer>-<n>"``, n counting the writer's sends from 1) and
:func:`labkit.core.history.derived_id` (``"<input id>><stage>"``, the output a processor writes for one input record),
so the same input processed twice yields the same output id, and a duplicate shows as one id read twice.

Anomalies (the guarantees of KIP-98 transactions and the idempotent producer):

* ``duplicate``: one value id more than once in the read_committed final read of a topic: one anomaly per
  record written more than once (20 records written twice are 20 duplicates), its copies' offsets in the detail;
* ``lost write``: a write the producer was told committed (definite ack, and its transaction, if any,
  committed) is not in the read_committed final read (safety: an acknowledged write vanished);
* ``unprocessed``: an input record with no output in the read_committed final read (liveness: the pipeline
  stopped before it, or skipped it; a skip also shows as a ``gap`` when a consumer jumped over it);
* ``aborted read``: a read_committed consumer (or final read) returned a record of an aborted transaction;
* ``precommitted read``: a read_committed consumer returned a record before its producer called
  ``commit_transaction``;
* ``gap``: a consumer's offsets jumped over a record it should have seen, which no consumer ever got
  (a poll skip, e.g. after a committed offset that was too far ahead);
* ``out-of-order``: one writer's records sit in a partition in another order than it sent them.

A final read is recorded as one ``final_read`` event per record it returned, plus one without a
``value_id`` that says the read was done (so an empty read is told apart from a missing one). The read_uncommitted
final read is the log itself (:func:`labkit.crashlab.experiment.Experiment.final_reads`): each of its records
carries its batch's ``producer_id`` and ``producer_epoch`` and, for a transactional record, the ``outcome`` the
log's own control record gives its transaction.

Which write a read read: two copies of one value id (a zombie's and its successor's, a replayed micro-batch, a
restart's rewrite) are two writes, each in its own transaction. A read of (topic, partition, offset) is matched to
the write acknowledged at that offset (the ``ack`` event names the participant and its transaction); a record
no participant saw acknowledged (a crashed producer's buffered acknowledgements, Spark's sink A) is matched by
what the log says of it: its producer id and epoch (the transaction of the same participant whose acknowledged
records carry them), and its transaction's outcome from the log's control record.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from labkit.core.history import Event, derived_id

ANOMALIES = ("duplicate", "lost write", "unprocessed", "aborted read", "precommitted read", "gap", "out-of-order")
_TABLE = ["anomaly", "value_id", "participant", "topic", "partition", "offset", "detail"]


@dataclass(frozen=True)
class Anomaly:
    """One violation: its name (one of :data:`ANOMALIES`), the records involved, and why."""

    name: str
    value_id: str | None
    detail: str
    participant: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass
class CheckResult:
    """What a checker found. Falsy-free: use :attr:`ok`. ``names`` are the anomalies that checker
    looks for (:data:`ANOMALIES` here; :data:`labkit.share.check.SHARE_ANOMALIES` for share groups)."""

    anomalies: list[Anomaly] = field(default_factory=list)
    names: tuple[str, ...] = ANOMALIES

    @property
    def ok(self) -> bool:
        """True when no anomaly was found."""
        return not self.anomalies

    def count(self, name: str) -> int:
        """How many anomalies named ``name`` (one of :attr:`names`) were found.

        Raises:
            ValueError: ``name`` is not an anomaly name.
        """
        if name not in self.names:
            raise ValueError(f"unknown anomaly {name!r}; the anomalies are {', '.join(self.names)}")
        return sum(a.name == name for a in self.anomalies)

    def counts(self) -> dict[str, int]:
        """Anomaly name to count, for every name (zeros included)."""
        return {name: self.count(name) for name in self.names}

    def table(self) -> pd.DataFrame:
        """One row per anomaly: anomaly, value_id, participant, topic, partition, offset, detail."""
        return pd.DataFrame([(a.name, a.value_id, a.participant, a.topic, a.partition, a.offset, a.detail)
                             for a in self.anomalies], columns=_TABLE)

    def _repr_html_(self) -> str:
        if self.ok:
            return f"<b>No anomalies</b>: no {', '.join(self.names[:-1])} or {self.names[-1]}."
        return self.table().to_html(index=False)


def check(events: Iterable[Event], *, output_topic: str, input_topic: str | None = None,
          stage: str = "out") -> CheckResult:
    """Check one experiment's history.

    Args:
        events: the history (e.g. ``History(path).events()``), with ``final_read`` events of
            ``output_topic`` (and of ``input_topic``) at read_committed and read_uncommitted.
        output_topic: the topic whose records are checked.
        input_topic: for a consume-transform-produce experiment: every input record in its
            read_committed final read must have exactly one output ``derived_id(input, stage)``.
        stage: the stage name processors use in :func:`labkit.core.history.derived_id`.
    Returns:
        A :class:`CheckResult`.
    Raises:
        ValueError: the history holds no read_committed final read of ``output_topic``.
    """
    events = sorted(events, key=lambda e: e.mono_ns)
    final, done = defaultdict(list), set()  # (topic, isolation) -> final_read events of records
    for e in events:
        if e.kind == "final_read":
            done.add((e.topic, e.isolation_level))
            if e.value_id is not None:
                final[e.topic, e.isolation_level].append(e)
    committed_read = final[output_topic, "read_committed"]
    if (output_topic, "read_committed") not in done:
        raise ValueError(f"the history has no read_committed final_read of {output_topic!r}: record the final "
                         "reads (read_committed and read_uncommitted) before checking")
    writes = _Writes(events)
    found: list[Anomaly] = []
    found += _duplicates(committed_read)
    found += _lost_writes(events, committed_read, writes, output_topic)
    if input_topic:
        found += _unprocessed(final[input_topic, "read_committed"], committed_read, stage)
    found += _aborted_and_precommitted_reads(events, writes)
    found += _gaps(events, final)
    found += _out_of_order(final[output_topic, "read_uncommitted"] or committed_read)
    return CheckResult(found)


@dataclass(frozen=True)
class _Write:
    """The write behind a record: who wrote it, in which transaction, and how that transaction ended."""

    participant: str | None
    txn: int | None
    outcome: str | None
    commit_start_ns: int | None


class _Writes:
    """Finds the write a read read (see the module docstring)."""

    def __init__(self, events: list[Event]) -> None:
        self.txns: dict[tuple, dict] = defaultdict(lambda: {"outcome": None, "commit_start_ns": None})
        self.acked: dict[tuple, tuple] = {}  # (topic, partition, offset) -> (participant, txn)
        self.logged: dict[tuple, Event] = {}  # (topic, partition, offset) -> the log's record (read_uncommitted)
        self.senders: dict[str, set] = defaultdict(set)  # value_id -> {(participant, txn)} of transactional sends
        for e in events:
            if e.kind == "ack" and e.definite is not False:
                self.acked[e.topic, e.partition, e.offset] = (e.participant, e.txn)
            elif e.kind == "final_read" and e.isolation_level == "read_uncommitted" and e.value_id is not None:
                self.logged[e.topic, e.partition, e.offset] = e
            if e.txn is None:
                continue
            t = self.txns[e.participant, e.txn]
            if e.kind == "send":
                self.senders[e.value_id].add((e.participant, e.txn))
            elif e.kind == "txn_commit_start":
                t["commit_start_ns"] = e.mono_ns
            elif e.kind == "txn_end" and e.definite is not False:
                t["outcome"] = e.outcome
        self.producers: dict[tuple, set] = defaultdict(set)  # (participant, txn) -> {(producer id, epoch)} in the log
        for where, writer in self.acked.items():
            record = self.logged.get(where)
            if record is not None and record.producer_id is not None:
                self.producers[writer].add((record.producer_id, record.producer_epoch))

    def of(self, read: Event) -> _Write | None:
        """The write ``read`` (a consume or final_read event) read, or None when it was not transactional or the
        history cannot tell which of several writes of its value id it was."""
        where = (read.topic, read.partition, read.offset)
        record = self.logged.get(where)
        if where in self.acked:
            return self._write(*self.acked[where], log_outcome=record.outcome if record is not None else None)
        candidates = self.senders.get(read.value_id, set())
        if record is not None and record.producer_id is not None:
            mine = {w for w in candidates if (record.producer_id, record.producer_epoch) in self.producers[w]}
            unknown = {w for w in candidates if not self.producers[w]}
            writer = next(iter(mine)) if len(mine) == 1 else next(iter(unknown)) if not mine and len(unknown) == 1 \
                else None
            if writer is not None:
                return self._write(*writer, log_outcome=record.outcome)
            return _Write(None, None, record.outcome, None) if record.outcome else None
        outcomes = {self.txns[w]["outcome"] for w in candidates}
        if len(candidates) == 1:
            return self._write(*next(iter(candidates)), log_outcome=None)
        return _Write(None, None, outcomes.pop(), None) if len(outcomes) == 1 else None

    def _write(self, participant: str, txn: int | None, log_outcome: str | None) -> _Write | None:
        """The participant's own definite outcome of its transaction, else the log's (the coordinator ended a
        crashed producer's transaction)."""
        if txn is None:
            return None
        t = self.txns[participant, txn]
        return _Write(participant, txn, t["outcome"] or log_outcome, t["commit_start_ns"])


def _where(e: Event, name: str, detail: str) -> Anomaly:
    return Anomaly(name, e.value_id, detail, e.participant, e.topic, e.partition, e.offset)


def _duplicates(read: list[Event]) -> list[Anomaly]:
    copies: dict[str, list[Event]] = defaultdict(list)
    for e in read:
        copies[e.value_id].append(e)
    return [_where(es[0], "duplicate", f"{vid} is in the log {len(es)} times (offsets "
                                       f"{', '.join(f'{e.partition}:{e.offset}' for e in es)})")
            for vid, es in copies.items() if len(es) > 1]


def _lost_writes(events, read, writes: _Writes, topic) -> list[Anomaly]:
    present = {(e.partition, e.offset) for e in read}
    lost = []
    for e in events:
        if e.kind != "ack" or e.topic != topic or e.definite is False or (e.partition, e.offset) in present:
            continue
        txn = writes.of(e)
        if txn is None or txn.outcome == "committed":
            why = "its transaction committed" if txn else "it was acked"
            lost.append(_where(e, "lost write", f"{e.value_id} was written at offset {e.offset} and {why}, "
                                                "but a read_committed consumer does not see it"))
    return lost


def _unprocessed(input_read, output_read, stage) -> list[Anomaly]:
    outputs = {e.value_id for e in output_read}
    return [_where(e, "unprocessed", f"input {e.value_id} (offset {e.offset}) has no output "
                                    f"{derived_id(e.value_id, stage)}") for e in input_read
            if derived_id(e.value_id, stage) not in outputs]


def _aborted_and_precommitted_reads(events, writes: _Writes) -> list[Anomaly]:
    found = []
    for e in events:
        if e.kind not in ("consume", "final_read") or e.isolation_level != "read_committed":
            continue
        txn = writes.of(e)
        if txn is None:
            continue
        writer = f"{txn.participant}'s transaction {txn.txn}" if txn.participant else "a transaction"
        if txn.outcome == "aborted":
            found.append(_where(e, "aborted read", f"{e.participant} read {e.value_id} at offset {e.offset}, "
                                                   f"written in {writer}, which aborted"))
        elif e.kind == "consume" and txn.participant and \
                (txn.commit_start_ns is None or e.mono_ns < txn.commit_start_ns):
            found.append(_where(e, "precommitted read", f"{e.participant} read {e.value_id} at offset {e.offset} "
                                                        f"before {txn.participant} called commit_transaction of "
                                                        f"transaction {txn.txn}"))
    return found


def _gaps(events, final) -> list[Anomaly]:
    consumed_by_anyone = {(e.topic, e.partition, e.offset) for e in events if e.kind == "consume"}
    last: dict[tuple, int] = {}
    found = []
    for e in events:
        if e.kind != "consume":
            continue
        key = (e.participant, e.topic, e.partition)
        before = last.get(key)
        last[key] = e.offset
        if before is None or e.offset <= before:
            continue
        visible = final[e.topic, e.isolation_level]
        for r in visible:
            if r.partition == e.partition and before < r.offset < e.offset and \
                    (r.topic, r.partition, r.offset) not in consumed_by_anyone:
                found.append(_where(r, "gap", f"{e.participant} went from offset {before} to {e.offset}; "
                                              f"{r.value_id} at offset {r.offset} was never consumed"))
    return found


def _out_of_order(read: list[Event]) -> list[Anomaly]:
    found, last_n, seen = [], {}, set()
    for e in sorted(read, key=lambda r: (r.partition, r.offset)):
        if not e.value_id or ">" in e.value_id or "-" not in e.value_id or (e.partition, e.value_id) in seen:
            continue  # a second copy is a duplicate, reported as such, not a reordering
        seen.add((e.partition, e.value_id))
        writer, n = e.value_id.rsplit("-", 1)
        if not n.isdigit():
            continue
        key = (writer, e.partition)
        if key in last_n and int(n) < last_n[key]:
            found.append(_where(e, "out-of-order", f"{e.value_id} sits at offset {e.offset}, after "
                                                   f"{writer}-{last_n[key]} which {writer} sent later"))
        last_n[key] = max(int(n), last_n.get(key, 0))
    return found
