"""``make lab BUNDLE=<archive>``'s first step: check a bundle and unpack it, with no network, in the standard library
only (the system python runs it before the venv exists; ``make`` then creates the venv and pip installs from the
unpacked wheels alone: ``--no-index --find-links .bundle/wheels``, pip's "Installing from local packages").

Checked before anything is written: the archive is a tar whose first member is a manifest of :data:`FORMAT`, made
for this Python and platform and for this checkout's requirements.txt. Checked while unpacking (into a staging folder
in ``$LABKIT_HOME``): every member is one the manifest lists, of its size and SHA-256, and none is missing. Only then
are the wheels put in ``.bundle/wheels`` and each jar cache in ``$LABKIT_HOME/<folder>``; a cache already complete
there is kept as it is.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

from labkit.bundle.manifest import (CHUNK, FORMAT, HOME, MANIFEST, WHEELS, BundleError, labkit_home, member_path,
                                    sha256_file, target)

ROOT = Path(__file__).resolve().parents[2]
#: Where the wheels go (the Makefile's ``--find-links``).
WHEELS_DIR = ROOT / ".bundle" / "wheels"
#: The advice every "damaged" error ends with.
AGAIN = "copy the archive onto this machine again, or build it again with `make bundle` on a machine with the network"


def read_manifest(tar: tarfile.TarFile, archive: Path) -> dict:
    """The manifest, the first member of ``tar`` (opened from ``archive``).

    Raises:
        BundleError: no manifest first, or not readable as one.
    """
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile():
        raise BundleError(f"{archive} is a tar archive but not a labkit bundle (it does not start with {MANIFEST}): "
                          f"pass the archive `make bundle` wrote (dist/labkit-bundle-*.tar).")
    try:
        manifest = json.load(tar.extractfile(first))
        manifest["files"].items()
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        raise BundleError(f"The manifest of {archive} is damaged ({exc}): {AGAIN}.") from None
    return manifest


def check(manifest: dict, requirements: Path, archive: Path) -> None:
    """That the bundle of ``manifest`` fits this interpreter (:func:`~labkit.bundle.manifest.target`) and the
    checkout whose ``requirements`` (requirements.txt) pip installs.

    Raises:
        BundleError: another manifest layout, Python, platform or requirements.txt; the message names the fix.
    """
    if manifest.get("format") != FORMAT:
        raise BundleError(f"{archive} is a bundle of another labkit (layout {manifest.get('format')}, this one reads "
                          f"{FORMAT}): build it again with `make bundle` from this checkout.")
    here = target()
    theirs = {key: manifest.get(key) for key in here}
    if theirs != here:
        raise BundleError(
            f"{archive} holds wheels for {' '.join(map(str, theirs.values()))}, and make runs python3 = "
            f"{' '.join(here.values())}: run `make lab BUNDLE={archive} PYTHON=python{theirs['python']}` if that "
            f"Python is installed, or build a bundle with `make bundle` on a machine like this one.")
    if manifest.get("requirements_sha256") != sha256_file(requirements):
        raise BundleError(f"{archive} was built from another requirements.txt than this checkout's ({requirements}): "
                          f"build it again with `make bundle` from this checkout (or use the checkout it was built "
                          f"from, commit {manifest.get('commit')}).")


def _unpack(tar: tarfile.TarFile, files: dict, staging: Path, archive: Path) -> int:
    """Copy every file member of ``tar`` into ``staging``, checking each against ``files`` (the manifest's); returns
    the bytes written.

    Raises:
        BundleError: a member not in the manifest, of another size or hash, or a listed file missing.
    """
    left, written = dict(files), 0
    for member in tar:  # the manifest again first (a TarFile iterates over what it has read already too)
        if member.isdir() or member.name == MANIFEST:
            continue
        path = member_path(member.name)
        expected = left.pop(member.name, None)
        if expected is None or not member.isfile():
            raise BundleError(f"{archive} holds {member.name}, which its manifest does not list: {AGAIN}.")
        digest = hashlib.sha256()
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        with tar.extractfile(member) as src, open(staging / path, "wb") as dst:
            while chunk := src.read(CHUNK):
                digest.update(chunk)
                dst.write(chunk)
        if member.size != expected["size"] or digest.hexdigest() != expected["sha256"]:
            raise BundleError(f"{member.name} in {archive} is damaged (its SHA-256 differs from the manifest's): "
                              f"{AGAIN}.")
        written += member.size
    if left:
        raise BundleError(f"{archive} lacks {len(left)} file(s) its manifest lists (e.g. {next(iter(left))}): "
                          f"the copy is incomplete; {AGAIN}.")
    return written


def install(archive: Path, *, requirements: Path = ROOT / "requirements.txt", wheels: Path = WHEELS_DIR,
            home: Path | None = None) -> dict:
    """Check the bundle ``archive`` and unpack it: its wheels into ``wheels`` (replacing what was there), each of its
    jar caches into ``home`` (default ``$LABKIT_HOME``) unless a complete one is there already.

    Returns:
        ``{"manifest": ..., "bytes": bytes unpacked, "caches": folder names put in place, "kept": those already
        there}``.
    Raises:
        BundleError: the archive is missing, not a bundle, damaged or incomplete, or made for another Python, platform
            or requirements.txt (:func:`check`); nothing is changed then.
    """
    home = labkit_home() if home is None else home
    if not archive.is_file():
        raise BundleError(f"No bundle at {archive}: pass the path of the archive `make bundle` wrote, e.g. "
                          f"`make lab BUNDLE=/media/usb/labkit-bundle-....tar` (build one with `make bundle` on a "
                          f"machine with the network).")
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=home) as tmp:
        staging = Path(tmp)
        try:
            with tarfile.open(archive, "r|") as tar:  # a stream: one pass over the archive
                manifest = read_manifest(tar, archive)
                check(manifest, requirements, archive)
                written = _unpack(tar, manifest["files"], staging, archive)
        except (tarfile.TarError, EOFError) as exc:
            raise BundleError(f"{archive} is not a readable tar archive ({exc}): {AGAIN}.") from None
        shutil.rmtree(wheels, ignore_errors=True)
        wheels.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(staging / WHEELS, wheels)
        placed, kept = [], []
        for folder in sorted((staging / HOME).iterdir()) if (staging / HOME).exists() else []:
            if (home / folder.name / ".complete").exists():
                kept.append(folder.name)
                continue
            shutil.rmtree(home / folder.name, ignore_errors=True)  # a half-written one (no .complete)
            folder.rename(home / folder.name)
            placed.append(folder.name)
    return {"manifest": manifest, "bytes": written, "caches": placed, "kept": kept}


def main(args: list[str]) -> int:
    """``python3 -m labkit.bundle install ARCHIVE`` (``make lab BUNDLE=ARCHIVE``): install, then say what went
    where."""
    if len(args) != 1:
        raise BundleError("usage: python3 -m labkit.bundle install ARCHIVE (or make lab BUNDLE=ARCHIVE)")
    done = install(Path(args[0]))
    manifest = done["manifest"]
    print(f"Bundle {args[0]} (built {manifest['created']}, labkit {manifest['labkit']}): "
          f"{done['bytes'] / 2**20:,.0f} MiB checked; {len(manifest['packages'])} wheels in {WHEELS_DIR}; "
          f"jar caches in {labkit_home()}: {', '.join(done['caches']) or 'none new'}"
          + (f" (already there: {', '.join(done['kept'])})" if done["kept"] else ""))
    return 0
