"""A workshop day rehearsed as a new instructor runs it (issue 65), on a real hub, through the product's own commands
and headless Chromium, each step as the run-sheet (``docs/instructor.md``) says:

1. **start a room**: ``make hub`` with the two passwords in the environment (a plain ``make hub``: a new room named
   after the day); its first line must say ``New room <name>: ...``, and the bench waits for ``The hub is ready: URL``.
2. **three attendees** sign in for the first time (name, own password, workshop code; :func:`labkit_dev.drive.join`),
   each opens notebook 00 from the file browser, runs its first cells one by one (Shift+Enter) until the prediction
   widget shows, chooses an answer and presses *Lock in*, then *Run > Run All Cells*; a run that raised, or without its
   claims line, is a failed run.
3. **the live view**: the instructor signs in to ``/services/liveview/``, which must show each attendee's claims held
   for 00 and the three predictions (``3 of 3``); its screenshot is ``bench/results/day-liveview.png``.
4. **a forgotten password**: ``python -m labkit.hub reset-password NAME`` (no ``--room``: the room whose hub runs)
   prints a one-time code; the old password must then be refused, and the attendee signs in, in a browser of their
   own, with the code and a new password, back to their JupyterLab.
5. **end of the day**: Ctrl-C on the hub (SIGINT to ``make hub``'s process group, as a terminal sends it; a second
   one after :data:`STOP_S` s, as the run-sheet says), then ``make hub-end ROOM=<name>``: the CSV path it prints is
   read back (rows per attendee), the attendees' Unix users and the room's folder must be gone.
6. **the next room**: ``make hub`` again must say ``New room``; its live view must list nobody (screenshot
   ``bench/results/day-next-room.png``), and a first room's name must sign in there as a newcomer (free again). That
   room is ended too.

Each step's wall seconds, the machine's 1-minute load at its end and the CPU seconds the whole machine spent in it
(``psutil.cpu_times``, every core) go to ``bench/results/day.json``, with what each step saw; a table is printed. Every
step has a deadline (:data:`DEADLINE_S`), each wait in it bounded by what is left. On any failure (or SIGTERM) the
bench still stops the hub it started and ends the rooms it made (``make hub-end``: their users, folders), removes the
CSVs it had written and nothing else; exit status 1 (on SIGTERM it exits after that clean-up, writing no JSON).

Run as root, with Debian's chromium, without ``LABKIT_CI`` (an attendee's kernel would then lock its own prediction
in): ``sudo .venv/bin/python bench/day.py``. The hub listens on 127.0.0.1 and a free port (the run-sheet's ``--ip
0.0.0.0 --port 8000`` and certificate are a venue's, not a bench's). Measured here (2 cores): 247 s wall and about
470 CPU seconds of the whole machine (another engineer's hub test ran from the same minute: the machine's CPU and load,
35 at the end of the Run Alls, are not this day's alone).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pwd
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import nbformat
import psutil
from hub import CLAIMS_HOLD, prepare_run  # bench/hub.py: the claims line and the checks before a real hub

from labkit.core.errors import LabkitError
from labkit.core.waiting import Deadline, wait_until
from labkit.hub import rooms
from labkit.hub.config import ADMIN_PASSWORD_ENV, PASSWORD_ENV
from labkit.hub.names import unix_name
from labkit.lessons import tour
from labkit_dev import drive
from labkit_dev.browser import chromium, new_page

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "bench" / "results"
NOTEBOOK = "00_tour.ipynb"
#: The attendees and the answer each locks in to notebook 00's opening question (tour.QUESTION's keys).
ATTENDEES = {"ada": "gone", "grace": "nobody", "linus": "uncommitted_only"}
#: Seconds each step may take (a room's first set-up, /opt/labkit and the proxy, takes about 4 minutes more).
DEADLINE_S = {"start room": 300, "sign in": 420, "lock in, Run All": 900, "live view": 180, "password reset": 240,
              "end of day": 300, "next room": 420}
#: Seconds ``make hub`` may take to stop after a Ctrl-C before the second one (the run-sheet: up to about 30 s).
STOP_S = 90
#: What the hub and the commands print that the bench reads.
NEW_ROOM = re.compile(r"^New room (\S+): .*\(its state: (.+?)\)\.", re.M)
READY = re.compile(r"The hub is ready: (\S+)")
CODE = re.compile(r"One-time code for \S+: (\S+)")
CSV_LINE = re.compile(r"Marks and predictions of room \S+: (.+\.csv) \((\d+) rows\)")
#: The JavaScript count of the live view's attendee rows (its "No attendee has signed in yet." row is none).
LIVE_ROWS_JS = "() => document.querySelectorAll('#live tbody tr th.who').length"


class Failed(LabkitError):
    """A step of the day did not go as the run-sheet says."""


class MakeHub:
    """``make hub`` as a terminal runs it: its output in ``log``, its own process group (Ctrl-C is SIGINT to it)."""

    def __init__(self, log: Path, password: str, admin_password: str) -> None:
        self.log, self.password, self.admin_password = log, password, admin_password
        self.proc: subprocess.Popen | None = None
        self.descendants: list[psutil.Process] = []
        self.room = self.state = self.url = None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def start(self, deadline: Deadline) -> None:
        """Start it and wait for its ``New room`` line and its URL.

        Raises:
            Failed: it ended, resumed a room, or did not say it was ready before ``deadline`` (its output quoted).
        """
        env = {k: v for k, v in os.environ.items() if k != "LABKIT_CI"}
        env.update({PASSWORD_ENV: self.password, ADMIN_PASSWORD_ENV: self.admin_password})
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(["make", "--no-print-directory", "-C", str(ROOT), "hub"], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        wait_until(lambda: NEW_ROOM.search(self.text()) or self.proc.poll() is not None, deadline.remaining_s(), 0.2)
        if (found := NEW_ROOM.search(self.text())):
            self.room, self.state = found.group(1), ROOT / found.group(2)  # relative: to the checkout
        else:
            raise Failed(f"make hub's first lines did not say 'New room ...':\n{self.text()[-3000:]}")
        wait_until(lambda: READY.search(self.text()) or self.proc.poll() is not None, deadline.remaining_s(), 0.5)
        if not (found := READY.search(self.text())):
            raise Failed(f"make hub did not say it was ready:\n{self.text()[-3000:]}")
        self.url = found.group(1)
        self.descendants = psutil.Process(self.proc.pid).children(recursive=True)  # JupyterHub: a session of its own

    def first_line(self) -> str:
        found = NEW_ROOM.search(self.text())
        return self.text()[found.start():].splitlines()[0] if found else ""

    def stop(self) -> dict:
        """Ctrl-C, and a second one after :data:`STOP_S` s if it still runs; SIGKILL for what it started if even
        that did not end it within 30 s. Returns ``{"stop_s", "ctrl_c"}`` (how many were sent)."""
        started, sent = time.monotonic(), 0
        if self.proc is None or self.proc.poll() is not None:
            return {"stop_s": 0.0, "ctrl_c": 0}
        for wait_s in (STOP_S, 30.0):
            sent += 1
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for proc in self.descendants:  # the ones it started, by pid and start time (psutil refuses a reused pid)
            try:
                proc.kill()
            except psutil.Error:
                pass
        return {"stop_s": round(time.monotonic() - started, 1), "ctrl_c": sent}


def command(argv: list[str], timeout_s: float) -> str:
    """Run ``argv`` in the checkout (``timeout_s`` seconds at most); its output.

    Raises:
        Failed: it failed or timed out (its output quoted).
    """
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=max(timeout_s, 1.0),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise Failed(f"{' '.join(argv)} still ran after {timeout_s:.0f} s: {exc.stdout or ''}") from None
    if done.returncode != 0:
        raise Failed(f"{' '.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(unix_name(name))
        return True
    except KeyError:
        return False


def end_room(hub: MakeHub, timeout_s: float) -> dict:
    """``make hub-end ROOM=<room>`` (its hub stopped first): the CSV it names read back, the room's folder and its
    attendees' users checked gone."""
    out = command(["make", "--no-print-directory", "hub-end", f"ROOM={hub.room}"], timeout_s)
    found = CSV_LINE.search(out)
    if not found:
        raise Failed(f"make hub-end printed no CSV path: {out}")
    path = Path(found.group(1))
    path = path if path.is_absolute() else ROOT / path
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {"output": out.strip().splitlines(), "csv": str(path), "csv_rows_said": int(found.group(2)),
            "csv_rows": len(rows), "rows_per_attendee": dict(Counter(r["attendee"] for r in rows)),
            "predictions": {r["attendee"]: r["words"] for r in rows if r["kind"] == "prediction"},
            "csv_mode": oct(path.stat().st_mode & 0o777), "folder_gone": not hub.state.exists()}


