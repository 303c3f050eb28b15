"""The instructor's live view's store: each attendee's latest exercise, claims and prediction mark per notebook, in
SQLite (Python's ``sqlite3``), and what a report from a kernel may say.

A report (:func:`parse_report`) is a JSON object with exactly three fields: ``notebook`` (``"00"``-``"09"``: the number
a notebook's file name starts with), ``kind`` (one of :data:`labkit.learn.marks.REPORTED`) and ``state``, a mark of
:data:`labkit.learn.marks.STATES`: ``"exercise"`` (a check's outcome: ``"unanswered"``, ``"wrong"``, ``"right"``, or
``"error"`` when the check raised) or ``"claims"`` (the notebook's claims, :class:`labkit.learn.claims.Run`: ``"held"``:
the claims line ran and no assertion cell of the kernel's latest run failed, ``"failed"``: an assertion cell's assertion
did not hold, ``"error"``: an assertion cell raised anything else), or ``"prediction"`` (the choice the attendee locked
in for the notebook's opening question before its first experiment: one of that notebook's keys in
:data:`labkit.learn.marks.CHOICES`, no other words; a choice made after the run began is never reported),
``"participant"`` (``"stalled"``: a participant of the notebook's kernel seen stuck in a client call) or ``"kernel"``
(the kernel's state: ``"busy"``, ``"idle"``, ``"raised"``: its latest cell raised; the time the report came is the time
the state began). It names no user: the service files it under the hub user its API token belongs to
(:mod:`labkit.hub.liveview`), so no attendee can report for another. The store keeps, per (user, notebook, kind), the
latest state, its time and how many reports came (:class:`Mark`); the file lives in the hub's state folder (mode 0700,
root's) and is made mode 0600. A store an earlier labkit wrote (an ``ok`` column: right or not, held or not) is
converted when opened: its marks become ``right``/``wrong`` and ``held``/``failed``, as they were shown.

Stdlib only (and :mod:`labkit.learn.marks`, which is): the service (the shared venv) and the tests (the project's venv)
both import it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.learn.marks import CHOICES, PREDICTION, REPORTED, STATES, valid

#: The notebooks a report may name: the two digits their file names start with (notebooks/00_tour.ipynb ...), each
#: with its opening question's choices in :data:`labkit.learn.marks.CHOICES` (a test holds them equal to the notebooks).
NOTEBOOKS = tuple(sorted(CHOICES))
#: The store's file name in the hub's state folder.
FILE_NAME = "liveview.sqlite"
#: Largest report body accepted, in bytes (a report is about 50).
MAX_BODY = 1024

_SCHEMA = """CREATE TABLE IF NOT EXISTS marks (
  user TEXT NOT NULL, notebook TEXT NOT NULL, kind TEXT NOT NULL,
  state TEXT NOT NULL, at REAL NOT NULL, reports INTEGER NOT NULL,
  PRIMARY KEY (user, notebook, kind))"""
#: An earlier labkit's marks (``ok`` 1 or 0) as states, as its live view showed them.
_FROM_OK = """INSERT INTO marks SELECT user, notebook, kind,
  CASE WHEN kind = 'exercise' THEN (CASE WHEN ok THEN 'right' ELSE 'wrong' END)
       ELSE (CASE WHEN ok THEN 'held' ELSE 'failed' END) END, at, reports FROM marks_ok"""


class BadReport(ValueError):
    """A report's body is not what :func:`parse_report` accepts (the message says what is wrong)."""


def parse_report(body: bytes) -> tuple[str, str, str]:
    """``(notebook, kind, state)`` of a report's JSON ``body`` (the module docstring's three fields, no other).

    Raises:
        BadReport: not JSON, too long (over :data:`MAX_BODY` bytes), a field missing, unknown (``user`` included: a
            report is always its token owner's) or of the wrong value (a prediction that is not one of its notebook's
            choice keys included).
    """
    if len(body) > MAX_BODY:
        raise BadReport(f"a report is at most {MAX_BODY} bytes")
    try:
        report = json.loads(body)
    except ValueError:
        raise BadReport("a report is a JSON object") from None
    if not isinstance(report, dict) or set(report) != {"notebook", "kind", "state"}:
        fields = sorted(report) if isinstance(report, dict) else type(report).__name__
        raise BadReport(f"a report has exactly the fields kind, notebook and state (the user is the token's), "
                        f"not {fields}")
    if report["notebook"] not in NOTEBOOKS:
        raise BadReport(f"notebook must be one of {', '.join(NOTEBOOKS)}")
    if report["kind"] not in REPORTED:
        raise BadReport(f"kind must be one of {', '.join(REPORTED)}")
    if report["kind"] == PREDICTION and report["state"] not in CHOICES[report["notebook"]]:
        raise BadReport(f"a prediction for notebook {report['notebook']} is one of its question's choice keys: "
                        f"{', '.join(CHOICES[report['notebook']])}")
    if not valid(report["kind"], report["state"]):
        raise BadReport(f"a {report['kind']} report's state must be one of {', '.join(STATES[report['kind']])}")
    return report["notebook"], report["kind"], report["state"]


@dataclass(frozen=True)
class Mark:
    """One attendee's latest mark for a (notebook, kind): ``state`` (one of :data:`labkit.learn.marks.STATES` of the
    kind, or for a prediction one of the notebook's :data:`labkit.learn.marks.CHOICES`), ``at`` (seconds since the
    epoch), ``reports`` (how many came: a learner's attempts)."""

    state: str
    at: float
    reports: int


class Store:
    """The marks of every attendee, in the SQLite file ``path`` (made mode 0600). Safe to share between threads (one
    connection, a lock); each call is one short transaction.

    Raises (constructor):
        sqlite3.Error: the file cannot be opened or is not a database.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # 0600 before SQLite writes a byte
        os.close(fd)
        self._db = sqlite3.connect(self.path, timeout=5.0, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock, self._db:
            if "ok" in {row[1] for row in self._db.execute("PRAGMA table_info(marks)")}:  # an earlier labkit's
                self._db.execute("ALTER TABLE marks RENAME TO marks_ok")
                self._db.execute(_SCHEMA)
                self._db.execute(_FROM_OK)
                self._db.execute("DROP TABLE marks_ok")
            self._db.execute(_SCHEMA)

    def record(self, user: str, notebook: str, kind: str, state: str, at: float | None = None) -> None:
        """Keep ``state`` as ``user``'s latest mark for (``notebook``, ``kind``) at ``at`` (default now, seconds since
        the epoch), counting one report more."""
        at = time.time() if at is None else at
        with self._lock, self._db:
            self._db.execute("INSERT INTO marks VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT (user, notebook, kind) DO UPDATE "
                             "SET state = excluded.state, at = excluded.at, reports = reports + 1",
                             (user, notebook, kind, state, at))

    def marks(self) -> dict[str, dict[tuple[str, str], Mark]]:
        """``{user: {(notebook, kind): Mark}}`` of everything recorded."""
        with self._lock:
            rows = self._db.execute("SELECT user, notebook, kind, state, at, reports FROM marks").fetchall()
        out: dict[str, dict[tuple[str, str], Mark]] = {}
        for user, notebook, kind, state, at, reports in rows:
            out.setdefault(user, {})[(notebook, kind)] = Mark(state, at, reports)
        return out

    def close(self) -> None:
        """Close the database."""
        self._db.close()
