"""The hub's shared read-only cache: the Kafka jars, Spark's Kafka connector jars, the compiled broker launcher and
Java participant, and the class-data archives of the broker, the participant and the Spark driver, made once by the
set-up (as root) for every attendee to read.

``python -m labkit.hub.cache <folder>`` runs with the shared venv's Python and the shared copy of labkit (so the jar
paths, the Java sources' digests and the class paths are exactly those an attendee's lab computes) and with
``LABKIT_HOME=<folder>``: what :func:`labkit.broker.runtime.ensure_jars`, :func:`labkit.spark.session.connector_jars`,
:func:`labkit.broker.javac.compiled` and :func:`labkit.broker.cds.dumping` make in ``$LABKIT_HOME`` lands in the
shared folder. An attendee's lab then finds it through ``LABKIT_SHARED_CACHE``
(:func:`labkit.broker.runtime.cache_path`) and never writes there. Everything in it ends up readable by all and
writable by root only (:func:`open_to_all`).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from labkit.broker import runtime
from labkit.broker.settings import kafka_version
from labkit.lab.jvm_archives import make_archives
from labkit.spark.session import connector_jars


def fill(version: str) -> list[str]:
    """Resolve Kafka ``version``'s jars and Spark's Kafka connector jars, and make the broker's, the participant's
    and the Spark driver's class-data archives where missing (:func:`labkit.lab.jvm_archives.make_archives`, which
    compiles the launcher and the participant), all in ``$LABKIT_HOME``; returns the archives made.

    Raises:
        JavaError, MavenError: no JDK 17+ with ``javac``, or the jars cannot be resolved (Maven Central unreachable).
        SparkSetupError: pyspark missing from the venv, or of another release.
        BrokerExitedError, BrokerNotReadyError: the archive run's broker did not start.
        subprocess.CalledProcessError, subprocess.TimeoutExpired: the archive run's participant or Spark driver failed.
    """
    runtime.ensure_jars(version=version, progress=False)
    connector_jars(progress=False)
    return make_archives(version)


def open_to_all(folder: Path) -> None:
    """Make ``folder`` and everything in it readable by all (folders 0755, files 0644, executables 0755), writable by
    the owner (root) only: ``tempfile.mkdtemp``, which :func:`labkit.broker.javac.compiled` stages in, makes 0700."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(0o755 if path.is_dir() or mode & 0o100 else 0o644)


def main(argv: list[str]) -> int:
    """``python -m labkit.hub.cache FOLDER [VERSION ...]`` (default: :func:`~labkit.broker.settings.kafka_version`),
    run by the set-up with ``LABKIT_HOME=FOLDER``."""
    folder = Path(argv[0])
    if Path(os.environ.get("LABKIT_HOME", "")).resolve() != folder.resolve():
        print(f"run with LABKIT_HOME={folder}", file=sys.stderr)
        return 2
    for version in argv[1:] or [kafka_version()]:
        made = fill(version)
        print(f"Kafka {version}: jars, Spark connector, launcher, participant; archives "
              f"{', '.join(made) + ' made' if made else 'kept'}")
    for scratch in ("lab", "experiments"):  # what the archive run leaves besides the cache (its topics' ledger)
        shutil.rmtree(folder / scratch, ignore_errors=True)
    open_to_all(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
