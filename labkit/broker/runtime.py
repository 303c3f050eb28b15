"""What the broker JVM runs on: a Java 17+ and the Kafka jars, resolved once from Maven Central.

The jars come from ``jvm/pom.xml`` (``org.apache.kafka:kafka_2.13`` plus the log4j2 backend that the
Maven closure lacks) by ``mvn -Dkafka.version=<version> dependency:copy-dependencies`` into a per-user
cache, one folder per Kafka release, ``$LABKIT_HOME/kafka-<version>/`` (``LABKIT_HOME`` defaults to
``~/.cache/labkit``), and are reused afterwards.

On a shared machine (the workshop hub, :mod:`labkit.hub`) the jars, the compiled Java code and the class-data
archives are installed once, read-only, in the folder ``LABKIT_SHARED_CACHE`` names (:data:`SHARED_CACHE_ENV`):
:func:`cache_path` looks there before ``$LABKIT_HOME``, and whatever is missing there is made in ``$LABKIT_HOME``,
never in the shared folder.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from labkit.broker.settings import kafka_version
from labkit.core.errors import JavaError, JavaTooOldError, MavenError

POM = Path(__file__).resolve().parents[2] / "jvm" / "pom.xml"
_DOCKER_HINT = (
    "or, with Docker, run `docker compose up -d` in the labkit folder and set "
    "LABKIT_BOOTSTRAP=127.0.0.1:9092"
)


#: The environment variable naming a read-only cache of jars, compiled Java code and class-data archives shared by
#: every user of the machine (the workshop hub sets it: ``<prefix>/cache``, filled by :mod:`labkit.hub.cache`).
SHARED_CACHE_ENV = "LABKIT_SHARED_CACHE"


def labkit_home(env: dict[str, str] | None = None) -> Path:
    """labkit's per-user folder: ``$LABKIT_HOME``, else ``~/.cache/labkit``."""
    env = os.environ if env is None else env
    return Path(env.get("LABKIT_HOME") or Path.home() / ".cache" / "labkit")


def cache_path(relative: str, env: dict[str, str] | None = None, *, marker: str | None = ".complete") -> Path:
    """Where the cache entry ``relative`` (e.g. ``kafka-4.4.0``, ``cds/broker-<digest>.jsa``) is read from:
    ``$LABKIT_SHARED_CACHE/<relative>`` when the shared cache holds it finished (its ``marker`` file inside exists; a
    file entry: ``marker=None``, the file itself exists), else ``$LABKIT_HOME/<relative>``, where a missing entry is
    made. The shared cache is only ever read."""
    env = os.environ if env is None else env
    if (shared := env.get(SHARED_CACHE_ENV)):
        path = Path(shared) / relative
        if (path / marker if marker else path).exists():
            return path
    return labkit_home(env) / relative


@functools.cache
def java_version_text(java: str) -> str:
    """What ``java -version`` prints, asked once per process and ``java`` (each ask is a JVM start)."""
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    return out.stderr + out.stdout


