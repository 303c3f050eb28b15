"""Memory of the lab `make lab` runs (issue 65): the peak proportional set size of all the lab's processes while each
notebook runs whole in a learner's kernel.

It starts the real lab, ``python -m labkit up`` (:mod:`labkit.lab.server`: the lab broker's daemon and JupyterLab, on
ports of their own) in a temporary ``LABKIT_HOME`` (the jars and class-data archives read from the usual cache through
``LABKIT_SHARED_CACHE``), and runs each notebook's working copy (``$LABKIT_HOME/work``, what JupyterLab serves) whole
with nbclient in a fresh kernel started with the lab's environment and in that folder, as JupyterLab starts a learner's:
the kernel finds the lab broker through its state file (:func:`labkit.connect`; no ``LABKIT_BOOTSTRAP``, no
``LABKIT_CI``). A run that raised, or that printed no claims line (``bench/hub.py``'s :data:`hub.CLAIMS_HOLD`), is a
failed run: its row has an ``error`` and no notebook figure comes of it (:func:`labkit.doctor.needs.peaks_of`).
Meanwhile, every 2 s, it sums the PSS of every process of the lab (:class:`labkit_dev.memory.Sampler`): each process
whose environment has this ``LABKIT_HOME`` (the broker daemon and its JVM, JupyterLab, the kernel, the participants,
clusters and Spark JVMs the kernel starts: they inherit it), grouped by kind (:data:`labkit_dev.memory.KINDS`).
Notebooks run in turn, each in a new kernel after the previous one's ended, on the same lab (the broker keeps the
earlier notebooks' topics). The idle figure is the lab with no kernel (JupyterLab and the broker) after the first
notebook. Each notebook's CPU seconds (the lab's processes from the kernel's start to its end) are given too.

Unlike a learner's, no browser has the notebook open (JupyterLab serves no page, keeps no widget state): the figures
are the lab's processes, not the browser's. Measured once apart: with notebook 00 open in Chromium, JupyterLab's PSS
was 98 MiB against 76 MiB with no page, so a learner's lab takes about 22 MiB more than these figures.

Run: ``nice -n 5 .venv/bin/python bench/lab_memory.py [--notebooks 00 02] [--json labkit/doctor/lab-memory.json]``
(the one copy of these figures: ``make doctor`` judges a laptop by it, :data:`labkit.doctor.needs.LAB_MEASURED`).
Default: every notebook, 00 to 09 (04 when the venv has pyspark). Prints a table, then the figures as one JSON line
(also written to ``--json``); exits 1 if a notebook's run failed. Stopped with SIGTERM (or Ctrl-C), it still stops the
lab and removes its folder.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

from hub import CLAIMS_HOLD, line, notebook_file  # bench/hub.py: the same claims check, notebook files and table line
from labkit.broker.runtime import SHARED_CACHE_ENV, labkit_home
from labkit.core.waiting import wait_until
from labkit_dev.memory import Sampler, pss_by_kind

REPO = Path(__file__).resolve().parents[1]
CELL_S = 600  # a cell's deadline (nbclient's timeout); the longest (04's pipeline, 09's cluster) take under 200 s
KERNEL_START_S = 120  # nbclient's deadline for the kernel to answer
LAB_S = 300  # `python -m labkit up` and `down`, each
KERNEL_END_S = 120  # a notebook's kernel ended until its process is gone


def lab_env(home: Path) -> dict[str, str]:
    """The environment of the lab and its kernels: this one with ``LABKIT_HOME=home``, the usual cache shared (read
    only) for the jars and archives, and neither ``LABKIT_BOOTSTRAP`` nor ``LABKIT_CI`` (a learner's lab)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BOOTSTRAP", "LABKIT_CI", "LABKIT_PREDICTIONS")}
    env.setdefault(SHARED_CACHE_ENV, str(labkit_home()))
    env["LABKIT_HOME"] = str(home)
    return env


def lab_processes(home: Path) -> list[psutil.Process]:
    """Every live process of this user whose environment has ``LABKIT_HOME=home`` (zombies left out)."""
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        try:
            if (proc.info["uids"] is None or proc.info["uids"].effective != os.geteuid()
                    or proc.info["status"] == psutil.STATUS_ZOMBIE):
                continue
            if proc.environ().get("LABKIT_HOME") == str(home):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def cpu_s(processes: list[psutil.Process]) -> float:
    """CPU seconds (user and system) of ``processes`` and of the children they reaped, and of this process's reaped
    children (the kernels nbclient started, and what they reaped)."""
    mine = os.times()
    total = mine.children_user + mine.children_system
    for proc in processes:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def outputs_text(nb) -> list[str]:
    """The text of every output of ``nb``'s code cells, in order (streams, and results' and displays' text/plain)."""
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = out.get("text") if out.get("output_type") == "stream" else out.get("data", {}).get("text/plain")
            if text:
                texts.append("".join(text) if isinstance(text, list) else text)
    return texts


def measure(work: Path, env: dict[str, str], home: Path, sampler: Sampler, notebook: str) -> dict:
    """Run ``notebook`` (its working copy in ``work``) whole in a new kernel, and wait for that kernel's process to
    end. Returns its row: peaks (:meth:`Sampler.take`, from the kernel's start to its end), ``wall_s``, ``cpu_s``,
    ``error`` (None only if every code cell ran, none raised and a claims line was printed), ``claims_line``,
    ``last_output`` and ``left`` (the kinds of the lab's processes once the kernel ended, besides JupyterLab and the
    broker)."""
    row: dict = {"notebook": notebook}
    nb = nbformat.read(work / notebook, as_version=4)
    client = NotebookClient(nb, timeout=CELL_S, startup_timeout=KERNEL_START_S, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}})
    sampler.take()
    cpu_before, started = cpu_s(lab_processes(home)), time.monotonic()
    try:
        client.execute(env=env)
        row["error"] = None
    except Exception as exc:  # noqa: BLE001 (a notebook that fails is reported, and the next one runs)
        row["error"] = f"{type(exc).__name__}: {str(exc)[-800:]}"
    row["wall_s"] = round(time.monotonic() - started, 1)
    if not wait_until(lambda: "kernel" not in pss_by_kind(lab_processes(home)), KERNEL_END_S, 1.0):
        row["shutdown_error"] = f"a kernel was still running {KERNEL_END_S} s after nbclient shut it down"
    row["cpu_s"] = round(cpu_s(lab_processes(home)) - cpu_before, 1)
    texts = outputs_text(nb)
    row["last_output"] = texts[-1][-160:].strip() if texts else ""
    claims = [t for t in texts if CLAIMS_HOLD.search(t)]
    row["claims_line"] = claims[-1].strip()[-300:] if claims else None
    if row["error"] is None and row["claims_line"] is None:
        row["error"] = "every cell ran, but no output says the claims hold"
    row.update(sampler.take())
    row["left"] = sorted(set(pss_by_kind(lab_processes(home))) - {"jupyterlab", "broker"})
    return row


