"""Java sources of the lab compiled at first use with ``javac``, against the jars of a Kafka release, into a jar cached
in ``$LABKIT_HOME/<name>-<release>-<source hash>/`` (or read from the shared cache, if it holds that folder:
:func:`labkit.broker.runtime.cache_path`): a changed source or another release compiles again and nothing else does.
Used by the Java participant (:mod:`labkit.crashlab.java`) and the broker's launcher (:mod:`labkit.broker.launcher`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from labkit.broker.runtime import cache_path, classpath, ensure_jars, find_java
from labkit.core.errors import JavaError


class NoJavacError(JavaError):
    """A Java runtime without ``javac`` (a JRE, not a JDK)."""


def find_javac(env: dict[str, str] | None = None, *, needed_for: str = "The lab's Java code",
               otherwise: str = "or leave out what needs it") -> str:
    """Path of ``javac`` (``$JAVA_HOME/bin/javac``, else on PATH) beside a Java 17+.

    Args:
        needed_for, otherwise: what needs it and the other way out, for the error message.
    Raises:
        JavaError: no Java 17+ (:func:`labkit.broker.runtime.find_java`). NoJavacError: a Java runtime without
            ``javac``.
    """
    env = os.environ if env is None else env
    find_java(env)
    java_home = env.get("JAVA_HOME")
    javac = str(Path(java_home) / "bin" / "javac") if java_home else shutil.which("javac", path=env.get("PATH"))
    if not javac or not os.access(javac, os.X_OK):
        raise NoJavacError(f"{needed_for} is compiled at first use, and this Java has no javac (a JRE, not a JDK): "
                           f"install a JDK 17+ (Debian: `apt-get install openjdk-17-jdk-headless`), {otherwise}.")
    return javac


def compiled(name: str, source: Path, version: str, jar: str, *, needed_for: str, otherwise: str) -> Path:
    """The folder holding ``jar``, the classes of ``source/src/**.java`` compiled against Kafka ``version``'s jars,
    and a copy of ``source/log4j2.properties`` if there is one; compiled first if this source and release never were.
    A jar, not a folder of classes, so that class-data sharing can map them (:mod:`labkit.broker.cds`). Safe for
    parallel callers: each compiles into a folder of its own and the first to finish publishes it.

    Args:
        name: the folder's prefix (``participant``, ``broker-launcher``).
        needed_for, otherwise: for :func:`find_javac`'s message.
    Raises:
        JavaError: no Java 17+, or javac failed (its output in the message). NoJavacError: not compiled yet, and a
            Java runtime without ``javac`` (:func:`find_javac`).
        MavenError: the Kafka jars are not cached and cannot be resolved.
    """
    sources = sorted((source / "src").rglob("*.java"))
    extras = [p for p in [source / "log4j2.properties"] if p.exists()]
    digest = hashlib.sha256(jar.encode())  # the layout: a folder of an older one (loose classes) is not taken
    for path in sources + extras:
        digest.update(path.name.encode() + path.read_bytes())
    folder = cache_path(f"{name}-{version}-{digest.hexdigest()[:12]}")  # the shared one if compiled there
    if (folder / ".complete").exists():
        return folder
    jars = ensure_jars(version=version, progress=False)
    javac = find_javac(needed_for=needed_for, otherwise=otherwise)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    classes = staging / "classes"
    out = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", classpath(jars), "-d", str(classes),
                          *map(str, sources)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise JavaError(f"javac could not compile {source} against Kafka {version}:\n{out.stdout}{out.stderr}")
    with zipfile.ZipFile(staging / jar, "w") as archive:
        for path in sorted(classes.rglob("*.class")):
            archive.write(path, path.relative_to(classes).as_posix())
    shutil.rmtree(classes)
    for path in extras:
        shutil.copy(path, staging)
    (staging / ".complete").write_text(f"Kafka {version}\n")
    try:
        staging.rename(folder)
    except OSError:  # another process published it first
        shutil.rmtree(staging, ignore_errors=True)
    return folder
