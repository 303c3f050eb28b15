"""Class-data sharing for the lab's JVMs (labkit/broker/cds.py): an archive is written by a JVM that ends normally,
published whole, mapped by later JVMs of the same class path (seen in the process's memory maps), and never used for
another class path."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from labkit.broker import EmbeddedBroker, cds, launcher, runtime
from labkit.lab.jvm_archives import make_archives

#: A short JVM run of Kafka's own code: StorageTool prints a random cluster id and exits.
UUID_TOOL = ("kafka.tools.StorageTool", "random-uuid")


def _kafka() -> tuple[str, str]:
    return runtime.find_java(), runtime.classpath(runtime.ensure_jars(progress=False))


def test_an_archive_is_published_only_when_its_jvm_ended_normally(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    java, cp = _kafka()
    with cds.dumping("tool", java, cp) as flags:  # SIGKILLed before its end: nothing written, nothing published
        proc = subprocess.Popen([java, *flags, "-cp", cp, "kafka.Kafka", "/nonexistent.properties"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert cds.flags("tool", java, cp) == [] and list((tmp_path / "cds").iterdir()) == []
    with cds.dumping("tool", java, cp) as flags:
        subprocess.run([java, *flags, "-cp", cp, *UUID_TOOL], check=True, capture_output=True, timeout=120)
    assert cds.flags("tool", java, cp) == [f"-XX:SharedArchiveFile={cds.archive('tool', java, cp)}", cds.QUIET]
    assert [p.name for p in (tmp_path / "cds").iterdir()] == [cds.archive("tool", java, cp).name]  # no staging left
    # -Xshare:on: the JVM refuses to start unless it maps the archive
    mapped = subprocess.run([java, "-Xshare:on", *cds.flags("tool", java, cp), "-cp", cp, *UUID_TOOL],
                            capture_output=True, text=True, timeout=120)
    assert mapped.returncode == 0 and len(mapped.stdout.strip()) == 22, mapped.stderr
    assert cds.flags("tool", java, cp + ":" + str(tmp_path)) == []  # another class path: an archive of its own


def test_the_broker_maps_its_archive(broker):
    """The session's broker, started after ``python -m labkit jars`` made the archives (make test), maps its archive
    (a broker of its own where the session's started before the archives existed)."""
    make_archives(broker.version)  # a no-op in make test
    java, cp = runtime.find_java(), launcher.class_path(broker.version)[0]
    archive = str(cds.archive("broker", java, cp))
    with contextlib.ExitStack() as stack:
        if f"-XX:SharedArchiveFile={archive}" not in psutil.Process(broker.pid).cmdline():
            broker = stack.enter_context(EmbeddedBroker())
        assert archive in {m.path for m in psutil.Process(broker.pid).memory_maps()}


def test_a_jar_installed_again_gets_an_archive_of_its_own(tmp_path, monkeypatch):
    """The JVM refuses an archive whose jars changed size or time (a new venv's pyspark): so does its name."""
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path / "home"))
    java, jar = runtime.find_java(), tmp_path / "jars" / "a.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"one")
    before = cds.archive("k", java, f"{jar.parent}/*")
    assert cds.archive("k", java, f"{jar.parent}/*") == before
    os.utime(jar, ns=(1, 1))
    assert cds.archive("k", java, f"{jar.parent}/*") != before
    assert cds.archive("k", java, str(jar)) != cds.archive("k", java, f"{jar.parent}/*")


def test_only_the_newest_archives_of_a_kind_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    java = runtime.find_java()
    for i in range(cds.KEEP + 2):
        with cds.dumping("k", java, f"/nonexistent/{i}.jar") as flags:
            staging = Path(flags[0].split("=", 1)[1])
            staging.write_bytes(b"archive")
            os.utime(staging, (i, i))
    kept = sorted(p.name for p in (tmp_path / "cds").iterdir())
    assert kept == sorted(cds.archive("k", java, f"/nonexistent/{i}.jar").name for i in range(2, cds.KEEP + 2))