def has_pyspark() -> bool:
    """Whether this venv can import pyspark (notebook 04's driver)."""
    import importlib.util

    return importlib.util.find_spec("pyspark") is not None


def run_lab(numbers: list[str], home: Path) -> dict:
    """Start the lab in ``home``, measure it idle and each notebook of ``numbers`` in turn; the lab is stopped after."""
    env = lab_env(home)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    up = subprocess.run([sys.executable, "-m", "labkit", "up"], env=env, cwd=REPO, capture_output=True, text=True,
                        timeout=LAB_S)
    if up.returncode:
        sys.exit(f"python -m labkit up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}")
    up_s = time.monotonic() - started
    print(f"lab up in {up_s:.0f} s:\n{up.stdout}", flush=True)
    work = home / "work"
    sampler = Sampler(lambda: lab_processes(home))
    try:
        rows, idle = sampler.in_turn([notebook_file(n) for n in numbers],
                                     lambda notebook: measure(work, env, home, sampler, notebook),
                                     say=lambda text: print(text, flush=True), line=line)
    finally:
        sampler.close()
        subprocess.run([sys.executable, "-m", "labkit", "down"], env=env, cwd=REPO, timeout=LAB_S)
        for proc in lab_processes(home):  # what the lab left (none expected): this run's own processes only
            try:
                proc.kill()
            except psutil.Error:
                pass
    return {"conditions": {"cpus": len(psutil.Process().cpu_affinity()), "machine_cpus": os.cpu_count(),
                           "memory_mib": round(psutil.virtual_memory().total / 2**20),
                           "load_1min_before": round(load_before, 2), "load_1min": round(os.getloadavg()[0], 2),
                           "sample_s": sampler.interval_s, "lab_up_s": round(up_s, 1),
                           "order": "make lab's lab (python -m labkit up), one kernel per notebook in turn (nbclient, "
                                    "the lab's environment, no browser), kernel ended between notebooks, same "
                                    "JupyterLab server and broker"},
            "idle": idle, "notebooks": rows}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", nargs="+", help="numbers, e.g. 00 02 (default: every notebook)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped (SIGTERM): the lab is stopped and its folder removed"))
    numbers = args.notebooks or [f"{n:02d}" for n in range(10) if n != 4 or has_pyspark()]
    home = Path(tempfile.mkdtemp(prefix="labkit-bench-lab-"))
    try:
        result = run_lab(numbers, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    idle = result["idle"]
    print(f"idle (JupyterLab and broker, no kernel): {idle['peak_mib']} MiB PSS ({idle['at_peak']})")
    for row in result["notebooks"]:
        print(line(row))
        for extra in ("error", "shutdown_error", "left"):
            if row.get(extra):
                print(f"    {extra}: {row[extra]}")
    print(json.dumps(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    failed = [row["notebook"] for row in result["notebooks"] if row.get("error")]
    if failed:  # a run that raised is a failed run: its figures are no notebook's
        print(f"FAILED: {', '.join(failed)} (their rows say why)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
