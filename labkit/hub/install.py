"""The workshop hub's set-up: what every attendee's processes run and read, installed once in a shared prefix, and the
hub's proxy installed into the project.

Everything an attendee's processes read must be readable by every attendee, so none of it can live under ``/root``
(mode 0700: an attendee's ``jupyterhub-singleuser`` from a venv made by a Python under ``/root`` fails with
"Permission denied", issue 38). :func:`install_shared` makes, under the prefix (:data:`DEFAULT_PREFIX`, or
``LABKIT_HUB_PREFIX``), all world-readable and owned by root:

* ``venv/``: a virtual environment of Debian's ``/usr/bin/python3`` with the lab's pinned packages
  (``requirements.txt``, pyspark included, less the test tools: :data:`DEFERRED`) and the hub's own
  (:data:`HUB_PACKAGES`: ``jupyterhub`` brings ``jupyterhub-singleuser``), and JupyterLab's ``overrides.json``
  (:func:`labkit.lab.workspace.write_lab_settings`: every attendee's JupyterLab reads the venv's settings).
* ``src/``: a **copy** of this repository's files (``labkit/``, ``jvm/``, ``notebooks/``; what ``git ls-files``
  lists, untracked files included, ignored ones not), on the venv's path through a ``.pth`` file and byte-compiled
  (attendees cannot write ``__pycache__`` there). A copy, not an editable install of the checkout: attendees must
  not see a developer's edits, branch switches or half-pulled files mid-workshop; the copy changes only when
  ``make hub`` starts again after the repository changed. Not a wheel either: labkit finds the notebooks and
  ``jvm/`` beside its package (:data:`labkit.lab.workspace.SOURCES`, ``labkit.broker.runtime.POM``), which a wheel
  would not carry.
* ``cache/``: the shared read-only cache (:mod:`labkit.hub.cache`): the Kafka jars, Spark's Kafka connector jars,
  the compiled broker launcher and Java participant, and the class-data archives of the broker, the participant
  and the Spark driver, made by the shared venv from the copy, as root; attendees read it
  through ``LABKIT_SHARED_CACHE`` (set by the spawner) and never write there.

It also installs Debian's ``nftables`` when ``nft`` is missing (:func:`labkit.hub.firewall.install`): the wall
around the attendees' network namespaces.

Every step is idempotent: a stamp file records the hash of what was installed (the pins; the copied files; the
cache's packages, sources and Kafka release), and a second run with nothing changed only hashes the sources (well
under a second). A file lock serialises two set-ups: a second waits for the first (at most :data:`LOCK_WAIT_S`, then
fails naming it). The lock is root's alone (:func:`setup_lock`, :mod:`labkit.hub.rootlock`), not a file of the
prefix that every attendee can read, open and so hold (issue 63).
"""

from __future__ import annotations

import compileall
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from labkit.broker.runtime import SHARED_CACHE_ENV
from labkit.broker.settings import kafka_version
from labkit.core.errors import LabkitError
from labkit.core.jsonfile import write_json
from labkit.hub import firewall, rootlock
from labkit.lab.workspace import write_lab_settings

REPO = Path(__file__).resolve().parents[2]
#: Where the shared install goes unless ``LABKIT_HUB_PREFIX`` or ``--prefix`` says otherwise.
DEFAULT_PREFIX = Path("/opt/labkit")
#: The Python the shared venv is made from: Debian's, readable by every user (a pyenv under /root is not).
SYSTEM_PYTHON = "/usr/bin/python3"
#: The hub's packages, pinned (PyPI): JupyterHub 6 (hub, ``jupyterhub-singleuser``), the idle culler service, and
#: FirstUseAuthenticator with its bcrypt (:mod:`labkit.hub.auth`).
HUB_PACKAGES = ("jupyterhub==6.1.1", "jupyterhub-idle-culler==2.0.0", "jupyterhub-firstuseauthenticator==1.1.1",
                "bcrypt==5.0.0")
#: Packages of ``requirements.txt`` the shared venv leaves out: the test tools (attendees run notebooks, not the
#: suite). pyspark (about 450 MB, notebook 04) is in: pip installs it from its own cache, a local copy once the lab's
#: venv has it, so only a first machine downloads it.
DEFERRED = frozenset({"pytest", "pytest-xdist", "nbval", "hypothesis", "playwright"})
#: The repository folders copied into ``<prefix>/src`` (plus the top-level ``pyproject.toml``).
COPIED = ("labkit", "jvm", "notebooks")
#: configurable-http-proxy, the hub's proxy (npm), installed into the project by :func:`install_proxy`.
PROXY_PACKAGE = "configurable-http-proxy@5.3.0"
#: The project folder (git-ignored) of the proxy's npm install and of the hub's own state.
HUB_DIR = REPO / ".hub"
#: Seconds a set-up waits for another one holding its lock (a first set-up's pip install takes minutes).
LOCK_WAIT_S = 900.0


