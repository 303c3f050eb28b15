"""The instructor's live view (labkit/hub/liveview.py, page.py, verdicts.py, report.py, observed.py; issues 38, 48, 65).

The store and what a report may say, the table telling each mark's state apart, the kernel side's hook in a real
IPython shell reporting to a real HTTP server (never slowing a cell, failures logged once), and the broker observation
against the test session's real broker. The live view on a real hub, in a real browser, is tested in
tests/test_hub.py, on that file's hub (one hub start for both).
"""

from __future__ import annotations

import http.server
import importlib
import json
import logging
import os
import pkgutil
import re
import secrets
import socket
import sqlite3
import subprocess
import sys
import stat
import threading
import time

import pytest

from labkit import lessons
from labkit.hub import observed, page, report, verdicts
from labkit.lab.workspace import SOURCES
from labkit.learn import claims, marks

# --- the store and what a report may say ---------------------------------------------------------------------------


def test_a_report_names_a_notebook_a_kind_and_a_state_of_that_kind_only():
    assert verdicts.parse_report(b'{"notebook": "03", "kind": "claims", "state": "failed"}') == ("03", "claims", "failed")
    assert [verdicts.parse_report(json.dumps({"notebook": "00", "kind": "exercise", "state": s}).encode())[2]
            for s in ("unanswered", "wrong", "right", "error")] == ["unanswered", "wrong", "right", "error"]
    for body, why in [
        (b'{"notebook": "00", "kind": "claims", "state": "held", "user": "bob"}', "the user is the token's"),
        (b'{"notebook": "10", "kind": "claims", "state": "held"}', "notebook must be one of"),
        (b'{"notebook": "00", "kind": "grade", "state": "held"}', "kind must be one of"),
        (b'{"notebook": "00", "kind": "experiment", "state": "started"}', "kind must be one of exercise, claims"),
        (b'{"notebook": "00", "kind": "exercise", "state": "held"}', "state must be one of unanswered, wrong, right"),
        (b'{"notebook": "00", "kind": "claims", "state": "right"}', "state must be one of held, failed, error"),
        (b'{"notebook": "00", "kind": "exercise", "state": 1}', "state must be one of"),
        (b'{"notebook": "00", "kind": "exercise", "ok": false}', "exactly the fields"),  # an earlier labkit's
        (b'{"notebook": "00"}', "exactly the fields"), (b"[1]", "exactly the fields"), (b"{", "a JSON object"),
        (b'{"notebook": "00", "kind": "exercise", "state": "right", "x": "' + b"a" * 2000 + b'"}', "at most 1024 bytes"),
    ]:
        with pytest.raises(verdicts.BadReport, match=why):
            verdicts.parse_report(body)


def test_a_prediction_report_carries_one_of_its_notebook_s_choice_keys_and_nothing_else():
    assert verdicts.parse_report(b'{"notebook": "05", "kind": "prediction", "state": "current_only"}') == (
        "05", "prediction", "current_only")
    # words of one's own, markup, another notebook's key (00's "gone"), a key's look-alike, no string at all
    for state in ("Current Only", "", "x" * 33, "<b>", "gone", "current_onl", "hello_room", 3, None):
        with pytest.raises(verdicts.BadReport, match="a prediction for notebook 05 is one of its question's choice "
                                                     "keys: current_only, lower_only, both, neither"):
            verdicts.parse_report(json.dumps({"notebook": "05", "kind": "prediction", "state": state}).encode())


def test_the_live_view_s_choices_are_each_notebook_s_question_s_keys_and_words_in_order():
    questions = {q.notebook: list(q.choices.items()) for q in (
        getattr(importlib.import_module(f"labkit.lessons.{m.name}"), "QUESTION", None)
        for m in pkgutil.iter_modules(lessons.__path__)) if q}
    assert questions == {n: list(c.items()) for n, c in marks.CHOICES.items()}
    assert tuple(sorted(marks.CHOICES)) == verdicts.NOTEBOOKS


def test_the_notebooks_a_report_may_name_are_the_lab_s():
    assert verdicts.NOTEBOOKS == tuple(sorted(p.name[:2] for p in SOURCES.glob("[0-9][0-9]_*.ipynb")))


