"""Append to and read one experiment's history: events in a JSON-lines file.

One history per experiment: every participant appends structured events to one JSON-lines file.

Participants on either client write it alike: the Python loops through :class:`History`, the Java participant
(``jvm/participant/``) through its twin ``History.java``, on the same clock (Java's ``System.nanoTime()`` and
Python's ``time.monotonic_ns()`` both read Linux's CLOCK_MONOTONIC).

Schema (one JSON object per line; absent fields are ``null``):

==================  ======================================================================
field               meaning
==================  ======================================================================
kind                what happened, one of :data:`KINDS`
participant         who: a participant name ("producer-1"), or "lab" for actions on it
step                the named loop step it happened at (e.g. "after_produce"), if any
mono_ns             ``time.monotonic_ns()``: one clock for every process on the machine, ns (the
                    send events of one produce batch share the time it was handed to the producer)
wall_ms             wall clock, ms since the epoch (for people; order by ``mono_ns``)
topic, partition    where
offset              the record's offset, as acked (``ack``) or consumed (``consume``)
key                 the record key
value_id            unique id of the record value, "<writer>-<n>" (n counts the writer's sends)
producer_id         producer id (PID) the broker gave the producer; ``producer_epoch`` its epoch
transactional_id    ``transactional.id`` of the producer
txn                 the participant's transaction number (1, 2, ...) the event belongs to
outcome             "committed" / "aborted" on txn_end events
isolation_level     "read_committed" / "read_uncommitted" on consume and final_read events
error               Kafka error name (e.g. "PRODUCER_FENCED") when something failed
definite            True: the outcome is known (ok, or failed for sure); False: indefinite (a
                    timeout: it may or may not have happened)
delivery_count      share groups (KIP-932): how many times the record has been delivered
ack_type            share groups: "ACCEPT", "RELEASE", "REJECT" or (Java client) "RENEW"
state               share groups: a persisted record state (AVAILABLE, ACKNOWLEDGED, ARCHIVING,
                    ARCHIVED), as read from ``__share_group_state``
last_offset         share groups: last offset (inclusive) of a state batch starting at ``offset``
lag                 share groups: the share-partition lag (records), from DescribeShareGroupOffsets
member_id           share groups: the member id the group coordinator gave a consumer
batch_id            Spark: the micro-batch id (Spark's batch id: 0, 1, ...; a replayed batch keeps its id)
==================  ======================================================================

Kinds: ``send`` (produce called), ``ack`` (delivery confirmed, with offset), ``send_failed``,
``txn_begin``, ``txn_commit_start`` (``commit_transaction`` called), ``txn_end`` (with outcome),
``offsets_sent`` (``send_offsets_to_transaction``), ``offsets_committed``, ``consume``,
``final_read`` (what a consumer at ``isolation_level`` sees at the end), and the lab's actions:
``start``, ``crash``, ``pause`` (written once the OS reports the process stopped), ``resume``, ``stop``, ``fenced``
(the participant's producer epoch or group membership is no longer current: ``error`` is Kafka's name of the fencing
error, :data:`labkit.crashlab.loop.FENCED_ERRORS`), ``failed`` (the participant ended over any other error:
``error`` is Kafka's name of it, e.g. INVALID_TRANSACTION_TIMEOUT, or ``"<exception type>: <message>"`` for an error
that is not Kafka's; ``step`` the client call that failed, if known), ``finished``; ``gave_up`` (a participant ended
before it had anything to do, ``error`` says why: its consumer was assigned no partition within
``assignment_timeout_ms``, or a share consumer got no record within ``first_ms``); and ``stalled`` (a participant's
blocking client call, named in ``step``, ran past the lab's deadline: :meth:`labkit.crashlab.loop.Loop.call`);
``restart`` (a supervisor restarts the participant: ``step`` the status it ended in,
:mod:`labkit.crashlab.supervisor`); ``txn_init`` (a restarted transactional participant's
``init_transactions`` returned: its ``producer_id``/``producer_epoch``, and in ``state`` the coordinator's
state of the ``transactional.id`` before, e.g. "Ongoing": the old instance's transaction ``txn``, which
``init_transactions`` then ended with ``outcome``; a ``txn_end`` with ``step`` "init_transactions" records it);
``offset_reset`` (a processor found its consumer starting a newly assigned partition below the group's
committed offset, librdkafka's reset after an unstable offset fetch, and sought to it: ``offset`` the committed
offset, ``last_offset`` where the client started; :mod:`labkit.kafka.committed_start`); ``log_end`` (the lab read a
partition's log end offset, ``offset``, on the broker named ``participant`` (e.g. "broker-2"), its leader then: the
offset its next appended record takes, appended records not yet replicated included;
:func:`labkit.lessons.replication.sample_log_end`).

Share groups (KIP-932), from the share consumers: ``delivered`` (a record acquired by this consumer,
with its ``delivery_count``), ``acknowledged`` (``acknowledge()`` called, with ``ack_type``),
``ack_committed`` (``commit_sync()``'s result for that record: ``error`` None, or e.g.
INVALID_RECORD_STATE when its acquisition lock had expired), ``effect`` (a sink committed the
record's effect); from the broker, through the observer: ``share_state`` (a persisted state batch
of ``__share_group_state``: ``offset``..``last_offset``, ``state``, ``delivery_count``),
``share_offsets`` (SPSO in ``offset``, ``lag``), ``share_assignment`` (``member_id`` holds
``partition``; ``participant`` is the member's client id).

Spark Structured Streaming, from a pipeline participant (:mod:`labkit.spark.roles.spark_pipeline`), each with its
``batch_id``: ``batch_offsets`` (Spark wrote ``offsets/N`` of its checkpoint: one event per input
partition, the batch's input range ``offset``..``last_offset``, inclusive, at the file's time),
``batch_start`` (the sink was called for the batch, first or replayed), ``batch_written`` (the sink's
writes returned), ``batch_skipped`` (the sink found the batch's marker committed and wrote nothing),
``batch_committed`` (Spark wrote ``commits/N``: the batch is done for Spark, at the file's time).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

KINDS = ("send", "ack", "send_failed", "txn_begin", "txn_commit_start", "txn_end", "offsets_sent",
         "offsets_committed", "consume", "final_read", "start", "crash", "pause", "resume", "stop",
         "fenced", "finished", "delivered", "acknowledged", "ack_committed", "effect", "share_state",
         "share_offsets", "share_assignment", "batch_offsets", "batch_start", "batch_written", "batch_skipped",
         "batch_committed", "stalled", "restart", "txn_init", "offset_reset", "gave_up", "failed", "log_end")


@dataclass(frozen=True)
class Event:
    """One line of the history; see the module docstring for each field."""

    kind: str
    participant: str
    mono_ns: int = 0
    wall_ms: int = 0
    step: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: str | None = None
    value_id: str | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    transactional_id: str | None = None
    txn: int | None = None
    outcome: str | None = None
    isolation_level: str | None = None
    error: str | None = None
    definite: bool | None = None
    delivery_count: int | None = None
    ack_type: str | None = None
    state: str | None = None
    last_offset: int | None = None
    lag: int | None = None
    member_id: str | None = None
    batch_id: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown event kind {self.kind!r}; the kinds are {', '.join(KINDS)}")


COLUMNS = [f.name for f in fields(Event)]


def value_id(writer: str, n: int) -> str:
    """The id of ``writer``'s n-th value (n from 1): ``"<writer>-<n>"``."""
    return f"{writer}-{n}"