def shared_prefix(prefix: Path | str | None = None) -> Path:
    """The shared install's folder: ``prefix``, else ``$LABKIT_HUB_PREFIX``, else :data:`DEFAULT_PREFIX`, once it is
    safe for root to run what is there and open to the attendees: the folder (if it exists) and every folder above it
    owned by root, writable by neither group nor others (else another user could put a ``venv/bin/python`` there
    first, which the hub would run as root), and searchable by others (an attendee's server runs the venv).

    Raises:
        LabkitError: a folder on the way fails one of these (the message names it and the fix).
    """
    path = Path(prefix or os.environ.get("LABKIT_HUB_PREFIX") or DEFAULT_PREFIX).resolve()
    fix = "Choose another prefix (--prefix or LABKIT_HUB_PREFIX, e.g. /opt/labkit)."
    for folder in [*reversed(path.parents), path]:
        if not folder.exists():
            break
        info = folder.stat()
        if info.st_uid != 0:
            raise LabkitError(f"The hub's shared install cannot go in {path}: {folder} is owned by uid {info.st_uid}, "
                              f"not root, so that user could change what the hub runs as root. {fix}")
        if info.st_mode & 0o022:
            raise LabkitError(f"The hub's shared install cannot go in {path}: {folder} is writable by "
                              f"{'others' if info.st_mode & 0o002 else 'its group'} (mode {info.st_mode & 0o7777:o}), "
                              f"so another user could put a program there that the hub runs as root. {fix}")
        if not info.st_mode & 0o001:
            raise LabkitError(f"The hub's shared install cannot go in {path}: {folder} is not open to other users "
                              f"(mode {info.st_mode & 0o777:o}), so attendees could not run it. {fix}")
    return path


def check_venv(prefix: Path) -> None:
    """Refuse a venv under ``prefix`` that the set-up did not make: one without the set-up's stamp (``.installed.json``,
    which records the venv once the set-up made it), or a stamp or venv owned by another user than root.

    Raises:
        LabkitError: such a venv is there (the message names it and the fix).
    """
    venv, stamp = prefix / "venv", prefix / ".installed.json"
    if not venv.exists():
        return
    if not stamp.is_file() or not {"venv", "packages"} & _stamp(prefix).keys():
        raise LabkitError(f"{venv} was not made by the hub's set-up (no record of it in {stamp}), and the hub would run "
                          f"it as root: remove it (rm -r {venv}) if you know where it came from, or choose another "
                          "prefix.")
    for path in (venv, venv / "bin", venv_python(prefix), stamp):
        if not path.exists():
            continue
        link, target = path.lstat(), path.stat()  # venv/bin/python is a link (mode 777) to the system's python3
        owner = link.st_uid or target.st_uid
        mode = target.st_mode if stat.S_ISLNK(link.st_mode) else link.st_mode
        if owner != 0 or mode & 0o022:
            raise LabkitError(f"{path} is owned by uid {owner} or writable by others than root (mode "
                              f"{mode & 0o7777:o}), and the hub would run it as root: remove {venv} and {stamp}, then "
                              "make hub again.")


def cache_dir(prefix: Path) -> Path:
    """The shared read-only cache under ``prefix`` (``LABKIT_SHARED_CACHE`` of every attendee)."""
    return prefix / "cache"


def venv_python(prefix: Path) -> Path:
    """The shared venv's ``python`` under ``prefix``."""
    return prefix / "venv" / "bin" / "python"


def pinned_packages(requirements: Path = REPO / "requirements.txt") -> list[str]:
    """The requirement lines of ``requirements`` (comments dropped) less :data:`DEFERRED`, plus :data:`HUB_PACKAGES`."""
    pins = []
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        name = line.split("==", 1)[0].split(">", 1)[0].split("<", 1)[0].strip().lower()
        if line and name not in DEFERRED:
            pins.append(line)
    return pins + list(HUB_PACKAGES)


