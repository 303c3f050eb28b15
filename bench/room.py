"""A room rehearsal (issues 49 and 63): a real hub, ``--attendees`` attendees signing in over ``--spread`` seconds, all
running notebooks 00 then 02 (Run All) at the same moment, while one more attendee makes every attack of issue 63 at
once from their own lab (bench/attacks.py): the figures a room's server is sized from, and whether a room survives
its worst attendee.

First one attendee runs the notebooks alone (the baseline, same hub); then the room signs in (each submit ``spread /
attendees`` seconds after the last), the instructor opens the live view (it stays open: its probe of each broker is
what the fake broker answers), and the misbehaving attendee starts the attacks that last, as code in their lab
(:func:`labkit.hub.sandbox.enter_command`, their uid, namespace and groups): the hub's lock files tried every second,
a SysV shared memory segment and a message queue, a fake broker named in their broker state file answering 2 GiB or a
trickle, /tmp, /dev/shm and /run/lock filled, a process that drops ``LABKIT_HUB_STATE`` and leaves its session, the
memory hog past their limit again and again and a CPU burn on every core. Then every room attendee opens 00 and runs it
whole, all at once, then 02 the same way, while the attendee makes the one-shot attacks: a scan of the machine's ports
30000-32767 (a host service listening on all addresses among them), the other attendees' addresses and ports,
``/proc`` of others, and, through the hub's pages from this machine, 30 sign-ins under 1 MiB names, a 73-byte
password, 35 wrong passwords under the instructor's name and 10 under another attendee's, each followed by the right
one, 35 failed first sign-ins each with a new forged ``X-Real-IP`` and ``X-Forwarded-For``, and last a fork bomb held
at their task limit for 30 s. The instructor signs in with their right password after the sign-in attacks and after
each of the room's Run Alls. Once the room ran, the lasting attacks give their results, the instructor stops the
attendee's lab through the hub's API, and what is left of them on the machine is looked at (processes, groups, SysV
objects, files in the shared folders).

For each attendee it reports the sign-in to a ready lab (the file browser shown; goal: under 30 s), each notebook's
Run All time against the baseline's, and whether its claims line was printed (the run failed otherwise:
:func:`labkit_dev.drive.wait_for_run` and bench/hub.py's claims check); for the machine, the peak memory used
(``psutil.virtual_memory``, every 2 s) and the OOM kills in each attendee's group (the hog's only, if the limits hold);
for each attack its outcome as observed: ``refused``, ``bounded`` or ``cleaned`` (bench/attacks.py's module
docstring), with what was seen. The attendees' browser (one Chromium, root's, on this machine) takes CPU that a room's
laptops would: each sign-in's server part (JupyterHub's log) is given beside it.

Run as root, with Debian's chromium, alone on the machine's heavy lock: ``flock /tmp/heavy.lock .venv/bin/python
bench/room.py [--attendees 8] [--spread 60] [--notebooks 00 02] [--json bench/results/room.json]``. Prints a table,
each attack's outcome and one JSON line, and writes the JSON to ``--json``; exits 1 if any notebook run failed, a
sign-in took over 30 s, an OOM kill hit anyone but the misbehaving attendee, an attack got through or was not made, or
the instructor's right password was refused. Stopped with SIGTERM, it still stops the hub and removes its attendees.
How long: 8 attendees with 00 and 02 took 1,082 s wall on this 2-core machine (hub set-up, the baseline 125 s, the
room's 00 about 60 s and 02 about 380 s, the attacks held 240 s, the fork bomb 30 s); 1 attendee with 00, 164 s. A
page whose cell stays queued after its kernel's websocket was dropped for an unanswered ping waits out ``--deadline``:
2,316 s (bench/results/room.json; the first rehearsal's figures in room-run1.json).
"""