class Day:
    """The day's steps, their figures, and what to undo."""

    def __init__(self, work: Path) -> None:
        self.work, self.steps = work, []
        self.hubs: list[MakeHub] = []
        self.csvs: list[Path] = []
        self.made_dirs = [d for d in (rooms.ROOMS, rooms.RECORDS) if not d.exists()]

    @contextmanager
    def step(self, name: str):
        """A step of the day: yields ``(row, deadline)``; records wall, load and machine CPU seconds; a failure is
        recorded and raised on."""
        row = {"step": name, "deadline_s": DEADLINE_S[name]}
        self.steps.append(row)
        started, cpu = time.monotonic(), psutil.cpu_times()
        print(f"-- {name} (deadline {DEADLINE_S[name]} s)", flush=True)
        try:
            yield row, Deadline(DEADLINE_S[name])
            row["ok"] = True
        except Exception as exc:
            row["ok"], row["error"] = False, f"{type(exc).__name__}: {exc}"[:3000]
            raise
        finally:
            now = psutil.cpu_times()
            row["wall_s"] = round(time.monotonic() - started, 1)
            row["cpu_s"] = round(sum(now) - now.idle - now.iowait - (sum(cpu) - cpu.idle - cpu.iowait), 1)
            row["load_1min"] = round(os.getloadavg()[0], 2)
            row["over_deadline"] = row["wall_s"] > row["deadline_s"]

    def hub(self) -> MakeHub:
        made = MakeHub(self.work / f"hub-{len(self.hubs) + 1}.log", secrets.token_urlsafe(12),
                       secrets.token_urlsafe(32))
        self.hubs.append(made)
        return made

    def clean_up(self) -> list[str]:
        """Stop every hub it started and end every room they made that is not ended yet (``make hub-end``), remove
        the CSVs written and the folders it made if left empty. Returns what failed."""
        problems = []
        for hub in self.hubs:
            hub.stop()
            if hub.state is not None and hub.state.exists():
                try:
                    found = CSV_LINE.search(command(["make", "--no-print-directory", "hub-end", f"ROOM={hub.room}"],
                                                    300))
                    if found:
                        self.csvs.append(Path(found.group(1)))
                except Failed as exc:
                    problems.append(str(exc))
        for path in self.csvs:
            (path if path.is_absolute() else ROOT / path).unlink(missing_ok=True)
        for folder in self.made_dirs:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return problems