def source_files(repo: Path = REPO) -> list[str]:
    """The repository's files to copy (paths relative to ``repo``): what ``git ls-files`` lists under :data:`COPIED`
    (tracked and untracked, not ignored) plus ``pyproject.toml``; without git, every file there but caches."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              "--", *COPIED], capture_output=True, check=True, timeout=60).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [str(p.relative_to(repo)) for d in COPIED for p in (repo / d).rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts]
    return sorted({f for f in files if (repo / f).is_file()} | {"pyproject.toml"})


def _hash(parts: list[bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def _stamp(prefix: Path) -> dict:
    try:
        return json.loads((prefix / ".installed.json").read_text())
    except (OSError, ValueError):
        return {}


def _write_stamp(prefix: Path, stamp: dict) -> None:
    write_json(prefix / ".installed.json", stamp, indent=1)


def setup_lock(prefix: Path) -> Path:
    """The set-up's lock for ``prefix``: a file of :data:`labkit.hub.rootlock.LOCK_DIR` (root's alone: no attendee
    can hold it, issue 63), named by the prefix's digest (one per shared install)."""
    return rootlock.LOCK_DIR / f"setup-{hashlib.sha256(str(prefix).encode()).hexdigest()[:10]}.lock"


def _run(args: list[str], what: str, timeout_s: float = 1800) -> None:
    """Run ``args``; on failure raise a LabkitError naming ``what`` with the end of its output."""
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise LabkitError(f"{what} failed ({' '.join(args[:4])} ...):\n{(done.stdout + done.stderr)[-3000:]}")