def derived_id(input_id: str, stage: str = "out") -> str:
    """The id of the record a processor writes for input ``input_id``: ``"<input_id>><stage>"``."""
    return f"{input_id}>{stage}"


class History:
    """An append-only JSON-lines file shared by every process of one experiment.

    Each line is one ``write()`` on a file opened with ``O_APPEND``, so lines from concurrent
    processes never interleave. A line holds one event, or (from :meth:`append_batch`) a batch of
    events of one kind: ``"batch": {field: [values...]}`` beside the fields they share; a batch
    costs one write for many records, and :meth:`events` expands it into one event per record.

    Reads are incremental: :meth:`events` parses only the lines appended since its last call (a participant's
    status is polled every 0.1 s, and a lesson's history grows to thousands of events).

    Args:
        path: the ``.jsonl`` file; created if missing, appended to if present.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self._events: list[Event] = []
        self._read_to = 0  # bytes of the file parsed into _events
        self._reading = threading.Lock()  # a supervisor's or a timeline's thread reads beside the notebook's

    def append(self, kind: str, participant: str, **fields_: object) -> Event:
        """Record one event now (``mono_ns`` and ``wall_ms`` are filled in). Returns it.

        Raises:
            ValueError: ``kind`` is not one of :data:`KINDS`.
            TypeError: a field is not in the schema.
        """
        event = Event(kind, participant, mono_ns=time.monotonic_ns(), wall_ms=time.time_ns() // 1_000_000,
                      **fields_)
        self._write({k: v for k, v in asdict(event).items() if v is not None})
        return event

    def append_batch(self, kind: str, participant: str, columns: dict[str, list], **shared: object) -> None:
        """Record many events of one ``kind`` in one line: ``columns`` maps field names to equal-length
        lists (``mono_ns`` among them: when each happened); ``shared`` fields hold for all.

        Raises:
            ValueError: unknown ``kind``, or columns of unequal length.
            TypeError: a field is not in the schema.
        """
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"batch columns differ in length: { {k: len(v) for k, v in columns.items()} }")
        if not lengths or not lengths.pop():
            return
        Event(kind, participant, **shared, **{k: v[0] for k, v in columns.items()})  # validates names
        self._write({"kind": kind, "participant": participant, "wall_ms": time.time_ns() // 1_000_000,
                     **{k: v for k, v in shared.items() if v is not None}, "batch": columns})

    def _write(self, record: dict) -> None:
        """Append ``record`` as one line, with ``write`` calls until all of it is written: a ``write`` may take only
        part of it (interrupted by a signal, or at the file size limit or a full disk, when the next one raises)."""
        line = memoryview((json.dumps(record) + "\n").encode())
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while line:
                line = line[os.write(fd, line):]
        finally:
            os.close(fd)

    def events(self) -> list[Event]:
        """Every event so far (batches expanded), ordered by ``mono_ns``. A last line without its newline is
        still being written by another process (a long batch takes more than one ``write``) and is left out
        until it is whole; the Java participant's reader, ``History.lines()``, keeps the same rule."""
        with self._reading, open(self.path, "rb") as f:
            f.seek(self._read_to)
            data = f.read()
            whole = data.rfind(b"\n") + 1
            if whole:
                self._read_to += whole
                self._events.extend(_parse(data[:whole]))
                self._events.sort(key=lambda e: e.mono_ns)  # nearly sorted: linear
            return list(self._events)

    def first(self, kind: str, participant: str | None = None, value_id: str | None = None) -> Event | None:
        """The earliest event of ``kind`` (from ``participant``, about ``value_id``, when given), or ``None``.

        Raises:
            ValueError: ``kind`` is not one of :data:`KINDS`.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}; the kinds are {', '.join(KINDS)}")
        return next((e for e in self.events() if e.kind == kind and participant in (None, e.participant)
                     and value_id in (None, e.value_id)), None)

    def frame(self) -> "pd.DataFrame":
        """The history as a pandas DataFrame with one column per schema field, ordered by time."""
        return to_frame(self.events())


def _parse(lines: bytes) -> list[Event]:
    """The events of whole ``lines``, split at newline bytes only: the Java participant's Jackson writes U+2028 and
    U+0085 raw inside strings, where ``str.splitlines`` would break a line (``History.java``'s ``lines()`` alike)."""
    events = []
    for line in lines.split(b"\n"):
        if not line.strip():
            continue
        record = json.loads(line)
        batch = record.pop("batch", None)
        if batch is None:
            events.append(Event(**record))
            continue
        names = list(batch)
        for values in zip(*batch.values()):
            events.append(Event(**record, **dict(zip(names, values))))
    return events


def to_frame(events: list[Event]) -> "pd.DataFrame":
    """Events as a DataFrame with the schema's columns (in :data:`COLUMNS` order)."""
    import pandas as pd  # only readers need it: a participant process writes without it

    return pd.DataFrame([asdict(e) for e in events], columns=COLUMNS)
