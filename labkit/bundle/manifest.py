"""What a bundle holds and whom it is for, in the standard library only (the install runs before the venv exists).

An archive (an uncompressed tar: wheels and jars are compressed already) starts with ``manifest.json``, then holds
``wheels/<name>.whl`` and ``labkit-home/<cache folder>/<file>``. The manifest says which Python and platform the wheels
are for, the SHA-256 of the requirements.txt they were made from, the packages and Kafka/Spark releases inside, and the
size and SHA-256 of every file (the install checks each as it unpacks).
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import sys
import sysconfig
import tarfile
from pathlib import Path, PurePosixPath

from labkit.core.errors import LabkitError

#: The first member of every bundle.
MANIFEST = "manifest.json"
#: The manifest's layout; an install refuses another (a bundle made by another labkit).
FORMAT = 1
#: The archive's folders: the wheels, and the folders that go into ``$LABKIT_HOME``.
WHEELS, HOME = "wheels", "labkit-home"
#: How much of a file is read at a time while hashing or copying it (bytes).
CHUNK = 1 << 20


class BundleError(LabkitError):
    """A bundle that is missing, damaged, or made for another Python, platform or checkout; the message names the
    fix (copy it again, or ``make bundle`` on a machine like this one)."""


def target() -> dict[str, str]:
    """Whom this interpreter's wheels are for: ``{"implementation": "cpython", "python": "3.11", "platform":
    "linux-x86_64"}`` (``sysconfig.get_platform()``). A wheel's tags (PEP 425) pin all three."""
    return {"implementation": sys.implementation.name, "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "platform": sysconfig.get_platform()}


def archive_name(version: str, who: dict[str, str]) -> str:
    """The archive's file name for labkit ``version`` and a :func:`target`, e.g.
    ``labkit-bundle-0.1.0-cpython3.11-linux-x86_64.tar``."""
    return f"labkit-bundle-{version}-{who['implementation']}{who['python']}-{who['platform']}.tar"


def sha256_file(path: Path) -> str:
    """The SHA-256 of the file at ``path``, as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def member_path(name: str) -> PurePosixPath:
    """The archive member ``name`` as a relative path under :data:`WHEELS` or :data:`HOME`.

    Raises:
        BundleError: an absolute path, a ``..`` part, or a name outside those folders (never a bundle's own).
    """
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or len(path.parts) < 2 or path.parts[0] not in (WHEELS, HOME):
        raise BundleError(f"The bundle holds {name!r}, which no labkit bundle holds: it is not one `make bundle` "
                          "wrote. Build it again with `make bundle`.")
    return path


def labkit_home() -> Path:
    """``$LABKIT_HOME``, else ``~/.cache/labkit``: the same folder as :func:`labkit.broker.runtime.labkit_home`,
    which the install cannot import (its module needs tqdm, and the install runs before the venv exists)."""
    return Path(os.environ.get("LABKIT_HOME") or Path.home() / ".cache" / "labkit")


def write_archive(path: Path, files: dict[str, Path], about: dict) -> dict:
    """Write a bundle at ``path``: its manifest first (``about``, the :data:`FORMAT` and each file's size and
    SHA-256), then ``files`` (archive name, e.g. ``wheels/x.whl``, -> file); an archive already at ``path`` is replaced
    only once the new one is complete. Returns the manifest.

    Raises:
        BundleError: an archive name outside :data:`WHEELS` and :data:`HOME` (:func:`member_path`).
    """
    for name in files:
        member_path(name)
    manifest = {"format": FORMAT, **about,
                "files": {name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for name, p in files.items()}}
    partial = path.with_name(path.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime, info.mode = len(data), int(datetime.datetime.now().timestamp()), 0o644
        tar.addfile(info, io.BytesIO(data))
        for name, p in files.items():
            tar.add(p, arcname=name, recursive=False)
    partial.rename(path)
    return manifest