def test_the_store_keeps_the_latest_state_and_counts_the_reports(tmp_path):
    store = verdicts.Store(tmp_path / verdicts.FILE_NAME)
    assert stat.S_IMODE((tmp_path / verdicts.FILE_NAME).stat().st_mode) == 0o600
    store.record("ada", "00", "exercise", "unanswered", at=100.0)
    store.record("ada", "00", "exercise", "error", at=130.0)
    store.record("ada", "00", "exercise", "right", at=160.0)
    store.record("ada", "00", "claims", "failed", at=170.0)
    store.record("bob", "01", "claims", "held", at=180.0)
    store.close()
    again = verdicts.Store(tmp_path / verdicts.FILE_NAME)  # kept across a restart of the service
    assert again.marks() == {
        "ada": {("00", "exercise"): verdicts.Mark("right", 160.0, 3), ("00", "claims"): verdicts.Mark("failed", 170.0, 1)},
        "bob": {("01", "claims"): verdicts.Mark("held", 180.0, 1)}}
    again.close()


def test_a_store_an_earlier_labkit_wrote_is_converted_as_its_view_showed_it(tmp_path):
    path = tmp_path / verdicts.FILE_NAME
    with sqlite3.connect(path) as old:  # issue 38's schema: right or not, held or not
        old.execute("CREATE TABLE marks (user TEXT NOT NULL, notebook TEXT NOT NULL, kind TEXT NOT NULL, ok INTEGER "
                    "NOT NULL, at REAL NOT NULL, reports INTEGER NOT NULL, PRIMARY KEY (user, notebook, kind))")
        old.executemany("INSERT INTO marks VALUES (?, ?, ?, ?, ?, ?)", [
            ("ada", "00", "exercise", 1, 10.0, 2), ("ada", "00", "claims", 0, 11.0, 1),
            ("bob", "00", "exercise", 0, 12.0, 4), ("bob", "00", "claims", 1, 13.0, 3)])
    old.close()
    store = verdicts.Store(path)
    store.record("bob", "00", "exercise", "unanswered", at=20.0)  # and written to as this labkit's
    assert store.marks() == {
        "ada": {("00", "exercise"): verdicts.Mark("right", 10.0, 2), ("00", "claims"): verdicts.Mark("failed", 11.0, 1)},
        "bob": {("00", "exercise"): verdicts.Mark("unanswered", 20.0, 5), ("00", "claims"): verdicts.Mark("held", 13.0, 3)}}
    store.close()


def _badges(fragment: str, user: str, notebook: int) -> list[tuple[str, str]]:
    """The (CSS class, text) of each badge of ``user``'s cell of notebook ``notebook`` in the table ``fragment``."""
    row = re.search(rf'<tr><th class="who">{user}</th>(.*?)</tr>', fragment).group(1)
    cell = re.findall(r'<td class="nb">(.*?)</td>', row)[notebook]
    return re.findall(r'<span class="b (\w+)" title="[^"]*">([^<]*)</span>', cell)


def test_the_table_tells_unanswered_wrong_right_and_error_apart():
    """One attendee per exercise state, each with a claims state (held, failed, error, none): each badge's class and
    sign its own; the room's row counts the right and held, and the errors in a badge of their own."""
    states = {"ann": ("unanswered", "held"), "bea": ("wrong", "failed"), "cy": ("right", "error"), "dan": ("error", None)}
    marks_ = {user: {("00", "exercise"): verdicts.Mark(ex, 100.0, 1),
                     **({("00", "claims"): verdicts.Mark(cl, 100.0, 1)} if cl else {})}
              for user, (ex, cl) in states.items()}
    users = [{"name": u, "servers": {}} for u in states] + [{"name": "admin", "admin": True}]
    titles = {n: ("x", n != "04") for n in verdicts.NOTEBOOKS}  # as if 04 had no claims cell
    fragment = page.table_html(users, {}, marks_, titles, now=200.0)
    assert {u: _badges(fragment, u, 0) for u in states} == {
        "ann": [("ask", "E…"), ("ok", "C✓")], "bea": [("no", "E✗"), ("no", "C✗")],
        "cy": [("ok", "E✓"), ("err", "C!")], "dan": [("err", "E!"), ("none", "C·")]}
    assert _badges(fragment, "ann", 4) == [("none", "E·"), ("na", "–")]  # a notebook without one (04, by hand here)
    room = re.search(r'<tr class="room">(.*?)</tr>', fragment).group(1)
    first = re.findall(r'<td class="nb">(.*?)</td>', room)[0]
    assert re.findall(r'<span class="b (\w+)" title="[^"]*">([^<]*)</span>', first) == [
        ("sum", "E1"), ("err", "E!1"), ("sum", "C1"), ("err", "C!1")]
    assert "exercise, of the 4 attendees: 1 unanswered, 1 wrong, 1 right, 1 error" in first


