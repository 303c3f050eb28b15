"""The effect store of notebook 06's share consumers: what a framework writes when it processes a record."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path


class Sink:
    """A framework's own state store: one SQLite table ``effects(value_id, written_ns)``; every
    :meth:`write` is its own SQLite transaction. Duplicates are kept (they are the lesson).

    Args:
        path: the SQLite file (created if missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with sqlite3.connect(self.path, timeout=30) as db:
            db.execute("CREATE TABLE IF NOT EXISTS effects (value_id TEXT NOT NULL, written_ns INTEGER NOT NULL)")

    def write(self, value_ids: list[str]) -> None:
        """Write one effect per value id, committed before this returns."""
        with sqlite3.connect(self.path, timeout=30) as db:
            db.executemany("INSERT INTO effects VALUES (?, ?)", [(v, time.monotonic_ns()) for v in value_ids])

    def effects(self) -> list[str]:
        """Every effect's value id, in the order written."""
        with sqlite3.connect(self.path, timeout=30) as db:
            return [row[0] for row in db.execute("SELECT value_id FROM effects ORDER BY rowid")]