def refused(browser, url: str, name: str, password: str) -> str:
    """Sign in as ``name`` with ``password`` in a page of its own; returns the sign-in page's error line.

    Raises:
        Failed: the sign-in left the sign-in page (the password was taken).
    """
    page = new_page(browser)
    try:
        drive.sign_in(page, url, name, password)
        page.wait_for_load_state("load", timeout=30_000)
        if "/hub/login" not in page.url:
            raise Failed(f"{name}'s old password still signed in after the reset (at {page.url})")
        said = page.locator(".login_error")
        return said.first.inner_text().strip() if said.count() else "(no error line shown)"
    finally:
        page.close()


def lock_in_and_run(page, url: str, name: str, choice: str, deadline: Deadline) -> None:
    """Open notebook 00 from the file browser, run its code cells one by one (Shift+Enter, each to its end) until
    the prediction widget shows, choose ``choice``, press Lock in, see it locked before the run, then Run All."""
    from playwright.sync_api import expect

    drive.open_from_file_browser(page, url, name, NOTEBOOK, timeout_s=deadline.remaining_s())
    cells = page.locator(".jp-Notebook .jp-Cell")
    for i, cell_json in enumerate(nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4).cells):
        if cell_json.cell_type != "code":
            continue
        cell = cells.nth(i)
        prompt = cell.locator(".jp-InputArea-prompt")
        prompt.click()
        expect(cell).to_have_class(re.compile(r"\bjp-mod-active\b"))
        page.keyboard.press("Shift+Enter")
        expect(prompt).to_have_text(re.compile(r"\[\d+\]"), timeout=deadline.remaining_s() * 1000)
        if "labkit.predict(" in cell_json.source:
            break
    radio = page.locator(".widget-radio-box label", has_text=tour.QUESTION.choices[choice])
    radio.click(timeout=deadline.remaining_s() * 1000)
    page.locator("button.jupyter-button", has_text="Lock in").click()
    expect(page.locator(".widget-html", has_text="Locked in:")).to_contain_text("before the run", timeout=30_000)
    drive.run_all(page, name)


