"""Build the bundle, then set the lab up from it with no network at all.

The offline test of the bundle, outside ``make test`` (the archive is large and the run takes minutes): build it,
then set the lab up from it in a fresh copy of this checkout with no network at all, and run notebook 00.

    taskset -c 1 nice -n 5 .venv/bin/python -m labkit_dev.offline_check [--bundle ARCHIVE] [--keep] [--json FILE]

1. The bundle, as ``make bundle`` builds it (:func:`labkit.bundle.build.build`), unless ``--bundle`` names one.
2. A fresh folder: the checkout's files as git lists them, as they are on disk (tracked and new, not ignored: once
   committed, what ``git clone`` gives; no venv, no .bundle), its own ``HOME`` (no ``~/.m2``, no pip cache) and
   ``LABKIT_HOME`` (no jars).
3. Every later step runs in a network namespace of its own (``unshare -n``, util-linux; ``-rn`` when not root) with
   only the loopback interface up: the first checks that neither a name (pypi.org) nor an address (Maven Central's,
   looked up before) answers from there.
4. ``make setup BUNDLE=<archive>`` (the install: the checks, the venv, pip from the wheels alone), then ``make
   preflight jars``: the rest of ``make lab`` before it starts JupyterLab (the doctor, the jars, the class-data
   archives: a broker, Java participants and a Spark driver run).
5. Notebook 00 headless (``pytest --nbval-lax``, on the copy's own embedded broker), with ``LABKIT_CI=1``.
6. Maven never ran: the fresh ``HOME`` has no ``.m2``.

Prints each step's wall time and the bundle's size, and with ``--json`` writes them to that file once every step
passed (``--json bench/results/bundle.json``: :data:`RESULTS`); exit 0 only if every step passed. Leaves nothing
running (each step's processes end with it; the notebook run stops its broker), and removes the folder unless
``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/00_tour.ipynb"
#: The bundle's measured size and this check's figures, as the last passed run wrote them (``--json``): the one place
#: of that size (the README and the run-sheet give it; tests/test_figures.py checks them against this file).
RESULTS = ROOT / "bench" / "results" / "bundle.json"
#: The longest any one step may take (s): the install unpacks and installs the whole bundle, the jars step starts a
#: broker, participants and Spark, the notebook runs about a minute; all on one CPU, on a machine twice as slow.
STEP_TIMEOUT_S = 1800
#: Fails unless no host given (``host:port``) answers: a name (DNS) and an address (no DNS needed to try it).
PROBE = """
import socket, sys
for host in sys.argv[1:]:
    try:
        socket.create_connection((host, 443), timeout=5).close()
    except OSError as exc:
        print(f"{host}:443: {exc}")
    else:
        sys.exit(f"{host}:443 answered: the namespace has a network")
"""


def offline(cmd: list[str]) -> list[str]:
    """``cmd`` run in a network namespace of its own with only loopback up (a broker listens on 127.0.0.1)."""
    unshare = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    return [*unshare, "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]


def fresh_copy(folder: Path) -> Path:
    """Copy the checkout's files (``git ls-files``: tracked and untracked, not ignored) into ``folder/labkit``."""
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True, timeout=60).stdout.decode().split("\0")
    dest = folder / "labkit"
    for name in filter(None, names):
        if (ROOT / name).is_file():  # a tracked file deleted in the tree is not copied
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def step(name: str, cmd: list[str], cwd: Path, env: dict[str, str], figures: dict) -> str:
    """Run ``cmd`` with no network (:func:`offline`, at most :data:`STEP_TIMEOUT_S`), record its wall time in
    ``figures[name]`` and return its output.

    Raises:
        SystemExit: it failed or ran past the deadline (its output is printed; past the deadline, every process it
            started is killed first).
    """
    print(f"== {name}: {shlex.join(cmd)[:160]}", flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(offline(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        output, _ = proc.communicate(timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(tree, timeout=30)
        output, _ = proc.communicate(timeout=30)
    figures[name] = round(time.monotonic() - start, 1)
    print(output.rstrip()[-3000:], flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"offline check FAILED at {name} (exit {proc.returncode}) after {figures[name]} s"
                         + (f" (past its {STEP_TIMEOUT_S} s deadline)" if figures[name] >= STEP_TIMEOUT_S else ""))
    return output


def main(argv: list[str]) -> int:
    """Run the check (module docstring); print the figures."""
    parser = argparse.ArgumentParser(prog="python -m labkit_dev.offline_check", description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, help="an archive `make bundle` wrote (default: build one into dist/)")
    parser.add_argument("--keep", action="store_true", help="keep the fresh folder (its path is printed)")
    parser.add_argument("--json", type=Path, help=f"once every step passed, write the figures to this file (the "
                        f"repository's: {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    figures: dict = {}
    if args.bundle is None:
        from labkit.bundle.build import build

        start = time.monotonic()
        args.bundle, _ = build(ROOT / "dist")
        figures["build s"] = round(time.monotonic() - start, 1)
    bundle = args.bundle.resolve()
    figures["bundle MiB"] = round(bundle.stat().st_size / 2**20)
    folder = Path(tempfile.mkdtemp(prefix="labkit-offline-"))
    try:
        checkout = fresh_copy(folder)
        (folder / "home").mkdir()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LABKIT_", "PIP_", "SPARK_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env |= {"HOME": str(folder / "home"), "LABKIT_HOME": str(folder / "labkit-home"), "LABKIT_CI": "1"}
        print(f"Fresh folder: {folder} (checkout copy, HOME, LABKIT_HOME); bundle {bundle} "
              f"({figures['bundle MiB']} MiB)", flush=True)
        maven_central = socket.gethostbyname("repo1.maven.org")  # asked here, with the network
        step("no network", [sys.executable, "-c", PROBE, "pypi.org", maven_central], checkout, env, figures)
        step("install s", ["make", "setup", f"BUNDLE={bundle}"], checkout, env, figures)
        step("preflight+jars s", ["make", "preflight", "jars"], checkout, env, figures)
        out = step("notebook 00 s", [".venv/bin/python", "-m", "pytest", "-p", "no:cacheprovider", "-q",
                                     "--nbval-lax", "--nbval-cell-timeout=600", NOTEBOOK], checkout, env, figures)
        figures["notebook 00"] = out.strip().splitlines()[-1]
        if (folder / "home" / ".m2").exists():
            raise SystemExit(f"offline check FAILED: Maven ran ({folder / 'home' / '.m2'} exists)")
        figures["maven ran"] = False
        print("offline check passed: " + ", ".join(f"{k}: {v}" for k, v in figures.items()))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"archive": bundle.name, "bytes": bundle.stat().st_size,
                                             "figures": figures}, indent=1) + "\n")
        return 0
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
