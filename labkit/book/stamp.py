"""Whether a notebook's recorded run is current: a SHA-256 over the notebook's bytes, labkit's Python sources (every
``labkit/**/*.py`` but the book's own, except :mod:`labkit.book.recording`, which runs in the kernel), the pinned
requirements and the Kafka release. Stored beside the executed copy as ``<name>.stamp``; a run is reused only while the
stamp matches (one changed file anywhere in labkit re-runs all: coarse, but never stale)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def labkit_digest(repo: Path = REPO) -> str:
    """SHA-256 (hex) of labkit's sources (paths and bytes, sorted), the Java the notebooks run (``jvm/``),
    ``requirements.txt`` and ``LABKIT_KAFKA_VERSION``."""
    h = hashlib.sha256()
    files = sorted(p for p in (repo / "labkit").rglob("*.py")
                   if "book" not in p.relative_to(repo / "labkit").parts[:1] or p.name == "recording.py")
    java = sorted(p for p in (repo / "jvm").rglob("*") if p.is_file() and "target" not in p.parts)
    for path in [*files, *java, repo / "requirements.txt"]:
        if path.exists():
            h.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(os.environ.get("LABKIT_KAFKA_VERSION", "").encode())
    return h.hexdigest()


def stamp(notebook: Path, labkit: str) -> str:
    """The stamp of ``notebook`` (its bytes) run under ``labkit`` (:func:`labkit_digest`)."""
    return hashlib.sha256(notebook.read_bytes() + labkit.encode()).hexdigest()


def is_current(notebook: Path, executed: Path, labkit: str) -> bool:
    """True when ``executed`` exists and its ``.stamp`` matches ``notebook`` under ``labkit`` (no re-run needed)."""
    stamp_file = executed.with_suffix(".stamp")
    return executed.exists() and stamp_file.exists() and stamp_file.read_text().strip() == stamp(notebook, labkit)


def write(notebook: Path, executed: Path, labkit: str) -> None:
    """Record that ``executed`` is the run of ``notebook`` under ``labkit``."""
    executed.with_suffix(".stamp").write_text(stamp(notebook, labkit) + "\n")
