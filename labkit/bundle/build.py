"""``make bundle``: one archive for a venue with no network (:mod:`labkit.bundle`), built with the network, in the
venv (it asks labkit where its caches are and fills any that are missing).

Wheels: ``pip wheel`` of requirements.txt, of pyproject.toml's build requirements (setuptools, for the editable
install of labkit) and of pip itself (``make lab`` upgrades it), so ``pip install --no-index --find-links`` finds
everything ``make lab`` installs (pip's "Installing from local packages" docs). Jars: the folders Maven filled
(:func:`labkit.broker.runtime.ensure_jars`, :func:`labkit.spark.session.connector_jars`) and those ``javac`` filled
(the broker's launcher, the Java participant: :mod:`labkit.broker.javac`), each marked complete by a ``.complete``
file, so the lab takes them as they are. Not bundled: the class-data archives (``$LABKIT_HOME/cds``), which belong to
one JDK and one venv's jar files (:mod:`labkit.broker.cds`); ``make lab`` makes them on the new machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

from labkit.broker import launcher, runtime
from labkit.broker.javac import NoJavacError
from labkit.broker.settings import kafka_version
from labkit.bundle.manifest import HOME, WHEELS, archive_name, sha256_file, target, write_archive
from labkit.crashlab import java
from labkit.spark.session import SPARK_VERSION, connector_jars

ROOT = Path(__file__).resolve().parents[2]
#: How long ``pip wheel`` may take (s): about 650 MB to fetch on a slow venue-prep connection, pyspark's build.
PIP_TIMEOUT_S = 3600
#: The newest class-file version every JVM the lab runs on reads (Java 17's, 61; JVMS 4.1): compiled classes of a
#: newer one (a JDK 21 maker's) stay out, and an attendee's ``javac`` compiles them at first use instead.
CLASS_FILE_MAX = 61


def wheels(folder: Path) -> list[Path]:
    """Fill ``folder`` with the wheels of everything ``make lab`` installs, for this Python and platform.

    Raises:
        subprocess.CalledProcessError: pip failed (its output is on the terminal). subprocess.TimeoutExpired: it ran
            past :data:`PIP_TIMEOUT_S`.
    """
    build_requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(folder), "-r",
                    str(ROOT / "requirements.txt"), *build_requires, "pip"], check=True, timeout=PIP_TIMEOUT_S)
    return sorted(folder.glob("*.whl"))


def class_file_version(jar: Path) -> int:
    """The class-file major version of the first class in ``jar`` (61 for Java 17; JVMS 4.1), 0 if it has none."""
    with zipfile.ZipFile(jar) as archive:
        name = next((n for n in archive.namelist() if n.endswith(".class")), None)
        return int.from_bytes(archive.read(name)[6:8], "big") if name else 0


def jar_caches(versions: list[str]) -> tuple[list[Path], list[str]]:
    """The ``$LABKIT_HOME`` folders the lab needs for Kafka ``versions``, filled first where missing (Maven, javac),
    and notes on what stays out (no javac here; classes too new for Java 17).

    Raises:
        JavaError, MavenError: no Java 17+, or the jars cannot be resolved.
    """
    folders, notes = [connector_jars(progress=False)[0].parent], []
    for version in versions:
        runtime.ensure_jars(version=version)
        folders.append(runtime.jar_dir(version=version))
        try:
            compiled = [java.compiled(version)]
        except NoJavacError as exc:
            notes.append(f"Kafka {version}: no compiled Java code in the bundle ({exc})")
            continue
        cp, with_launcher = launcher.class_path(version)
        compiled += [Path(cp.split(os.pathsep)[0]).parent] if with_launcher else []
        for folder in compiled:
            newest = max(class_file_version(jar) for jar in folder.glob("*.jar"))
            if newest > CLASS_FILE_MAX:
                notes.append(f"{folder.name} left out: compiled for Java {newest - 44}, newer than the lab's 17")
            else:
                folders.append(folder)
    return folders, notes


def _commit() -> str | None:
    """The checkout's git commit, if it is a git checkout."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or None


def build(out: Path, versions: list[str] | None = None) -> tuple[Path, dict]:
    """Write the bundle into folder ``out`` (e.g. ``dist``); returns its path and its manifest. An archive of the
    same name is replaced only once the new one is complete.

    Args:
        versions: Kafka releases whose jars go in (default: the lab's, :func:`labkit.broker.settings.kafka_version`).
    Raises:
        JavaError, MavenError, LabkitError: see :func:`jar_caches` and :func:`labkit.broker.settings.kafka_version`.
        subprocess.CalledProcessError, subprocess.TimeoutExpired: see :func:`wheels`.
    """
    versions = [kafka_version(v) for v in versions or [None]]
    out.mkdir(parents=True, exist_ok=True)
    who = target()
    path = out / archive_name(metadata.version("labkit"), who)
    folders, notes = jar_caches(versions)
    with tempfile.TemporaryDirectory(prefix="labkit-bundle-", dir=out) as tmp:
        files = {f"{WHEELS}/{w.name}": w for w in wheels(Path(tmp))}
        for folder in folders:
            files |= {f"{HOME}/{folder.name}/{p.relative_to(folder).as_posix()}": p
                      for p in sorted(folder.rglob("*")) if p.is_file()}
        manifest = write_archive(path, files, {
            "labkit": metadata.version("labkit"), "commit": _commit(), **who,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "requirements_sha256": sha256_file(ROOT / "requirements.txt"),
            "kafka": versions, "spark": SPARK_VERSION,
            "java": runtime.java_version_text(runtime.find_java()).splitlines()[0],
            "packages": dict(sorted(w.name.split("-")[:2] for w in Path(tmp).glob("*.whl"))),
            "caches": [f.name for f in folders], "notes": notes})
    return path, manifest


def main(args: list[str]) -> int:
    """``python -m labkit.bundle build [--out DIR] [KAFKA_VERSION ...]`` (``make bundle``): build, then print the
    archive's path, size and contents."""
    parser = argparse.ArgumentParser(prog="python -m labkit.bundle build", description="make bundle")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="the folder to write into (default: dist)")
    parser.add_argument("versions", nargs="*", help="Kafka releases whose jars go in (default: the lab's)")
    opts = parser.parse_args(args)
    path, manifest = build(opts.out, opts.versions)
    print(f"Bundle: {path} ({path.stat().st_size / 2**20:,.0f} MiB): {len(manifest['packages'])} wheels for "
          f"{manifest['implementation']} {manifest['python']} on {manifest['platform']}, jar caches "
          f"{', '.join(manifest['caches'])}")
    for note in manifest["notes"]:
        print(f"note: {note}")
    print(f"Install it with no network: make lab BUNDLE={path}")
    return 0
