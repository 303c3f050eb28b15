"""Class-data sharing (AppCDS) for the JVMs labkit starts by the hundred: the broker and the Java participant.

A JVM start spends most of its CPU loading and verifying classes (a broker's start-to-ready, 2.8 s of CPU on C2, is
about 1 s with an archive and C1). JDK 13+ writes the classes a run loaded into a *dynamic archive* when that run
ends (``-XX:ArchiveClassesAtExit``, JEP 350); a later JVM with the same class path maps it
(``-XX:SharedArchiveFile``) instead of loading them again. An archive changes how classes are loaded, never what
they do: Kafka behaves the same.

An archive is made for one command: its name holds a digest of the ``java -version`` text and the class path, so a new
JDK, a new release's jars or a recompiled participant gets an archive of its own; the JVM itself also checks the jars'
sizes and times and, on a mismatch, runs without it (``-Xshare:auto``, the default). Archives live in
``$LABKIT_HOME/cds/`` (read from the shared cache's ``cds/`` first, if it holds the archive:
:func:`labkit.broker.runtime.cache_path`; an archive is only ever written in ``$LABKIT_HOME``).
``python -m labkit jars`` (``make lab``, ``make test``) makes them (:func:`labkit.lab.jvm_archives.make_archives`). A
JVM started before they exist runs without one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from labkit.broker.runtime import cache_path, java_version_text, labkit_home

#: The JVM's own notes about the archive (e.g. a class path it cannot share) stay out of the logs: a JVM without a
#: usable archive simply runs without one.
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def archive(kind: str, java: str, class_path: str) -> Path:
    """Where the archive of ``kind`` (e.g. "broker") for ``java`` and ``class_path`` (a ``-cp`` value, ``dir/*``
    entries included) is read from: the shared cache's if it holds it, else ``$LABKIT_HOME``'s
    (:func:`labkit.broker.runtime.cache_path`). Its name is a digest of the ``java -version`` text, the class path and
    each jar's size and modification time, which the JVM checks too (a jar installed again, e.g. in a new venv, gets a
    new archive; the JVM would refuse the old one)."""
    return cache_path(f"cds/{_file_name(kind, java, class_path)}", marker=None)


def _file_name(kind: str, java: str, class_path: str) -> str:
    """The archive's file name (:func:`archive`)."""
    digest = hashlib.sha256(f"{java_version_text(java)}\0{class_path}".encode())
    for entry in class_path.split(os.pathsep):
        for jar in sorted(Path(entry[:-1]).glob("*.jar")) if entry.endswith("*") else [Path(entry)]:
            stat = jar.stat() if jar.exists() else None
            digest.update(f"\0{jar}\0{stat and stat.st_size}\0{stat and stat.st_mtime_ns}".encode())
    return f"{kind}-{digest.hexdigest()[:16]}.jsa"


def flags(kind: str, java: str, class_path: str) -> list[str]:
    """The JVM flags that map the archive of ``kind`` for this ``java`` and ``class_path``: none if it was never
    made."""
    path = archive(kind, java, class_path)
    return [f"-XX:SharedArchiveFile={path}", QUIET] if path.exists() else []


@contextlib.contextmanager
def dumping(kind: str, java: str, class_path: str) -> Iterator[list[str]]:
    """Yields the flags that make a JVM write the archive of ``kind`` when it ends normally (an exit, or SIGTERM; a
    SIGKILLed JVM writes none); after the block, once that JVM has ended, the archive is published (an atomic
    rename: parallel makers each write a file of their own, and any complete one will do), always in
    ``$LABKIT_HOME/cds/``, never in the shared cache."""
    path = labkit_home() / "cds" / _file_name(kind, java, class_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        yield [f"-XX:ArchiveClassesAtExit={staging}", QUIET]
        if staging.exists() and staging.stat().st_size > 0:
            staging.rename(path)
            _prune(kind)
    finally:
        staging.unlink(missing_ok=True)


#: How many archives of one kind the cache keeps (the newest): one per checkout, venv or release in use.
KEEP = 4


def _prune(kind: str) -> None:
    """Remove all but the :data:`KEEP` newest archives of ``kind`` (an archive's jars change with each new venv; a
    JVM that maps a removed one keeps its mapping)."""
    archives = sorted((labkit_home() / "cds").glob(f"{kind}-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        old.unlink(missing_ok=True)