def rehearse(day: Day, shots: dict[str, Path]) -> None:
    """The day's six steps (module docstring), each recorded in ``day``; the screenshots to ``shots``.

    Raises:
        Failed: a step did not go as the run-sheet says; LabkitError: as :mod:`labkit_dev.drive`.
    """
    from playwright.sync_api import expect

    names = list(ATTENDEES)
    taken = [n for n in names if user_exists(n)]
    if taken:
        raise Failed(f"Unix users {', '.join(unix_name(n) for n in taken)} exist already: this bench's attendees "
                     "must be newcomers")
    first = day.hub()
    with day.step("start room") as (row, deadline):
        first.start(deadline)
        row.update(room=first.room, first_line=first.first_line(), url=first.url)
    hub = {"url": first.url, "password": first.password, "log": first.log}
    with chromium() as page0:
        browser = page0.context.browser
        pages = {names[0]: page0, **{n: new_page(browser) for n in names[1:]}}
        for page in pages.values():
            page.on("dialog", lambda dialog: dialog.accept())
        with day.step("sign in") as (row, deadline):
            submitted = {n: drive.join(page, hub, n) for n, page in pages.items()}
            row["sign_in_s"] = {}
            for n, page in pages.items():
                drive.wait_for_lab(page, hub, n, deadline.remaining_s())
                row["sign_in_s"][n] = round(time.monotonic() - submitted[n], 1)
        with day.step("lock in, Run All") as (row, deadline):
            for n, page in pages.items():
                lock_in_and_run(page, first.url, n, ATTENDEES[n], deadline)
            row["runs"] = {}
            for n, page in pages.items():
                error = drive.wait_for_run(page, n, deadline.remaining_s())
                claims = page.locator(".jp-OutputArea-output").filter(has_text=CLAIMS_HOLD)
                line = claims.last.inner_text().strip()[-200:] if claims.count() else None
                row["runs"][n] = {"error": error, "claims_line": line}
            if (bad := {n: r for n, r in row["runs"].items() if r["error"] or not r["claims_line"]}):
                raise Failed(f"failed runs: {bad}")
        instructor = new_page(browser)
        with day.step("live view") as (row, deadline):
            drive.sign_in(instructor, first.url, "instructor", first.admin_password, next_path="/services/liveview/")
            for n in names:
                drive.wait_for_live_marks(instructor, n, "C✓", timeout_s=deadline.remaining_s())
            wait_until(lambda: sum(instructor.evaluate(drive.LIVE_PREDICTIONS_JS, "00").values()) == len(names),
                       deadline.remaining_s(), 1.0)
            row["rows"] = {n: drive.live_row(instructor, n) for n in names}
            row["predictions_00"] = instructor.evaluate(drive.LIVE_PREDICTIONS_JS, "00")
            row["summary"] = instructor.locator(".sum").first.inner_text() if instructor.locator(".sum").count() else ""
            instructor.screenshot(path=str(shots["liveview"]), full_page=True)
            if row["predictions_00"] != {ATTENDEES[n]: 1 for n in names}:
                raise Failed(f"the live view counts predictions {row['predictions_00']}, not one of each chosen")
        with day.step("password reset") as (row, deadline):
            forgetful = names[1]
            out = command([str(ROOT / ".venv" / "bin" / "python"), "-m", "labkit.hub", "reset-password", forgetful],
                          deadline.remaining_s())
            code = CODE.search(out).group(1)
            row["said"] = out.replace(code, "<code>").strip().splitlines()  # spent, but no secret in the record
            row["old_password_refused"] = refused(browser, first.url, forgetful, drive.own_password(hub, forgetful))
            elsewhere = new_page(browser)  # the attendee at another browser: no cookie of the hub's
            drive.sign_in(elsewhere, first.url, forgetful, secrets.token_urlsafe(12), code=code)
            drive.wait_for_lab(elsewhere, hub, forgetful, deadline.remaining_s())
            row["back_in_lab_at"] = elsewhere.url
            elsewhere.close()
    with day.step("end of day") as (row, deadline):
        row.update(first.stop())
        row["stop_said"] = [line for line in first.text().splitlines() if line.startswith("Stopping the hub")]
        ended = end_room(first, deadline.remaining_s())
        day.csvs.append(Path(ended["csv"]))
        row.update(ended)
        row["users_gone"] = {n: not user_exists(n) for n in names}
        row["instructor_lab_made"] = user_exists("instructor")
        if not all(row["users_gone"].values()) or not ended["folder_gone"]:
            raise Failed(f"the room's users or folder outlived make hub-end: {row['users_gone']}, "
                         f"folder gone {ended['folder_gone']}")
        if set(ended["rows_per_attendee"]) != set(names):
            raise Failed(f"the CSV's attendees are {sorted(ended['rows_per_attendee'])}, not {names}")
    second = day.hub()
    with day.step("next room") as (row, deadline):
        second.start(deadline)
        row.update(room=second.room, first_line=second.first_line(), url=second.url)
        with chromium() as instructor:
            drive.sign_in(instructor, second.url, "instructor", second.admin_password,
                          next_path="/services/liveview/")
            expect(instructor.locator("#live")).to_be_visible(timeout=deadline.remaining_s() * 1000)
            expect(instructor.locator("#live td.empty")).to_be_visible(timeout=30_000)
            row["live_rows"] = instructor.evaluate(LIVE_ROWS_JS)
            row["predictions_shown"] = instructor.locator("#predictions").count()
            row["live_text"] = instructor.locator("#live").inner_text()[:300]
            instructor.screenshot(path=str(shots["next"]), full_page=True)
            newcomer = new_page(instructor.context.browser)
            drive.without_lab_drawn(newcomer)
            again = {"url": second.url, "password": second.password, "log": second.log}
            drive.join(newcomer, again, names[0])
            drive.wait_for_server(newcomer, again, names[0], deadline.remaining_s())
            row["first_room_name_signed_in"] = names[0]
        if row["live_rows"] or row["predictions_shown"]:
            raise Failed(f"the next room's live view is not empty: {row['live_text']}")
        row.update({f"stop_{k}": v for k, v in second.stop().items()})
        ended = end_room(second, deadline.remaining_s())
        day.csvs.append(Path(ended["csv"]))
        row["ended"] = {k: ended[k] for k in ("csv_rows", "rows_per_attendee", "folder_gone")}
        row["users_gone"] = not user_exists(names[0])