def test_the_room_s_predictions_are_counted_per_notebook_in_the_learners_words_with_no_name():
    """Three attendees predict notebook 00 differently and two of them notebook 05 alike, a fourth predicts nothing:
    the panel counts each choice (most chosen first) in the words the learners chose from, and who locked one in,
    names no attendee, and shows no notebook nobody predicted; their rows show no prediction either."""
    chose = {"ann": {"00": "gone", "05": "both"}, "bea": {"00": "nobody", "05": "both"}, "cy": {"00": "gone"},
             "dan": {}}
    marks_ = {u: {(n, "prediction"): verdicts.Mark(c, 100.0, 1) for n, c in mine.items()} for u, mine in chose.items()}
    users = [{"name": u, "servers": {}} for u in chose]
    titles = {n: (f"title {n}", True) for n in verdicts.NOTEBOOKS}
    fragment = page.table_html(users, {}, marks_, titles, now=200.0)
    panel = fragment[fragment.index("<h2>Predictions</h2>"):]
    rows = dict(re.findall(r'<tr data-notebook="(\d\d)">(.*?)</tr>', panel))
    assert set(rows) == {"00", "05"}
    assert re.findall(r'<td class="locked">([^<]*)</td>', rows["00"]) == ["3 of 4"]
    assert re.findall(r'data-choice="(\w+)">[^<]*<b>(\d+)</b>', rows["00"]) == [("gone", "2"), ("nobody", "1")]
    assert re.findall(r'data-choice="(\w+)">[^<]*<b>(\d+)</b>', rows["05"]) == [("both", "2")]
    assert re.findall(r'data-choice="\w+">([^<]*) <b>', rows["00"]) == [
        "Not in the log: the abort removes them", "In the log, but no consumer returns them"]  # 00_tour's own words
    assert not any(name in panel for name in chose)
    assert all(_badges(fragment, u, 0) == [("none", "E·"), ("none", "C·")] for u in chose)  # no choice in a row
    assert "<h2>Predictions</h2>" not in page.table_html(users, {}, {}, titles, now=200.0)


def test_the_page_finds_the_claims_cell_of_every_notebook():
    assert {n: has for n, (_, has) in page.notebook_titles().items()} == {n: True for n in verdicts.NOTEBOOKS}


def test_the_hub_runs_the_live_view_and_tells_attendees_where_it_is():
    from traitlets.config import Config

    from labkit.hub.config import HubSettings, configure
    from labkit.hub.firewall import HUB_PORTS
    from labkit.hub.sandbox import GATEWAY

    c = Config()
    configure(c, HubSettings(ip="127.0.0.1", port=1, hub_port=2, proxy_api_port=3, prefix="/opt/x", state="/s",
                             proxy="/p").__dict__)
    (service,) = [s for s in c.JupyterHub.services if s["name"] == "liveview"]
    assert service["command"] == ["/opt/x/venv/bin/python", "-m", "labkit.hub.liveview"]
    assert service["environment"] == {"LABKIT_HUB_STATE": "/s"} and service["oauth_no_confirm"]
    port = int(service["url"].rsplit(":", 1)[1])
    assert service["url"] == f"http://{GATEWAY}:{port}" and port in HUB_PORTS  # where attendees' namespaces reach
    assert c.Spawner.environment[report.URL_ENV] == f"{service['url']}/services/liveview/"
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "liveview"]
    assert role == {"name": "liveview", "services": ["liveview"],
                    "scopes": ["list:users", "read:users", "read:roles:users", "read:servers"]}


# --- the kernel side -----------------------------------------------------------------------------------------------

def test_the_kernel_knows_its_notebook_and_every_claims_cell():
    assert report.notebook_of("/home/lab-ada/labkit/work/00_tour.ipynb") == "00"
    assert report.notebook_of("/home/lab-ada/labkit/work/Untitled.ipynb") is None
    assert report.notebook_of("08_broker_crashes.py") is None and report.notebook_of(None) is None
    found, asserting = {}, {}
    for path in sorted(SOURCES.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        found[path.name[:2]] = sum(map(claims.is_claims_cell, code))
        asserting[path.name[:2]] = sum(map(claims.is_assertion_cell, code))
        assert all(claims.is_assertion_cell(c) for c in code if claims.is_claims_cell(c)), path.name
    # one closing claims cell per notebook (04's parts each assert theirs; its last cell says all held, after the
    # reveal); every assertion cell counts towards the claims mark: 04's seven
    assert found == {n: 1 for n in verdicts.NOTEBOOKS}, found
    assert asserting["04"] >= 7 and all(n >= 1 for n in asserting.values()), asserting


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A stand-in for the service's report route: records each POST, answers 204 (or ``status``)."""

    status = 204
    got: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).got.append((self.path, self.headers["Authorization"], json.loads(body)))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def shell(monkeypatch, tmp_path):
    """A real IPython shell (no history file, its IPYTHONDIR in ``tmp_path``) whose kernel reports to a local
    recorder: ``(shell, recorder class, url)``."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    recorder = type("Recorder", (_Recorder,), {"got": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/services/liveview/"
    monkeypatch.setenv(report.URL_ENV, url)
    monkeypatch.setenv(report.TOKEN_ENV, "token-of-ada")
    monkeypatch.setenv(report.SESSION_ENV, "/home/lab-ada/labkit/work/03_isolation_levels.ipynb")
    monkeypatch.setattr(report, "_reporter", None)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.enabled = False
    ipython = InteractiveShell.instance(config=config)
    try:
        yield ipython, recorder, url
    finally:
        if report._reporter is not None:
            ipython.events.unregister("pre_run_cell", report._reporter.before_cell)
            ipython.events.unregister("post_run_cell", report._reporter.after_cell)
            marks.unsubscribe(report._reporter.heard)
        server.shutdown()
        server.server_close()


def _marks(recorder) -> list:
    """What ``recorder`` got but the kernel's states (busy, idle, raised: tested on their own)."""
    return [got for got in recorder.got if got[2]["kind"] != marks.KERNEL]


