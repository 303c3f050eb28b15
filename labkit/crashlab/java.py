"""The Java participant: the roles on Kafka's own Java client (``jvm/participant/``), compiled at first use.

The sources are compiled with ``javac`` against the jars of the running Kafka release (``kafka-clients`` and what
it needs, from the jar cache :func:`labkit.broker.runtime.ensure_jars` fills from Maven Central) into
``$LABKIT_HOME/participant-<release>-<source hash>/`` (:mod:`labkit.broker.javac`), so a changed source or another
release compiles again and nothing else does. A Java participant reads the same spec as a Python one, with
:data:`ENDINGS` beside, and writes the same history (``jvm/participant/src/labkit/participant/History.java``).
"""

from __future__ import annotations

import functools
from pathlib import Path

from labkit.broker import cds, javac
from labkit.broker.runtime import classpath, ensure_jars, find_java
from labkit.broker.settings import kafka_version
from labkit.crashlab.loop import EXIT_FAILED, EXIT_FENCED, EXIT_GAVE_UP, FENCED_ERRORS

SOURCE = Path(__file__).resolve().parents[2] / "jvm" / "participant"
MAIN = "labkit.participant.Main"
#: The compiled participant's classes, in its folder (:func:`compiled`).
JAR = "participant.jar"
#: What :func:`labkit.broker.javac.find_javac`'s message says when there is no javac: what needs it, the way out.
WITHOUT_JAVAC = {"needed_for": "The Java participant",
                 "otherwise": "or run the participant on librdkafka (client='librdkafka', or unset LABKIT_CLIENT)"}
#: What a Java participant's spec holds beside a Python one's: how a participant ends, from :mod:`labkit.crashlab.loop`,
#: the one source of both clients' rules: the errors that are fencings (:data:`~labkit.crashlab.loop.FENCED_ERRORS`)
#: and the exit code of each ending (``Loop.java`` reads them; without them the JVM exits 1 before its loop).
#: Flat and of immutable values: every spec shares them.
ENDINGS = {"fenced_errors": tuple(sorted(FENCED_ERRORS)), "exit_fenced": EXIT_FENCED, "exit_gave_up": EXIT_GAVE_UP,
           "exit_failed": EXIT_FAILED}
#: JVM flags for a quick start (a participant is restarted often): C1 only, the serial collector, a small heap that
#: starts at 16 MiB (the JVM's default start is the whole 256 MiB cap here, its young generation filled before the
#: first collection): a transactional producer's 300 records peaked at 71 MiB PSS against 78, for the same CPU
#: (notebook 02 runs four at once on a hub attendee's 1 GiB).
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms16m", "-Xmx256m", "-XX:-UsePerfData")


def compiled(version: str | None = None) -> Path:
    """The folder of the compiled Java participant for Kafka ``version`` (default: the running release), compiling it
    first if this source and release were never compiled (:func:`labkit.broker.javac.compiled`): its classes in
    ``participant.jar`` and its ``log4j2.properties``.

    Raises:
        JavaError: no JDK 17+ (:func:`labkit.broker.javac.find_javac`), or javac failed (its output in the message).
        MavenError: the Kafka jars are not cached and cannot be resolved.
    """
    return javac.compiled("participant", SOURCE, kafka_version(version), JAR, **WITHOUT_JAVAC)


def command(version: str | None = None, class_data: list[str] | None = None) -> list[str]:
    """The command that runs a Java participant, to be followed by its spec as JSON: ``java <flags> -cp <classes and
    Kafka jars> labkit.participant.Main``. Worked out once per process and release (it runs ``java -version``).
    ``class_data``: the JVM's class-data sharing flags; ``None``: the participant archive's, if it was made
    (:func:`labkit.broker.cds.flags`).

    Raises:
        JavaError, MavenError: see :func:`compiled`.
    """
    java, cp = _java_and_class_path(kafka_version(version))
    config = compiled(version) / "log4j2.properties"
    sharing = cds.flags("participant", java, cp) if class_data is None else class_data
    return [java, *JVM_FLAGS, *sharing, f"-Dlog4j2.configurationFile={config}", "-cp", cp, MAIN]


def class_path(version: str | None = None) -> str:
    """The Java participant's class path: its compiled classes, then the Kafka jars of ``version`` (default: the
    running release), compiling first if needed (:func:`compiled`, which raises what it raises)."""
    return classpath([compiled(version) / JAR, *ensure_jars(version=version, progress=False)])


@functools.cache
def _java_and_class_path(version: str) -> tuple[str, str]:
    return find_java(), class_path(version)