def table(steps: list[dict]) -> str:
    lines = [f"{'step':<18} {'ok':<4} {'wall s':>7} {'CPU s':>7} {'load':>5}  deadline"]
    for s in steps:
        lines.append(f"{s['step']:<18} {'yes' if s.get('ok') else 'NO':<4} {s['wall_s']:>7.1f} {s['cpu_s']:>7.1f} "
                     f"{s['load_1min']:>5.2f}  {s['deadline_s']} s{' OVER' if s['over_deadline'] else ''}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=RESULTS / "day.json")
    args = parser.parse_args(argv)
    prepare_run("bench/day.py")
    if os.environ.get("LABKIT_CI"):
        sys.exit("bench/day.py: unset LABKIT_CI (a kernel under test locks its own prediction in)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    shots = {"liveview": RESULTS / "day-liveview.png", "next": RESULTS / "day-next-room.png"}
    work = Path(tempfile.mkdtemp(prefix="labkit-bench-day-"))
    day = Day(work)
    started, error = time.monotonic(), None
    try:
        rehearse(day, shots)
    except Exception as exc:  # noqa: BLE001 (reported, and everything made is still removed)
        error = f"{type(exc).__name__}: {exc}"[:3000]
    finally:
        problems = day.clean_up()
        logs = {p.name: p.read_text(errors="replace")[-4000:] for p in sorted(work.glob("*.log"))} if error else {}
        for p in work.glob("*"):
            p.unlink()
        work.rmdir()
    result = {"conditions": {"cpus": os.cpu_count(), "memory_mib": round(psutil.virtual_memory().total / 2**20),
                             "notebook": NOTEBOOK, "attendees": ATTENDEES, "when": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                                 time.gmtime())},
              "total_wall_s": round(time.monotonic() - started, 1), "steps": day.steps, "error": error,
              "clean_up_problems": problems, "screenshots": {k: str(v.relative_to(ROOT)) for k, v in shots.items()},
              "hub_log_tails": logs}
    args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(table(day.steps))
    print(f"total {result['total_wall_s']:.0f} s; {args.json}")
    if error or problems:
        print(f"FAILED: {error or ''} {problems or ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