def _wait(predicate, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(predicate())


#: A check as a lesson writes one, and one whose broker does not answer (defined in the shell, as a cell would).
CHECKS = """from labkit.learn.exercise import compare, marked, unanswered

@marked
def check_sum(answer):
    return unanswered(answer, "a number") or compare(2, answer, "Right.", "Not yet: count again.")

@marked
def check_down(answer):
    raise ConnectionError("the broker did not answer")
"""
CLAIMS = 'import labkit\nassert x == {}, x\nlabkit.claims_hold("All claims hold on the real broker.")'


def test_a_kernel_reports_each_check_s_state_and_claims_cells_with_its_token(shell):
    """Checks unanswered, wrong, right, raising (the cell fails: error); a claims cell that holds (held), whose
    assertion fails (failed), that raises something else (error), and run again once fixed (held again: each cell
    counts by its latest run); a cell printing the claims line without claims_hold, and a Verdict made without a check,
    report nothing."""
    ipython, recorder, url = shell
    reporter = report.install(ipython)
    assert reporter is not None and report.install(ipython) is reporter  # once per kernel
    ipython.run_cell("x = 1\n" + CHECKS)
    for cell in ("check_sum(...)", "check_sum(3)", "check_sum(2)"):
        assert ipython.run_cell(cell).success
    assert not ipython.run_cell("check_down(2)").success  # the learner sees the error itself
    assert ipython.run_cell(CLAIMS.format(1)).success
    assert not ipython.run_cell(CLAIMS.format(2)).success  # AssertionError: a claim did not hold
    raising = "if x == 1:\n    raise ConnectionError('the broker did not answer')\n" + CLAIMS.format("x")
    assert not ipython.run_cell(raising).success
    ipython.run_cell("x = 2")
    assert ipython.run_cell(CLAIMS.format(2)).success  # its claims line ran, but `raising`'s latest run raised
    assert ipython.run_cell(raising).success  # fixed: every assertion cell's latest run held
    ipython.run_cell('print("All claims hold on the real broker.")\nfrom labkit.learn.exercise import Verdict\n'
                     'Verdict("wrong", "made, not checked")')  # today's claims line without claims_hold: nothing
    assert _wait(lambda: len(_marks(recorder)) >= 9), _marks(recorder)
    assert not _wait(lambda: len(_marks(recorder)) > 9, 1.0), _marks(recorder)
    assert {(path, auth) for path, auth, _ in recorder.got} == {("/services/liveview/api/report", "token token-of-ada")}
    assert [(body["kind"], body["state"]) for _, _, body in _marks(recorder)] == [
        ("exercise", "unanswered"), ("exercise", "wrong"), ("exercise", "right"), ("exercise", "error"),
        ("claims", "held"), ("claims", "failed"), ("claims", "error"), ("claims", "error"), ("claims", "held")]
    assert {body["notebook"] for _, _, body in _marks(recorder)} == {"03"}
    assert _wait(lambda: reporter.sent == len(recorder.got))  # the kernel's states too (_marks leaves them out)


def test_a_failed_assertion_cell_without_claims_hold_reports_failed_and_keeps_the_claims_line_from_holding(shell):
    """Notebook 04's shape: assertion cells of its own per part, the last one calling claims_hold. A part's failed
    assertion reaches the live view at once, replacing an earlier held, and the claims line run after it does not
    report held; a cell without an assertion that raises says nothing of the claims."""
    ipython, recorder, _ = shell
    report.install(ipython)
    part = "# Assertions: what this part claims\nassert x == 2, x"
    assert ipython.run_cell("x = 2").success and ipython.run_cell(part).success
    assert ipython.run_cell(CLAIMS.format(2)).success  # held
    assert not ipython.run_cell("x = 1\nraise KeyError('an experiment cell')").success  # no assertion: nothing
    assert not ipython.run_cell(part).success  # failed, at once
    assert ipython.run_cell(CLAIMS.format(1)).success  # the claims line ran, but the part failed: failed again
    assert _wait(lambda: len(_marks(recorder)) >= 3), _marks(recorder)
    assert not _wait(lambda: len(_marks(recorder)) > 3, 1.0), _marks(recorder)
    assert [(body["kind"], body["state"]) for _, _, body in _marks(recorder)] == [
        ("claims", "held"), ("claims", "failed"), ("claims", "failed")]


def test_a_kernel_reports_a_prediction_locked_in_before_the_run_as_its_choice_key_and_no_later_choice(
        shell, tmp_path, monkeypatch):
    """Locked in before the kernel's first experiment: reported. The experiment's start is not reported, and a choice
    made after it is not (the live view counts predictions locked before the run only)."""
    ipython, recorder, url = shell
    started = []  # this kernel's first experiment, as labkit.learn.marks tells it (the test process made topics before)
    monkeypatch.setattr(marks, "experiment_started_ms", lambda: started[0] if started else None)
    report.install(ipython)
    lock = (f"from pathlib import Path\nfrom labkit.learn.predictions import Question, lock_in\n"
            f"q = Question('03', 'when?', {{'at_once': 'At once', 'at_end': 'At the end'}}, {{}})\n"
            f"lock_in(q, %r, Path({str(tmp_path)!r}))")
    assert ipython.run_cell(lock % "at_end").success
    started.append(int(time.time() * 1000))
    marks.publish(marks.EXPERIMENT, "started")
    assert ipython.run_cell(lock % "at_once").success
    assert _wait(lambda: _marks(recorder)) and not _wait(lambda: len(_marks(recorder)) > 1, 1.0)
    assert [body for _, _, body in _marks(recorder)] == [{"notebook": "03", "kind": "prediction", "state": "at_end"}]


def test_in_a_real_kernel_a_run_whose_first_assertion_cell_fails_shows_failed_not_an_earlier_held(tmp_path):
    """A real kernel (ipykernel through nbclient, as JupyterLab's) of notebook 04 reports to a local stand-in of the
    service, whose reports go through the service's own parsing into its store and table. Its first Run All holds
    (C✓) after a prediction locked in before its experiment (a model's run) and a choice after it; the second Run All's
    first assertion cell fails, without claims_hold: C✗ replaces C✓, and the claims line run after it does not bring it
    back. The room's predictions count the prediction, not the later choice."""
    import nbformat
    from nbclient import NotebookClient

    recorder = type("Recorder", (_Recorder,), {"got": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, report.URL_ENV: f"http://127.0.0.1:{server.server_address[1]}/services/liveview/",
           report.TOKEN_ENV: "token-of-ada", report.SESSION_ENV: "/home/lab-ada/labkit/work/04_spark_pipeline.ipynb",
           "LABKIT_PREDICTIONS": str(tmp_path / "predictions")}
    cells = ["import labkit\nfrom labkit.learn.predictions import Question, lock_in\n"
             "q = Question('04', 'copies?', {'two_one': 'Two, one', 'one_one': 'One, one'}, {})\nx = 2",
             "lock_in(q, 'two_one')",  # before the run: a prediction
             "from labkit.models.kip1289 import World\nWorld()",  # the notebook's first experiment (a model's run)
             "lock_in(q, 'one_one')",  # after it: no prediction
             "# Assertions: part 1\nassert x == 2, x",
             "# Assertions: the opening question\nassert x == 2, x\n"
             "labkit.claims_hold('All claims hold on the real broker.')"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True)
    try:
        with client.setup_kernel(env=env):
            for i in range(len(cells)):  # Run All
                client.execute_cell(notebook.cells[i], i)
            assert _wait(lambda: len(_marks(recorder)) >= 2), _marks(recorder)
            held = [body for _, _, body in _marks(recorder)]
            notebook.cells[0].source = notebook.cells[0].source.replace("x = 2", "x = 1")
            for i in range(len(cells)):  # Run All again, in the same kernel: its first assertion cell fails
                client.execute_cell(notebook.cells[i], i)
            assert _wait(lambda: len(_marks(recorder)) >= 4) and not _wait(lambda: len(_marks(recorder)) > 4, 1.0)
    finally:
        server.shutdown()
        server.server_close()
    assert held == [{"notebook": "04", "kind": "prediction", "state": "two_one"},
                    {"notebook": "04", "kind": "claims", "state": "held"}], held
    assert notebook.cells[4].outputs[0]["ename"] == "AssertionError"
    store = verdicts.Store(tmp_path / verdicts.FILE_NAME)
    for _, _, body in _marks(recorder):
        store.record("ada", *verdicts.parse_report(json.dumps(body).encode()))
    fragment = page.table_html([{"name": "ada", "servers": {}}], {}, store.marks(),
                               {n: ("x", True) for n in verdicts.NOTEBOOKS}, now=time.time())
    store.close()
    assert [(b["kind"], b["state"]) for _, _, b in _marks(recorder)[2:]] == [("claims", "failed"), ("claims", "failed")]
    assert _badges(fragment, "ada", 4) == [("none", "E·"), ("no", "C✗")]
    assert re.findall(r'data-choice="(\w+)">[^<]*<b>(\d+)</b>', fragment) == [("two_one", "1")]


class _Service(http.server.BaseHTTPRequestHandler):
    """The service's report route as the service files a report (:func:`verdicts.parse_report`, then
    :meth:`verdicts.Store.record` at its arrival), under the user ``ada`` (the service names its token's owner)."""

    store: verdicts.Store

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).store.record("ada", *verdicts.parse_report(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def _iso(at: float) -> str:
    """``at`` (seconds since the epoch) as the hub's ISO 8601 time."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(at))


def _kernel_states(fragment: str) -> list[tuple[str, str]]:
    """The (notebook, state) of each kernel the table ``fragment`` shows."""
    return re.findall(r'<span class="k \w+" data-notebook="(\d\d)" data-state="(\w+)"', fragment)


def test_a_real_kernel_busy_past_the_threshold_is_flagged_stuck_then_idle_and_a_raising_cell_shows_a_failed_run(
        tmp_path, monkeypatch):
    """A real kernel (ipykernel through nbclient, as JupyterLab's) of notebook 09 reports to the service's report
    route (its parsing and store): a cell sleeping past the threshold (2 s here) is shown busy, then "stuck?" in the
    table (its row and the room's count flagged) and on the page, looked at in Chromium at 1280x800; idle once the
    cell ended; a cell that raises shows a failed run until a later cell ends well."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setattr(page, "STUCK_S", 2.0)
    store = verdicts.Store(tmp_path / verdicts.FILE_NAME)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Service", (_Service,), {"store": store}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, report.URL_ENV: f"http://127.0.0.1:{server.server_address[1]}/services/liveview/",
           report.TOKEN_ENV: "token-of-ada", report.SESSION_ENV: "/home/lab-ada/labkit/work/09_replication.ipynb"}
    user = {"name": "ada", "servers": {"": {"ready": True, "started": _iso(time.time() - 1)}}}
    cells = ["import labkit", "import time\ntime.sleep(6)", "raise ValueError('an experiment cell that fails')",
             "x = 1"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True)

    def table() -> str:
        return page.table_html([user], {}, store.marks(), {n: ("x", True) for n in verdicts.NOTEBOOKS}, time.time())

    def shown(state: str) -> bool:
        return _kernel_states(table()) == [("09", state)]

    try:
        with client.setup_kernel(env=env):
            client.execute_cell(notebook.cells[0], 0)
            assert _wait(lambda: shown("idle")), table()
            sleeping = threading.Thread(target=client.execute_cell, args=(notebook.cells[1], 1), daemon=True)
            sleeping.start()
            assert _wait(lambda: shown("busy"), 1.5), table()  # within the threshold: busy, not flagged
            assert _wait(lambda: shown("stuck"), 4), table()
            stuck = table()
            html_page = page.page_html(stuck, 5, "")
            sleeping.join(30)
            assert _wait(lambda: shown("idle"), 10), table()
            idle = table()
            client.execute_cell(notebook.cells[2], 2)
            assert _wait(lambda: shown("raised")), table()
            failed = table()
            client.execute_cell(notebook.cells[3], 3)
            assert _wait(lambda: shown("idle")), table()
    finally:
        server.shutdown()
        server.server_close()
        store.close()
    assert '<tr class="stuck"><th class="who">ada</th>' in stuck and '<b class="alarm" id="stuck">1</b>' in stuck
    assert re.search(r'data-state="stuck"[^>]*>09 stuck\? \d s</span>', stuck), stuck
    assert '<tr class="stuck">' not in idle and '<b class="" id="stuck">0</b>' in idle
    assert re.search(r'data-state="raised"[^>]*>09 failed \d s</span>', failed) and '<b id="failed">1</b>' in failed
    from labkit_dev.browser import chromium, missing, wide_tables

    if missing():
        return  # the table is checked; the page's look needs Chromium
    with chromium() as browser_page:
        browser_page.set_content(html_page)
        flagged = browser_page.locator('tr.stuck .k[data-state="stuck"]')
        assert flagged.inner_text().startswith("09 stuck? ") and flagged.is_visible()
        assert "busy for over 2 s" in browser_page.inner_text(".legend")
        assert wide_tables(browser_page.locator("body").element_handle(), "live view") == []
        shot = tmp_path / "liveview-stuck.png"
        browser_page.screenshot(path=str(shot))
        print(f"screenshot: {shot}")


def test_a_stalled_participant_is_reported_once_and_shown_in_its_notebook_s_cell(shell, tmp_path):
    """A real participant process whose call outlasts the lab's deadline (its own watchdog writes its stalled event;
    tests/stall_role.py, no broker needed): the kernel reports ("participant", "stalled") once however often its
    status is read, and the table shows it in notebook 03's cell."""
    from labkit.crashlab.participant import Participant
    from labkit.core.history import History

    ipython, recorder, _ = shell
    report.install(ipython)
    p = Participant("stuck", "tests.stall_role", history=History(tmp_path / "history.jsonl"),
                    bootstrap="127.0.0.1:1", topic="none", wait_s=120.0, call_deadline_ms=500).start()
    try:
        assert _wait(lambda: p.status == "stalled", 20), p.status
        assert all(p.status == "stalled" for _ in range(5)) and p.stalled_in == "wait"
        assert _wait(lambda: _marks(recorder), 10) and not _wait(lambda: len(_marks(recorder)) > 1, 1.0)
    finally:
        p.crash()
    assert [body for _, _, body in _marks(recorder)] == [{"notebook": "03", "kind": "participant", "state": "stalled"}]
    mark = {("03", "participant"): verdicts.Mark("stalled", 100.0, 1)}
    fragment = page.table_html([{"name": "ada", "servers": {}}], {}, {"ada": mark},
                               {n: ("x", True) for n in verdicts.NOTEBOOKS}, now=200.0)
    assert _badges(fragment, "ada", 3) == [("stall", "P!"), ("none", "E·"), ("none", "C·")]


def test_an_attendee_s_memory_is_their_memory_group_s_usage_against_its_limit(tmp_path):
    """A real memory cgroup (v1) with a 1 GiB limit and a process in it holding 200 MiB: the reader gives its usage
    and limit as the kernel accounts them, and the table shows "0.2 / 1.0 GiB"; an OOM kill is shown beside it; a
    lab without a group shows none."""
    from labkit.hub.sandbox import CGROUP_ROOT, memory_of

    memory_root = CGROUP_ROOT / "memory"
    if os.geteuid() != 0 or not (memory_root / "cgroup.procs").exists():
        pytest.skip("makes a cgroup v1 memory group: run as root where /sys/fs/cgroup/memory is mounted")
    group = memory_root / f"labkit-test-{secrets.token_hex(4)}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(2**30))
        holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nb = bytearray(200 * 2**20)\n"
                                   "print('held', flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE, text=True,
                                  preexec_fn=lambda: (group / "cgroup.procs").write_text("0"))
        try:
            assert holder.stdout.readline() == "held\n"
            usage, limit = memory_of(group)
        finally:
            holder.kill()
            holder.wait(30)
    finally:
        _wait(lambda: not (group / "cgroup.procs").read_text().strip(), 10)
        group.rmdir()
    assert limit == 2**30 and 200 * 2**20 <= usage < 400 * 2**20, (usage, limit)
    assert memory_of(group) is None  # the group is gone: the lab is not running
    users = [{"name": n, "servers": {}} for n in ("ada", "bea", "cy")]
    fragment = page.table_html(users, {}, {}, {n: ("x", True) for n in verdicts.NOTEBOOKS}, now=200.0,
                               memory={"ada": (usage, limit, 0), "bea": (usage, limit, 2), "cy": None})
    assert re.findall(r'<th class="who">(\w+)</th>.*?<td class="mem ?(\w*)"[^>]*>(.*?)</td>', fragment) == [
        ("ada", "", "0.2 / 1.0 GiB"), ("bea", "no", "0.2 / 1.0 GiB<small>2 OOM kill(s)</small>"), ("cy", "", "–")]


def test_outside_a_hub_kernel_nothing_reports(shell, monkeypatch):
    ipython, recorder, url = shell
    monkeypatch.delenv(report.URL_ENV)
    assert report.install(ipython) is None  # not on the hub
    marks.publish("exercise", "right")
    # a process of the lab that is not a kernel (a participant, Spark) imports labkit on the hub: it reports nothing
    participant = subprocess.run([sys.executable, "-c", "import labkit\nfrom labkit.hub import report\n"
                                  "labkit.claims_hold('All claims hold.')\nprint(report._reporter)"],
                                 env={**os.environ, report.URL_ENV: url}, capture_output=True, text=True, timeout=60)
    assert participant.stdout.split("\n")[-2] == "None", participant.stdout + participant.stderr
    assert recorder.got == []


def test_a_report_that_fails_never_slows_nor_breaks_the_cell_and_is_logged_once(shell, monkeypatch):
    ipython, recorder, _ = shell
    with socket.socket() as silent:  # listens, never answers: each report waits its whole deadline
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        monkeypatch.setenv(report.URL_ENV, f"http://127.0.0.1:{silent.getsockname()[1]}/services/liveview/")
        reporter = report.install(ipython)
        records: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = records.append
        report.LOG.addHandler(handler)
        try:
            started = time.monotonic()
            for _ in range(3):
                result = ipython.run_cell('import labkit\nlabkit.claims_hold("All claims hold on the real broker.")')
                assert result.success
            cells_s = time.monotonic() - started
            assert cells_s < report.DEADLINE_S, f"3 cells took {cells_s:.2f} s: the reports slowed them"
            assert _wait(lambda: records, 3 * report.DEADLINE_S + 30)
            time.sleep(2 * report.DEADLINE_S + 0.5)  # the other two reports fail meanwhile
        finally:
            report.LOG.removeHandler(handler)
    assert len(records) == 1 and "fail" in records[0].getMessage(), [r.getMessage() for r in records]
    assert reporter.sent == 0


# --- what the view observes of a broker ----------------------------------------------------------------------------

def _state(home, content: str | None = None, mode: str = "file") -> None:
    path = observed.state_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "fifo":
        os.mkfifo(path)
    elif mode == "link":
        (home / "elsewhere.json").write_text(content)
        path.symlink_to(home / "elsewhere.json")
    else:
        path.write_text(content)


def test_a_broker_is_up_only_when_the_attendee_s_state_names_a_port_that_answers_kafka(tmp_path, bootstrap):
    port = int(bootstrap.rsplit(":", 1)[1])
    uid = os.getuid()  # the test session's broker runs as this user: it plays the attendee's
    assert observed.answers_kafka(port)
    good = json.dumps({"pid": 1, "bootstrap": f"127.0.0.1:{port}"})
    cases = {"none": (None, "file"), "up": (good, "file"), "link": (good, "link"), "fifo": (None, "fifo"),
             "stranger": (good, "file"), "closed": (json.dumps({"bootstrap": "127.0.0.1:1"}), "file"),
             "garbled": ("{", "file"), "starting": (json.dumps({"pid": 1, "started": 1.0, "version": "4.4.0"}), "file")}
    seen = {}
    for name, (content, mode) in cases.items():
        home = tmp_path / name
        home.mkdir()
        if content is not None or mode == "fifo":
            _state(home, content, mode)
        seen[name] = observed.broker_status(home, uid if name != "stranger" else uid + 12345, None)
    assert seen == {"none": "none", "up": "up", "link": "none", "fifo": "none", "stranger": "none", "closed": "down",
                    "garbled": "none", "starting": "none"}, seen
    assert not observed.answers_kafka(1)


def test_a_broker_is_asked_inside_the_attendee_s_namespace_not_the_machine_s(tmp_path, bootstrap):
    """The same state file, naming a port where this machine's loopback has a broker: "down" when asked inside a network
    namespace with nothing on that port (an attendee's whose broker stopped), and when the namespace is gone."""
    if os.geteuid() != 0:
        pytest.skip("the namespace check makes a network namespace (ip netns): run it as root")
    port = int(bootstrap.rsplit(":", 1)[1])
    _state(tmp_path, json.dumps({"bootstrap": f"127.0.0.1:{port}"}))
    name = f"labkit-test-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, timeout=30)
        assert observed.broker_status(tmp_path, os.getuid(), None) == "up"  # the machine's loopback: the broker
        assert observed.broker_status(tmp_path, os.getuid(), name) == "down"
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True, timeout=30)
    assert observed.broker_status(tmp_path, os.getuid(), name) == "down"  # no namespace: no answer, and none made
    assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


# --- a real hub, as root -------------------------------------------------------------------------------------------