import argparse
import json
import os
import pwd
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import attacks  # bench/attacks.py: the misbehaving attendee's attacks
from hub import CLAIMS_HOLD, notebook_file, prepare_run  # bench/hub.py: the same claims check and checks

from labkit.core.errors import LabkitError
from labkit.hub import names, sandbox
from labkit_dev import drive
from labkit_dev.browser import chromium, new_page

#: Seconds a sign-in may take to a ready lab (issue 49's goal) and that the bench waits at most.
SIGN_IN_GOAL_S, SIGN_IN_WAIT_S = 30.0, 600.0
#: Seconds the one-shot attacks may still take once the room's notebooks ran.
ONE_SHOTS_S = 600.0
#: Seconds a run still going at the room's deadline is looked at once more before it counts as failed (its check reads
#: the page twice, 2 s apart: :func:`labkit_dev.drive.wait_for_run`).
LAST_LOOK_S = 10.0
#: What Jupyter Server logs when it closes a page's websocket (a kernel's channels among them) whose ping went
#: unanswered (``WebSocketMixin.send_ping``): the page reconnects and the server replays what it buffered meanwhile.
PING_TIMEOUT = "WebSocket ping timeout after"
class MemorySampler(threading.Thread):
    """The machine's peak memory in use (MiB, ``psutil.virtual_memory().used``), sampled every 2 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_mib, self.stop = 0.0, threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stop.wait(2.0):
            self.peak_mib = max(self.peak_mib, psutil.virtual_memory().used / 2**20)


def run_room(pages: dict, hub: dict, room: list[str], notebook: str, deadline_s: float,
             evidence: Path) -> dict[str, dict]:
    """Every attendee of ``room`` opens ``notebook``, then each presses Run All, one right after the other; each run's
    end is seen when it happens (every page looked at every 2 s: no cell running or queued, the kernel idle), then
    checked (:func:`finish`; a failure's whole error and a screenshot go to ``evidence``). Returns
    ``{name: {"wall_s", "error", "claims"}}``."""
    for name in room:
        drive.open_notebook(pages[name], hub["url"], name, notebook, reset=True)
    started = {}
    for name in room:
        drive.run_all(pages[name], name)
        started[name] = time.monotonic()
    ended: dict[str, float] = {}
    closes = min(started.values()) + deadline_s
    while len(ended) < len(room) and time.monotonic() < closes:
        for name in [n for n in room if n not in ended]:
            pending, idle, _ = drive.run_state(pages[name])
            if idle and not pending:
                ended[name] = time.monotonic()
        time.sleep(2.0)
    # a run seen ended is checked at once; one still running at the room's deadline gets only a last look
    return {name: finish(pages[name], name, Path(notebook).stem[:2],
                         ended.get(name, time.monotonic()) - started[name],
                         max(closes - time.monotonic(), LAST_LOOK_S), evidence)
            for name in room}


def finish(page, name: str, notebook: str, wall_s: float, timeout_s: float, evidence: Path) -> dict:
    """Check ``name``'s run of notebook ``notebook`` (its number) on ``page`` (:func:`labkit_dev.drive.wait_for_run`: it
    raised nowhere) and its claims line, then shut its kernel down: ``{"wall_s", "error", "claims"}`` (error None only
    if every cell ran, none raised and the claims line was printed). A check or shutdown that raised is kept whole
    (:func:`keep_evidence`): the row's error begins with it and names the files. ``timeout_s``: how long the check
    waits for a run still going."""
    run = f"{name}-{notebook}"
    try:
        error = drive.wait_for_run(page, name, timeout_s)
        claims = page.locator(".jp-OutputArea-output").filter(has_text=CLAIMS_HOLD).count() > 0
        error = error or (None if claims else "every cell ran, but no output says the claims hold")
    except Exception as exc:  # noqa: BLE001 (a failed run is reported as one, and the others are still read)
        error, claims = keep_evidence(page, f"{run}-check", exc, evidence), False
    try:
        drive.shut_down_kernels(page)
    except Exception as exc:  # noqa: BLE001 (e.g. JupyterLab's "File Changed" dialog over the menu: a failed run)
        error = error or "the kernel could not be shut down: " + keep_evidence(page, f"{run}-shutdown", exc, evidence)
    row = {"wall_s": round(wall_s, 1), "error": error, "claims": claims}
    print(f"{run}: {json.dumps(row)}", flush=True)  # as it comes: a later failure of the bench loses nothing
    return row


def keep_evidence(page, what: str, exc: Exception, evidence: Path) -> str:
    """Write ``exc`` whole (Playwright's call log included) to ``<evidence>/<what>.txt`` and the page as it is to
    ``<what>.png``; returns the error's first 300 characters and the two files' paths."""
    text = f"{type(exc).__name__}: {exc}"
    (evidence / f"{what}.txt").write_text(text + "\n")
    try:
        page.screenshot(path=str(evidence / f"{what}.png"), full_page=True)
        shot = str(evidence / f"{what}.png")
    except Exception as shot_exc:  # noqa: BLE001 (a page that is gone: say so, keep the text)
        shot = f"none ({type(shot_exc).__name__})"
    return f"{text[:300]} (whole: {evidence / f'{what}.txt'}; screenshot: {shot})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attendees", type=int, default=8, help="attendees running the notebooks (default 8)")
    parser.add_argument("--spread", type=float, default=60.0, help="seconds over which they sign in (default 60)")
    parser.add_argument("--deadline", type=float, default=1800, help="seconds a notebook may run (default 1800)")
    parser.add_argument("--notebooks", nargs="+", default=["00", "02"], help="numbers (default 00 02)")
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "room.json",
                        help="where the figures go (default bench/results/room.json)")
    args = parser.parse_args(argv)
    prepare_run("bench/room.py")
    notebooks = [notebook_file(n) for n in args.notebooks]
    folder = Path(tempfile.mkdtemp(prefix="labkit-bench-room-"))
    evidence = Path(tempfile.mkdtemp(prefix="labkit-bench-room-failures-"))  # kept: what a failed run left
    memory, rogue, started = MemorySampler(), None, time.monotonic()
    try:
        with drive.running_hub(folder, args.attendees + 2) as hub, chromium() as first:
            alone_name, room, rogue_name = hub["names"][0], hub["names"][1:-1], hub["names"][-1]
            pages = {name: new_page(first.context.browser) for name in [alone_name, *room, rogue_name]}
            for page in pages.values():
                page.on("dialog", lambda dialog: dialog.accept())
            # the baseline: one attendee alone
            drive.join(pages[alone_name], hub, alone_name)
            drive.wait_for_lab(pages[alone_name], hub, alone_name, SIGN_IN_WAIT_S)
            alone = {nb: run_room(pages, hub, [alone_name], nb, args.deadline, evidence)[alone_name]
                     for nb in notebooks}
            print(f"alone: {json.dumps(alone)}", flush=True)
            # the room signs in over the spread, the instructor opens the live view (whose probe the rogue's fake
            # broker answers), and the rogue starts every attack it keeps up in its own lab
            ready = sign_in_over(pages, hub, [*room, rogue_name], args.spread)
            instructor = new_page(first.context.browser)
            drive.sign_in(instructor, hub["url"], hub["admin"], hub["admin_password"], next_path="/services/liveview/")
            instructor.wait_for_selector(f"#live th.who:text-is('{rogue_name}')", timeout=120_000)
            server_s = server_start_s(hub["log"])
            rows = {name: {"sign_in_s": ready[name], "server_s": server_s.get(name)} for name in room}
            print(f"sign-ins: {json.dumps(rows)}", flush=True)
            rogue = attacks.Rogue(hub, rogue_name, room)
            rogue.begin()
            print(f"rogue: started {json.dumps(rogue.started)}", flush=True)
            one_shots = threading.Thread(target=rogue.during, kwargs={"say": lambda line: print(line, flush=True)},
                                         daemon=True)
            one_shots.start()  # while the room runs its first notebook
            for nb in notebooks:  # everyone at once
                for name, row in run_room(pages, hub, room, nb, args.deadline, evidence).items():
                    rows[name][nb[:2]] = row
                rogue.instructor_signs_in(f"after the room's Run All of {nb[:2]}")
            rogue.stop_hold.set()  # the room ran: the lasting attacks' results may be taken now
            one_shots.join(ONE_SHOTS_S)
            if one_shots.is_alive():
                rogue.outcomes["the one-shot attacks"] = {"outcome": attacks.NOT_EXERCISED,
                                                          "why": f"still running {ONE_SHOTS_S:g} s after the room"}
            kills = {name: sandbox.oom_kills(sandbox_user(name)[0]) for name in [*room, rogue_name]}
            rogue_row = drive.live_row(instructor, rogue_name)  # what the instructor sees of the fake broker
            pages[rogue_name].close()  # the attendee's JupyterLab page: it never asks for their lab again
            rogue.end(say=lambda line: print(line, flush=True))
            dropped = hub["log"].read_text().count(PING_TIMEOUT)
    finally:
        if rogue is not None:
            for proc in rogue.lasting.values():
                proc.kill()
        memory.stop.set()
        shutil.rmtree(folder, ignore_errors=True)
        if not any(evidence.iterdir()):
            evidence.rmdir()
    return report(args, alone, rows, ready[rogue_name], kills, rogue, rogue_row, memory.peak_mib, dropped,
                  time.monotonic() - started)


def sign_in_over(pages: dict, hub: dict, room: list[str], spread_s: float) -> dict[str, float]:
    """Each of ``room`` submits their first sign-in ``spread_s / len(room)`` seconds after the last; returns
    ``{name: seconds from their submit to their file browser}``. Every waiting page is looked at every 0.5 s, so a lab
    ready while others still sign in is timed then, not when the bench gets to it.

    Raises:
        LabkitError: a lab not ready :data:`SIGN_IN_WAIT_S` seconds after the last submit.
    """
    gap_s, submitted, ready = spread_s / len(room), {}, {}
    first = time.monotonic()
    while len(ready) < len(room):
        if len(submitted) < len(room) and time.monotonic() >= first + gap_s * len(submitted):
            name = room[len(submitted)]
            submitted[name] = drive.join(pages[name], hub, name)
        for name in [n for n in submitted if n not in ready]:
            if pages[name].locator(drive.FILE_BROWSER).count():
                ready[name] = round(time.monotonic() - submitted[name], 1)
                drive.wait_for_lab(pages[name], hub, name, SIGN_IN_WAIT_S)  # shown, and at the attendee's URL
        if len(submitted) == len(room) and time.monotonic() > max(submitted.values()) + SIGN_IN_WAIT_S:
            raise LabkitError(f"labs not ready {SIGN_IN_WAIT_S:g} s after the last sign-in: "
                              f"{sorted(set(room) - set(ready))}")
        time.sleep(0.5)
    return ready


def server_start_s(log: Path) -> dict[str, float]:
    """``{name: seconds}`` from the hub's log: JupyterHub's "User <name> took <s> seconds to start" (the server's part
    of a sign-in: user, sandbox, JupyterLab answering; the rest is the browser loading JupyterLab)."""
    found = re.findall(r"User (\S+) took ([\d.]+) seconds to start", log.read_text(errors="replace"))
    return {name: round(float(seconds), 1) for name, seconds in found}


def sandbox_user(name: str) -> tuple[int, int, str]:
    """``(uid, gid, home)`` of attendee ``name``'s Unix user."""
    entry = pwd.getpwnam(names.unix_name(name))
    return entry.pw_uid, entry.pw_gid, entry.pw_dir


def report(args, alone: dict, rows: dict, rogue_sign_in_s: float, kills: dict, rogue: "attacks.Rogue",
           rogue_row: list | None, peak_mib: float, dropped: int, wall_s: float) -> int:
    """Print the table, each attack's outcome and the JSON line, and write the JSON to ``args.json``; the exit status
    (module docstring). ``dropped``: the websockets the attendees' servers closed for an unanswered ping
    (:data:`PING_TIMEOUT` lines in the hub's log); ``rogue_row``: the live view's row of the misbehaving attendee, as
    the instructor saw it before their lab stopped."""
    numbers = [nb[:2] for nb in alone]
    print(f"{'attendee':>12} {'sign-in s':>9} {'server s':>8} " + " ".join(f"{n + ' s':>6} {'x alone':>7}"
                                                                            for n in numbers) + "  claims  OOM kills")
    failures = []
    for name, row in rows.items():
        print(f"{name:>12} {row['sign_in_s']:>9} {row['server_s']!s:>8} "
              + " ".join(f"{row[n]['wall_s']:>6} {row[n]['wall_s'] / alone_s(alone, n):>7.1f}" for n in numbers)
              + f"  {'all' if all(row[n]['claims'] for n in numbers) else 'NO':>6}  {kills[name]}")
        failures += [f"{name} {nb}: {row[nb]['error']}" for nb in numbers if row[nb]["error"]]
        failures += [f"{name}: sign-in {row['sign_in_s']} s"] if row["sign_in_s"] > SIGN_IN_GOAL_S else []
        failures += [f"{name}: {kills[name]} OOM kills"] if kills[name] else []
    outcomes = rogue.every_outcome()
    print(f"the misbehaving attendee: sign-in {rogue_sign_in_s} s, {kills[rogue.name]} OOM kills (its hog); "
          f"the live view's row of it: {rogue_row}")
    for what, outcome in outcomes.items():
        print(f"  attack: {what}: {outcome}")
        if outcome in (attacks.THROUGH, attacks.NOT_EXERCISED):
            failures.append(f"attack {what!r}: {outcome}")
    for check in rogue.instructor_checks:
        print(f"  the instructor's right password {check['when']}: "
              f"{'accepted' if check['accepted'] else 'REFUSED: ' + check['said']}")
        failures += [] if check["accepted"] else [f"the instructor refused {check['when']}: {check['said']}"]
    print(f"machine: {os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.1f} GiB; peak used "
          f"{peak_mib / 1024:.1f} GiB; alone: " + ", ".join(f"{n} {alone_s(alone, n)} s" for n in numbers))
    print(f"websockets a server closed for an unanswered ping (its page then reconnects): {dropped}; "
          f"the bench's wall: {wall_s:.0f} s")
    figures = {"attendees": args.attendees, "spread_s": args.spread, "wall_s": round(wall_s),
               "machine": {"cpus": os.cpu_count(), "memory_mib": round(psutil.virtual_memory().total / 2**20),
                           "pid_max": int(Path("/proc/sys/kernel/pid_max").read_text())},
               "alone": alone, "room": rows, "rogue": rogue.name, "rogue_sign_in_s": rogue_sign_in_s,
               "rogue_oom_kills": kills[rogue.name], "rogue_live_view_row": rogue_row,
               "peak_used_mib": round(peak_mib), "ping_timeouts": dropped, "attack_outcomes": outcomes,
               "attacks": rogue.outcomes, "instructor_sign_ins": rogue.instructor_checks,
               "rogue_started": rogue.started, "failures": failures}
    print(json.dumps(figures))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1) + "\n")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures or any(v["error"] for v in alone.values()) else 0


def alone_s(alone: dict, number: str) -> float:
    """The baseline's Run All seconds of notebook ``number``."""
    return next(v["wall_s"] for nb, v in alone.items() if nb.startswith(number))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
