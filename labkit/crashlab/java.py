"""The Java participant: the roles on Kafka's own Java client (``jvm/participant/``), compiled at first use.

The sources are compiled with ``javac`` against the jars of the running Kafka release (``kafka-clients`` and what
it needs, from the jar cache :func:`labkit.broker.runtime.ensure_jars` fills from Maven Central) into
``$LABKIT_HOME/participant-<release>-<source hash>/``, so a changed source or another release compiles again and
nothing else does. A Java participant reads the same spec as a Python one and writes the same history
(``jvm/participant/src/labkit/participant/History.java``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from labkit.broker import cds
from labkit.broker.runtime import classpath, ensure_jars, find_java, labkit_home
from labkit.broker.settings import kafka_version
from labkit.errors import JavaError

SOURCE = Path(__file__).resolve().parents[2] / "jvm" / "participant"
MAIN = "labkit.participant.Main"
#: The compiled participant's classes, in its folder (:func:`compiled`).
JAR = "participant.jar"
#: JVM flags for a quick start (a participant is restarted often): C1 only, the serial collector, a small heap.
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-XX:-UsePerfData")


def find_javac(env: dict[str, str] | None = None) -> str:
    """Path of ``javac`` (``$JAVA_HOME/bin/javac``, else on PATH) beside a Java 17+.

    Raises:
        JavaError: no Java 17+ (:func:`labkit.broker.runtime.find_java`), or a Java runtime without ``javac``.
    """
    env = os.environ if env is None else env
    find_java(env)
    java_home = env.get("JAVA_HOME")
    javac = str(Path(java_home) / "bin" / "javac") if java_home else shutil.which("javac", path=env.get("PATH"))
    if not javac or not os.access(javac, os.X_OK):
        raise JavaError("The Java participant is compiled at first use, and this Java has no javac (a JRE, not a "
                        "JDK): install a JDK 17+ (Debian: `apt-get install openjdk-17-jdk-headless`), or run the "
                        "participant on librdkafka (client='librdkafka', or unset LABKIT_CLIENT).")
    return javac


def _sources() -> list[Path]:
    return sorted((SOURCE / "src").rglob("*.java"))


def compiled(version: str | None = None) -> Path:
    """The folder of the compiled Java participant for Kafka ``version`` (default: the running release), compiling it
    first if this source and release were never compiled: its classes in ``participant.jar`` (a jar, not a folder of
    classes, so that class-data sharing can map them: :mod:`labkit.broker.cds`) and its ``log4j2.properties``. Safe
    for parallel callers: each compiles into a folder of its own and the first to finish publishes it.

    Raises:
        JavaError: no JDK 17+ (:func:`find_javac`), or javac failed (its output in the message).
        MavenError: the Kafka jars are not cached and cannot be resolved.
    """
    version = kafka_version(version)
    digest = hashlib.sha256(JAR.encode())  # the layout: a folder of the old one (loose classes) is not taken
    for path in _sources() + [SOURCE / "log4j2.properties"]:
        digest.update(path.name.encode() + path.read_bytes())
    folder = labkit_home() / f"participant-{version}-{digest.hexdigest()[:12]}"
    if (folder / ".complete").exists():
        return folder
    jars = ensure_jars(version=version, progress=False)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    classes = staging / "classes"
    out = subprocess.run([find_javac(), "-nowarn", "-encoding", "UTF-8", "-cp", classpath(jars), "-d",
                          str(classes), *map(str, _sources())], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise JavaError(f"javac could not compile the Java participant ({SOURCE}) against Kafka {version}:\n"
                        f"{out.stdout}{out.stderr}")
    with zipfile.ZipFile(staging / JAR, "w") as jar:
        for path in sorted(classes.rglob("*.class")):
            jar.write(path, path.relative_to(classes).as_posix())
    shutil.rmtree(classes)
    shutil.copy(SOURCE / "log4j2.properties", staging)
    (staging / ".complete").write_text(f"Kafka {version}\n")
    try:
        staging.rename(folder)
    except OSError:  # another process published it first
        shutil.rmtree(staging, ignore_errors=True)
    return folder


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
