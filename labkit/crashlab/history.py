"""One history per experiment: every participant appends structured events to one JSON-lines file.

Schema (one JSON object per line; absent fields are ``null``):

==================  ======================================================================
field               meaning
==================  ======================================================================
kind                what happened, one of :data:`KINDS`
participant         who: a participant name ("producer-1"), or "lab" for actions on it
step                the named loop step it happened at (e.g. "after_produce"), if any
mono_ns             ``time.monotonic_ns()``: one clock for every process on the machine, ns
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
==================  ======================================================================

Kinds: ``send`` (produce called), ``ack`` (delivery confirmed, with offset), ``send_failed``,
``txn_begin``, ``txn_commit_start`` (``commit_transaction`` called), ``txn_end`` (with outcome),
``offsets_sent`` (``send_offsets_to_transaction``), ``offsets_committed``, ``consume``,
``final_read`` (what a consumer at ``isolation_level`` sees at the end), and the lab's actions:
``start``, ``crash``, ``pause``, ``resume``, ``stop``, ``fenced``, ``finished``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pandas as pd

KINDS = ("send", "ack", "send_failed", "txn_begin", "txn_commit_start", "txn_end", "offsets_sent",
         "offsets_committed", "consume", "final_read", "start", "crash", "pause", "resume", "stop",
         "fenced", "finished")


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

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown event kind {self.kind!r}; the kinds are {', '.join(KINDS)}")


COLUMNS = [f.name for f in fields(Event)]


class History:
    """An append-only JSON-lines file shared by every process of one experiment.

    Each :meth:`append` is one ``write()`` on a file opened with ``O_APPEND``, so lines from
    concurrent processes never interleave.

    Args:
        path: the ``.jsonl`` file; created if missing, appended to if present.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()

    def append(self, kind: str, participant: str, **fields_: object) -> Event:
        """Record one event now (``mono_ns`` and ``wall_ms`` are filled in). Returns it.

        Raises:
            ValueError: ``kind`` is not one of :data:`KINDS`.
            TypeError: a field is not in the schema.
        """
        event = Event(kind, participant, mono_ns=time.monotonic_ns(), wall_ms=time.time_ns() // 1_000_000,
                      **fields_)
        line = (json.dumps({k: v for k, v in asdict(event).items() if v is not None}) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return event

    def events(self) -> list[Event]:
        """Every event so far, ordered by ``mono_ns``."""
        with open(self.path) as f:
            events = [Event(**json.loads(line)) for line in f if line.strip()]
        return sorted(events, key=lambda e: e.mono_ns)

    def frame(self) -> pd.DataFrame:
        """The history as a pandas DataFrame with one column per schema field, ordered by time."""
        return to_frame(self.events())


def to_frame(events: list[Event]) -> pd.DataFrame:
    """Events as a DataFrame with the schema's columns (in :data:`COLUMNS` order)."""
    return pd.DataFrame([asdict(e) for e in events], columns=COLUMNS)
