"""Memory per attendee on the workshop hub (issue 38): the peak proportional set size of every process of one attendee
while they run each notebook in JupyterLab, measured on a real hub.

It starts a hub on free ports with its own state (:func:`labkit_dev.drive.running_hub`, as tests/test_hub.py does),
signs one attendee in through headless Chromium, and for each notebook opens it in their JupyterLab, runs Run > Run
All Cells and waits (up to ``--deadline`` s) until no cell runs or waits and the kernel is idle, then the last code
cell must have run. Meanwhile, every 2 s, it sums the PSS (``psutil`` ``memory_full_info().pss``: a page shared by n
processes counts 1/n in each, so shared pages count once) of every process of the attendee's uid, grouped by kind
from the command line (:class:`labkit_dev.memory.Sampler`, :data:`labkit_dev.memory.KINDS`). Between notebooks it
shuts the kernel down (Kernel > Shut Down All Kernels) and waits for its process to end, and opens the next with
JupyterLab's ``?reset`` (no earlier tab restored), so each notebook is measured as a learner running it first after
the previous one: same JupyterLab server and broker (the broker keeps the previous notebooks' topics), a fresh kernel.
The idle figure is the lab with no kernel (JupyterLab and the broker) after the first notebook (which starts the
broker: labkit.hub.singleuser). Each notebook's CPU seconds (all the attendee's processes, from opening it to the end
of its run) are given too, for sizing a room's cores. The instructor's live view, open in a page of its own, must
then show the notebook's claims as held (its ``C✓`` mark, read from the page): a notebook whose claims held but whose
report never reached the live view is a failed run too (its row's ``live_view_error``), since the instructor would
have been told otherwise.

Goals: <= 1 GiB (1024 MiB) at the peak of every notebook but 04 and 09 (issue 38), <= 1.5 GiB for 04 (issue 38) and
09 (issue 51: a cluster of its own, four JVMs).

Run as root, with Debian's chromium: ``sudo nice -n 5 .venv/bin/python bench/hub.py [--notebooks 00 02]
[--json labkit/doctor/hub-memory.json]`` (the one copy of the hub's figures: the doctor's memory check for the hub
reads it, :data:`labkit.doctor.needs.HUB_MEASURED`, and tests/test_figures.py checks the run-sheet's against it;
``make lab``'s are ``bench/lab_memory.py``'s). Default: 00 01 02 03 05 06 07 08 09, and 04 when the shared venv has pyspark.
Prints a table, then the figures as one JSON line (also written to ``--json``); exits 1 if a notebook's run failed.
Stopped with SIGTERM (or Ctrl-C in a terminal), it still stops the hub and removes the attendee's Unix user, home and
processes.
"""

