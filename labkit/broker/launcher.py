"""The lab broker's main class, ``labkit.broker.Launcher`` (``jvm/broker/``): a new node's storage is formatted
(Kafka's ``kafka.tools.StorageTool``) in the JVM that then runs the broker (``kafka.Kafka``), not in a JVM of its
own as ``kafka-storage.sh format`` does: a new broker costs one JVM start less (about 1 s of CPU and of wall time).

It is compiled with ``javac`` at first use against the release's jars (:mod:`labkit.broker.javac`). A Java runtime
without ``javac`` (a JRE) still runs the broker: it formats in a JVM of its own, as before.
"""

from __future__ import annotations

from pathlib import Path

from labkit.broker import javac, runtime

SOURCE = Path(__file__).resolve().parents[2] / "jvm" / "broker"
MAIN = "labkit.broker.Launcher"
JAR = "broker-launcher.jar"
#: The launcher's exit code when the format failed (StorageTool's message is on its stderr).
FORMAT_FAILED = 3


def class_path(version: str, jars: list[Path] | None = None) -> tuple[str, bool]:
    """The broker JVM's class path for Kafka ``version``, and whether the launcher is on it: its jar first (compiled
    first if needed), then the release's jars (``jars``, else :func:`labkit.broker.runtime.ensure_jars`'s); without a
    ``javac``, the release's jars alone.

    Raises:
        JavaError: no Java 17+, or javac failed on the launcher (its output in the message).
        MavenError: the Kafka jars are not cached and cannot be resolved.
    """
    jars = jars if jars is not None else runtime.ensure_jars(version=version, progress=False)
    try:
        folder = javac.compiled("broker-launcher", SOURCE, version, JAR, needed_for="The broker's launcher",
                                otherwise="or go on: the broker formats its storage in a JVM of its own")
    except javac.NoJavacError:
        return runtime.classpath(jars), False
    return runtime.classpath([folder / JAR, *jars]), True


def main_args(properties: Path, format_args: list[str] | None) -> list[str]:
    """The launcher's main class and arguments: run the broker of ``properties`` (a ``server.properties``), after
    formatting its storage with ``format_args`` (StorageTool's ``format`` arguments) unless they are ``None``."""
    return [MAIN, str(properties), *(["format", *format_args] if format_args is not None else [])]