def java_major(java: str) -> int:
    """Return the major version of ``java`` (a path or a name on PATH), read from ``java -version``: ``17`` for
    ``17.0.9``, ``8`` for ``1.8.0``; 0 if its output names none."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', java_version_text(java))
    major = int(match.group(1)) if match else 0
    return int(match.group(2)) if major == 1 and match.group(2) else major  # "1.8.0" style


def find_java(env: dict[str, str] | None = None) -> str:
    """Path of a ``java`` of version 17 or newer: ``$JAVA_HOME/bin/java``, else ``java`` on PATH.

    Raises:
        JavaError: no java found. JavaTooOldError (a JavaError): its version is below 17 (Kafka 4.x brokers need
            Java 17), with the java's path and major version as attributes.
    """
    env = os.environ if env is None else env
    java_home = env.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java", path=env.get("PATH"))
    if not java or not os.access(java, os.X_OK):
        raise JavaError(
            "No Java found (JAVA_HOME unset or wrong, and no `java` on PATH). Kafka 4.x needs Java 17+: "
            f"install it (Debian: `apt-get install openjdk-17-jre-headless`), {_DOCKER_HINT}."
        )
    major = java_major(java)
    if major < 17:
        raise JavaTooOldError(
            f"{java} is Java {major or 'of unknown version'}; Kafka 4.x needs Java 17+. Install it "
            f"(Debian: `apt-get install openjdk-17-jre-headless`) and put it first on PATH or set JAVA_HOME, "
            f"{_DOCKER_HINT}.", java, major
        )
    return java


def jar_dir(env: dict[str, str] | None = None, version: str | None = None) -> Path:
    """Cache folder of the Kafka ``version`` jars (default :func:`~labkit.broker.settings.kafka_version`):
    ``kafka-<version>/`` of the shared cache if it holds them, else of ``$LABKIT_HOME`` (:func:`cache_path`)."""
    return cache_path(f"kafka-{kafka_version(version, env)}", env)


def cached_jars(env: dict[str, str] | None = None, version: str | None = None) -> list[Path] | None:
    """The cached jars of Kafka ``version``, or ``None`` if the cache is missing or was left half-written."""
    return complete_jars(jar_dir(env, version))


def complete_jars(folder: Path) -> list[Path] | None:
    """Return the jars of a finished Maven copy in ``folder`` (sorted paths; the copy wrote a ``.complete`` file when it
    finished), else ``None``: a copy cut short is never used."""
    return sorted(folder.glob("*.jar")) if (folder / ".complete").exists() else None


def ensure_jars(env: dict[str, str] | None = None, *, version: str | None = None,
                progress: bool = True) -> list[Path]:
    """The Kafka broker's jars, resolving them with Maven on first use (a progress bar shows the
    downloads; Maven's full output is kept in ``<cache>/maven.log``).

    Args:
        env: environment to use (PATH, LABKIT_HOME, LABKIT_KAFKA_VERSION); defaults to ``os.environ``.
        version: Kafka release, one of :data:`~labkit.broker.settings.FEATURES_BY_VERSION`; default
            :func:`~labkit.broker.settings.kafka_version`.
        progress: show a tqdm progress bar while Maven runs.
    Returns:
        Paths of every jar on the broker's classpath.
    Raises:
        LabkitError: ``version`` (or ``LABKIT_KAFKA_VERSION``) is not a supported release.
        MavenError: the jars are not cached and ``mvn`` is missing, or Maven failed (the message
            holds the end of Maven's output).
    """
    env = dict(os.environ if env is None else env)
    version = kafka_version(version, env)
    return maven_jars(POM, jar_dir(env, version), f"Kafka {version}", [f"-Dkafka.version={version}"],
                      env=env, progress=progress)


def maven_jars(pom: Path, folder: Path, what: str, args: list[str], *, env: dict[str, str] | None = None,
               progress: bool = True) -> list[Path]:
    """The jars that ``mvn -f <pom> <args> dependency:copy-dependencies -DincludeScope=runtime`` copies
    into ``folder``, resolved on first use and cached there (a ``.complete`` file marks a finished copy).

    Args:
        pom: the Maven project that lists the jars (``jvm/*.xml``).
        folder: the cache folder, e.g. ``$LABKIT_HOME/kafka-4.4.0``.
        what: what the jars are, for messages ("Kafka 4.4.0").
        args: extra Maven arguments (properties, ``-DexcludeTransitive=true``).
        env: environment (PATH); defaults to ``os.environ``.
        progress: show a tqdm progress bar while Maven runs.
    Raises:
        MavenError: the jars are not cached and ``mvn`` is missing, or Maven failed (the message
            holds the end of Maven's output and the path of the full log).
    """
    env = dict(os.environ if env is None else env)
    cached = complete_jars(folder)
    if cached is not None:
        return cached
    mvn = shutil.which("mvn", path=env.get("PATH"))
    if not mvn:
        raise MavenError(
            f"The {what} jars are not cached in {folder} and Maven is not installed. "
            f"Install Maven 3.8+ (Debian: `apt-get install maven`) so labkit can resolve them, {_DOCKER_HINT}."
        )
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log_path = staging / "maven.log"
    cmd = [mvn, "-B", "-f", str(pom), *args, "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={staging}"]
    with open(log_path, "w") as log, tqdm(desc=f"Resolving {what} jars (Maven)",
                                          unit=" artifacts", disable=not progress) as bar:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for line in proc.stdout:
            log.write(line)
            if "Downloaded from" in line or "Copying " in line:
                bar.update(1)
                bar.set_postfix_str(line.rsplit("/", 1)[-1].split(" ")[0][:40], refresh=False)
        code = proc.wait()
    if code != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-30:])
        raise MavenError(
            f"Maven could not resolve the {what} jars (exit {code}); is Maven Central reachable? "
            f"Full log: {log_path}. Last lines:\n{tail}"
        )
    (staging / ".complete").write_text(what + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return complete_jars(folder) or []


def classpath(jars: list[Path]) -> str:
    """A JVM ``-cp`` value for ``jars``."""
    return os.pathsep.join(str(j) for j in jars)


def main(versions: list[str]) -> int:
    """``python -m labkit jars [VERSION ...]`` (what ``make`` runs first): check Java, then resolve the
    jars of each Kafka ``VERSION`` (default: :func:`~labkit.broker.settings.kafka_version`)."""
    print(f"Java: {find_java()}")
    for version in versions or [kafka_version()]:
        print(f"Kafka {version} jars: {len(ensure_jars(version=version))} in {jar_dir(version=version)}")
    return 0


def run_source(source: str, class_name: str, args: list[str], version: str, timeout_s: float) -> subprocess.CompletedProcess:
    """Run the Java program ``source`` (its public class ``class_name``) with ``args`` on Java's source launcher
    (JEP 330: compiled in memory, nothing cached), with Kafka ``version``'s jars on the classpath (fetched first if
    missing), and return the finished process (text output captured; a non-zero exit is the caller's to judge).

    Raises:
        JavaError: no Java 17+. MavenError: the jars are missing and cannot be fetched.
        subprocess.TimeoutExpired: it ran past ``timeout_s`` seconds.
    """
    cp = classpath(ensure_jars(version=version, progress=False))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{class_name}.java"
        path.write_text(source)
        return subprocess.run([find_java(), "-cp", cp, str(path), *args], capture_output=True, text=True,
                              timeout=timeout_s)
