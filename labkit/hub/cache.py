"""The hub's shared read-only cache: the Kafka jars, the compiled broker launcher and Java participant, and their
class-data archives, made once by the set-up (as root) for every attendee to read.

``python -m labkit.hub.cache <folder>`` runs with the shared venv's Python and the shared copy of labkit (so the jar
paths, the Java sources' digests and the class paths are exactly those an attendee's lab computes) and with
``LABKIT_HOME=<folder>``: what :func:`labkit.broker.runtime.ensure_jars`, :func:`labkit.broker.javac.compiled` and
:func:`labkit.broker.cds.dumping` make in ``$LABKIT_HOME`` lands in the shared folder. An attendee's lab then finds
it through ``LABKIT_SHARED_CACHE`` (:func:`labkit.broker.runtime.cache_path`) and never writes there. Everything in
it ends up readable by all and writable by root only (:func:`open_to_all`).

Spark's jars and archive are not made: pyspark is not in the shared venv in this phase (:mod:`labkit.hub.install`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from labkit.broker import EmbeddedBroker, cds, launcher, runtime
from labkit.broker.settings import kafka_version
from labkit.crashlab import java


def fill(version: str) -> list[str]:
    """Resolve Kafka ``version``'s jars, compile the launcher and the participant, and make the broker's and the
    participant's class-data archives where missing, all in ``$LABKIT_HOME``; returns the archives made.

    Raises:
        JavaError, MavenError: no JDK 17+ with ``javac``, or the jars cannot be resolved (Maven Central unreachable).
        BrokerExitedError, BrokerNotReadyError: the archive run's broker did not start.
        subprocess.CalledProcessError, subprocess.TimeoutExpired: the archive run's participant failed.
    """
    from labkit.jvm_archives import _run_participants  # the archive run of `python -m labkit jars`, without Spark

    jvm = runtime.find_java()
    runtime.ensure_jars(version=version, progress=False)
    class_paths = {"broker": launcher.class_path(version)[0], "participant": java.class_path(version)}
    missing = [kind for kind, cp in class_paths.items() if not cds.archive(kind, jvm, cp).exists()]
    if missing:
        with contextlib.ExitStack() as stack:  # the broker stops (its JVM writes its archive), then each is published
            flags = {kind: stack.enter_context(cds.dumping(kind, jvm, class_paths[kind])) for kind in missing}
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="labkit-cds-"))
            broker = stack.enter_context(EmbeddedBroker(version=version, class_data=flags.get("broker")))
            _run_participants(broker.bootstrap_servers, folder, version, flags.get("participant"))
    return missing


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
        print(f"Kafka {version}: jars, launcher, participant; archives {', '.join(made) + ' made' if made else 'kept'}")
    for scratch in ("lab", "experiments"):  # what the archive run leaves besides the cache (its topics' ledger)
        shutil.rmtree(folder / scratch, ignore_errors=True)
    open_to_all(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