def _install_packages(prefix: Path, pins: list[str], say: Callable[[str], None]) -> None:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        raise LabkitError(f"The hub's venv is made from Debian's {SYSTEM_PYTHON}, which is missing: "
                          "apt-get install python3 python3-venv")
    if not venv_python(prefix).exists():
        say(f"making the shared venv {prefix / 'venv'} from {SYSTEM_PYTHON}")
        _run([SYSTEM_PYTHON, "-m", "venv", str(prefix / "venv")], "making the venv (apt-get install python3-venv?)")
        _write_stamp(prefix, {**_stamp(prefix), "venv": SYSTEM_PYTHON})  # made here: check_venv trusts it
    say(f"installing {len(pins)} pinned packages into {prefix / 'venv'} (a few minutes the first time)")
    _run([str(venv_python(prefix)), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
         "pip install into the shared venv")


def _copy_sources(prefix: Path, files: list[str], say: Callable[[str], None]) -> None:
    """Copy ``files`` of the repository into ``<prefix>/src`` (a fresh folder swapped in), put it on the venv's path
    and byte-compile it."""
    say(f"copying labkit, jvm/ and notebooks/ ({len(files)} files) into {prefix / 'src'}")
    fresh, old = prefix / "src.partial", prefix / "src.old"
    for folder in (fresh, old):
        shutil.rmtree(folder, ignore_errors=True)
    copy_files(REPO, fresh, files)
    compileall.compile_dir(str(fresh / "labkit"), quiet=1, workers=1,
                           ddir=str(prefix / "src" / "labkit"))  # tracebacks name the final path
    if (prefix / "src").exists():
        (prefix / "src").rename(old)
    fresh.rename(prefix / "src")
    shutil.rmtree(old, ignore_errors=True)
    site = subprocess.run([str(venv_python(prefix)), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(site) / "labkit-hub-src.pth").write_text(f"{prefix / 'src'}\n")


def copy_files(source: Path, target: Path, files: list[str]) -> None:
    """Copy each of ``files`` (paths relative to ``source``) to the same path under ``target``, keeping its execute
    bits but never a group or other write bit (the live view runs the copy as root)."""
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target / name)
        (target / name).chmod(stat.S_IMODE((source / name).stat().st_mode) & ~0o022)


def _fill_cache(prefix: Path, say: Callable[[str], None]) -> None:
    """Fill :func:`cache_dir` by ``python -m labkit.hub.cache`` of the shared venv (so the paths are the attendees'),
    with ``LABKIT_HOME`` the cache and no shared cache to read from."""
    cache = cache_dir(prefix)
    say(f"filling the shared cache {cache} (Kafka and Spark connector jars, compiled Java, class-data archives; two "
        "minutes the first time)")
    cache.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in (SHARED_CACHE_ENV, "PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(venv_python(prefix)), "-m", "labkit.hub.cache", str(cache)], capture_output=True,
                          text=True, timeout=1800, env={**env, "LABKIT_HOME": str(cache)}, cwd=prefix)
    if done.returncode != 0:
        raise LabkitError(f"filling the shared cache failed (a JDK 17+ with javac, and Maven Central the first "
                          f"time):\n{(done.stdout + done.stderr)[-3000:]}")


def install_shared(prefix: Path | str | None = None, say: Callable[[str], None] = print) -> Path:
    """Make or refresh the shared install under ``prefix`` (see :func:`shared_prefix`) as the module docstring says,
    and return the prefix. Progress lines go to ``say``. Must run as root (it writes outside the project).

    Raises:
        LabkitError: not root, the prefix is unsafe or not open to other users (:func:`shared_prefix`), a venv
            there was not made by the set-up (:func:`check_venv`), Debian's python3 or its venv module is
            missing, pip failed (its output quoted; PyPI must be reachable the first time), nftables is missing and
            cannot be installed, the shared cache cannot be filled, or another set-up held the lock too long.
    """
    if os.geteuid() != 0:
        raise LabkitError("The hub's set-up must run as root (it installs into a shared prefix and makes Unix users):"
                          " sudo make hub")
    prefix = shared_prefix(prefix)
    old_umask = os.umask(0o022)  # everything readable by every attendee
    try:
        prefix.mkdir(parents=True, exist_ok=True)
        prefix.chmod(0o755)
        with rootlock.held(setup_lock(prefix), LOCK_WAIT_S, f"The set-up's lock of {prefix}"):
            check_venv(prefix)
            stamp = _stamp(prefix)
            pins = pinned_packages()
            packages_hash = _hash([SYSTEM_PYTHON.encode(), *(p.encode() for p in pins)])
            if stamp.get("packages") != packages_hash or not venv_python(prefix).exists():
                _install_packages(prefix, pins, say)
                stamp = {**stamp, "packages": packages_hash, "sources": None}
                _write_stamp(prefix, stamp)
            files = source_files()
            sources_hash = _hash([f.encode() + b"\0" + (REPO / f).read_bytes() for f in files])
            if stamp.get("sources") != sources_hash or not (prefix / "src" / "labkit").is_dir():
                _copy_sources(prefix, files, say)
                stamp = {**stamp, "sources": sources_hash}
                _write_stamp(prefix, stamp)
            # the packages too: the Spark driver's archive holds pyspark's jars, as the venv installed them
            cache_hash = _hash([packages_hash.encode(), sources_hash.encode(), kafka_version().encode()])
            if stamp.get("cache") != cache_hash or not cache_dir(prefix).is_dir():
                _fill_cache(prefix, say)
                _write_stamp(prefix, {**stamp, "cache": cache_hash})
            firewall.install(say)
            # every attendee's JupyterLab reads the venv's overrides.json and page_config.json (merged: cheap to redo)
            write_lab_settings(prefix / "venv")
    finally:
        os.umask(old_umask)
    return prefix


def proxy_command(hub_dir: Path = HUB_DIR) -> Path:
    """The path of the ``configurable-http-proxy`` command :func:`install_proxy` installs."""
    return hub_dir / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"


def install_proxy(hub_dir: Path = HUB_DIR, say: Callable[[str], None] = print) -> Path:
    """Install :data:`PROXY_PACKAGE` with ``npm install --prefix <hub_dir>/proxy`` unless that version is there, and
    return the command's path. ``hub_dir`` is made mode 0700 (it also holds the hub's state: cookie secret, database).

    Raises:
        LabkitError: ``npm`` is missing (apt-get install npm) or the install failed (its output quoted).
    """
    hub_dir.mkdir(parents=True, exist_ok=True)
    hub_dir.chmod(0o700)
    package = hub_dir / "proxy" / "node_modules" / "configurable-http-proxy" / "package.json"
    wanted = PROXY_PACKAGE.rsplit("@", 1)[1]
    try:
        if json.loads(package.read_text())["version"] == wanted and proxy_command(hub_dir).exists():
            return proxy_command(hub_dir)
    except (OSError, ValueError, KeyError):
        pass
    npm = shutil.which("npm")
    if not npm:
        raise LabkitError("The hub's proxy (configurable-http-proxy) comes from npm, which is missing: "
                          "apt-get install npm (Node.js 18 or newer)")
    say(f"installing {PROXY_PACKAGE} into {hub_dir / 'proxy'} (npm)")
    with rootlock.held(hub_dir / ".proxy.lock", LOCK_WAIT_S, "The proxy's install lock"):
        _run([npm, "install", "--prefix", str(hub_dir / "proxy"), "--no-audit", "--no-fund", "--loglevel=error",
              PROXY_PACKAGE], "npm install of the hub's proxy")
    return proxy_command(hub_dir)


if __name__ == "__main__":
    import time

    t0 = time.monotonic()
    install_shared(sys.argv[1] if len(sys.argv) > 1 else None)
    install_proxy()
    print(f"set-up: {time.monotonic() - t0:.1f} s")