import argparse
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_until
from labkit.hub import names, users
from labkit_dev import drive
from labkit_dev.browser import chromium, missing, new_page
from labkit_dev.memory import Sampler, pss_by_kind

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: What a claims cell prints once its assertions held (a notebook's last: "All claims hold on the real broker.", a
#: part's: "Sink A's claims hold: ...").
CLAIMS_HOLD = re.compile(r"[Cc]laims hold")
DEFAULT = ("00", "01", "02", "03", "05", "06", "07", "08", "09")
GOAL_MIB, GOAL_LARGE_MIB = 1024, 1536
#: The notebooks held to GOAL_LARGE_MIB: 04 (Spark's driver and cluster), 09 (its own controller and three brokers).
LARGE = ("04", "09")
LAB_START_S = 420  # sign-in to the file browser (JupyterLab; the broker starts with a notebook), on a loaded machine
KERNEL_END_S = 120  # Shut Down All Kernels until the kernel's process has ended


def attendee_pss(uid: int) -> dict[str, float]:
    """PSS (MiB) of ``uid``'s processes summed per kind (:func:`labkit_dev.memory.pss_by_kind`), at this moment."""
    return pss_by_kind(users.processes_of(uid))


def cpu_s(uid: int) -> float:
    """CPU seconds (user and system) of ``uid``'s live processes and of the children they reaped (a kernel reaps the
    participants it started, so their time counts once they end)."""
    total = 0.0
    for proc in users.processes_of(uid):
        try:
            t = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def notebook_file(number: str) -> str:
    """The file name of notebook ``number`` ("00".."09").

    Raises:
        SystemExit: no such notebook (the ones there listed).
    """
    found = sorted(NOTEBOOKS.glob(f"{number}_*.ipynb"))
    if len(found) != 1:
        sys.exit(f"no notebook {number!r}: choose among {sorted(p.name[:2] for p in NOTEBOOKS.glob('[0-9]*.ipynb'))}")
    return found[0].name


def has_pyspark(prefix: str) -> bool:
    """Whether the hub's shared venv (under ``prefix``) can import pyspark."""
    python = os.path.join(prefix, "venv", "bin", "python")
    check = "import importlib.util, sys; sys.exit(not importlib.util.find_spec('pyspark'))"
    return subprocess.run([python, "-c", check], timeout=60).returncode == 0


#: How long the live view may take to show a notebook's claims once its claims line was printed (s): the report is
#: sent from the kernel at once (labkit.hub.report) and the page refreshes itself every few seconds.
LIVE_VIEW_S = 60


def live_view_error(instructor, name: str, notebook: str) -> str | None:
    """None if the live view open on ``instructor`` shows notebook ``notebook``'s claims as held for ``name`` (its
    ``C✓`` mark) within :data:`LIVE_VIEW_S`; else what it shows instead."""
    try:
        drive.wait_for_live_marks(instructor, name, "C✓$", notebook=int(notebook[:2]), timeout_s=LIVE_VIEW_S)
    except LabkitError:
        return (f"the claims held, but the live view shows {drive.live_marks(instructor, name, int(notebook[:2]))!r} "
                f"for {name} in {notebook[:2]}, not C✓, after {LIVE_VIEW_S} s")
    return None


def measure(page, hub: dict, name: str, uid: int, sampler: Sampler, notebook: str, deadline_s: float,
            instructor=None) -> dict:
    """Open, Run All and wait for ``notebook``; then shut its kernel down. Returns its row: peaks (:meth:`Sampler.take`,
    from opening to the end of the run), ``wall_s`` (Run All to the end), ``cpu_s`` (CPU seconds of ``uid``'s
    processes from opening to the end, :func:`cpu_s`), ``error`` (None only if every code cell ran, none raised
    (:func:`labkit_dev.drive.wait_for_run`) and a claims line was printed: else why the run failed), ``claims_line``
    (the last output that says the claims hold, as printed), ``last_output`` (the end of its last output) and ``left``
    (the kinds of ``uid``'s processes once the kernel ended, besides JupyterLab and the broker), and, with the live
    view open on ``instructor``, ``live_view_error`` (:func:`live_view_error`, once the claims held)."""
    row: dict = {"notebook": notebook}
    sampler.take()
    cpu_before = cpu_s(uid)
    started = None
    try:
        drive.open_notebook(page, hub["url"], name, notebook, reset=True)
        drive.run_all(page, name)
        started = time.monotonic()
        row["error"] = drive.wait_for_run(page, name, deadline_s)
        outputs = page.locator(".jp-OutputArea-output")
        row["last_output"] = outputs.last.inner_text()[-160:].strip() if outputs.count() else ""
        claims = outputs.filter(has_text=CLAIMS_HOLD)
        row["claims_line"] = claims.last.inner_text().strip()[-300:] if claims.count() else None
        if row["error"] is None and row["claims_line"] is None:
            row["error"] = "every cell ran, but no output says the claims hold"
        if row["error"] is None and instructor is not None:
            row["live_view_error"] = live_view_error(instructor, name, notebook)
    except Exception as exc:  # noqa: BLE001 (a notebook that fails is reported, and the next one runs)
        row["error"] = f"{type(exc).__name__}: {str(exc)[:800]}"
    row["wall_s"] = round(time.monotonic() - started, 1) if started else None
    row["cpu_s"] = round(cpu_s(uid) - cpu_before, 1)
    row.update(sampler.take())
    try:
        drive.shut_down_kernels(page)
    except Exception as exc:  # noqa: BLE001
        row["shutdown_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    if not wait_until(lambda: "kernel" not in attendee_pss(uid), KERNEL_END_S, 1.0):
        row["shutdown_error"] = f"a kernel was still running {KERNEL_END_S} s after Shut Down All Kernels"
    row["left"] = sorted(set(attendee_pss(uid)) - {"jupyterlab", "broker"})
    return row


def prepare_run(script: str) -> None:
    """What a bench running a real hub needs before it starts: root and Debian's chromium (else exit naming the fix),
    and SIGTERM turned into an exit, so that the hub and its attendees are still removed (``running_hub``'s cleanup)."""
    if os.geteuid() != 0:
        sys.exit(f"{script} makes Unix users and runs JupyterHub as root: run it with sudo")
    if (why := missing()):
        sys.exit(f"{script} signs in through a browser: it {why}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped (SIGTERM): the hub and its attendees are removed"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", nargs="+", help="numbers, e.g. 00 02 (default: every notebook the hub runs)")
    parser.add_argument("--deadline", type=float, default=1200, help="seconds a notebook may run (default 1200)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    prepare_run("bench/hub.py")
    folder = Path(tempfile.mkdtemp(prefix="labkit-bench-hub-"))
    try:
        with drive.running_hub(folder, 1) as hub:
            numbers = args.notebooks or [*DEFAULT[:4], *(["04"] if has_pyspark(hub["prefix"]) else []), *DEFAULT[4:]]
            files = [notebook_file(n) for n in numbers]
            print(f"hub set-up and start {hub['setup_s']:.0f} s; notebooks {' '.join(numbers)}", flush=True)
            result = run_attendee(hub, files, args.deadline)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    failed = [row["notebook"] for row in result["notebooks"] if row.get("error") or row.get("live_view_error")]
    if failed:  # a run that raised is a failed run: its figures are no notebook's
        print(f"FAILED: {', '.join(failed)} (their rows say why)", file=sys.stderr)
    return 1 if failed else 0


def run_attendee(hub: dict, files: list[str], deadline_s: float) -> dict:
    """Sign the hub's first attendee in, measure the idle lab, then each notebook of ``files`` in turn."""
    name = hub["names"][0]
    with chromium() as page:
        page.on("dialog", lambda dialog: dialog.accept())  # leaving a run notebook unsaved: JupyterLab asks
        submitted = drive.join(page, hub, name)
        drive.wait_for_lab(page, hub, name, LAB_START_S)
        sign_in_s = time.monotonic() - submitted
        uid = pwd.getpwnam(names.unix_name(name)).pw_uid
        instructor = new_page(page.context.browser)  # cookies of its own: the instructor's live view, beside
        drive.sign_in(instructor, hub["url"], hub["admin"], hub["admin_password"], next_path="/services/liveview/")
        instructor.wait_for_selector(f"#live th.who:text-is('{name}')", timeout=60_000)
        sampler = Sampler(lambda: users.processes_of(uid))
        try:
            rows, idle = sampler.in_turn(files, lambda notebook: measure(page, hub, name, uid, sampler, notebook,
                                                                          deadline_s, instructor),
                                         say=lambda text: print(text, flush=True), line=line)
        finally:
            sampler.close()
    return {"conditions": {"cpus": len(psutil.Process().cpu_affinity()), "machine_cpus": os.cpu_count(),
                           "memory_mib": round(psutil.virtual_memory().total / 2**20),
                           "load_1min": round(os.getloadavg()[0], 2), "sample_s": sampler.interval_s,
                           "sign_in_s": round(sign_in_s, 1), "order": "in turn, one attendee, kernel shut down "
                           "between notebooks, same JupyterLab server and broker"},
            "idle": idle, "notebooks": rows}


def line(row: dict) -> str:
    goal = GOAL_LARGE_MIB if row["notebook"][:2] in LARGE else GOAL_MIB
    peak = row["peak_mib"]
    why = row.get("error") or row.get("live_view_error")
    verdict = "FAILED: " + why.splitlines()[0][:200] if why else (
        f"{'within' if peak is not None and peak <= goal else 'OVER'} the {goal} MiB goal")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(row["peak_by_kind"].items(), key=lambda kv: -kv[1]))
    wall = f"{row['wall_s']:.0f} s" if row.get("wall_s") is not None else "-"
    return (f"{row['notebook'][:2]}: peak {peak} MiB PSS, wall {wall}, CPU {row['cpu_s']:.0f} s; peak per kind (MiB): "
            f"{kinds}; {verdict}")


def report(result: dict) -> None:
    idle = result["idle"]
    print(f"idle (JupyterLab and broker, no kernel): {idle['peak_mib']} MiB PSS ({idle['at_peak']})")
    for row in result["notebooks"]:
        print(line(row))
        for extra in ("shutdown_error", "left"):
            if row.get(extra):
                print(f"    {extra}: {row[extra]}")
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
