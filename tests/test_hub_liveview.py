"""The instructor's live view (labkit/hub/liveview.py, verdicts.py, report.py, observed.py; issue 38).

The store and what a report may say, the kernel side's hook in a real IPython shell reporting to a real HTTP server
(never slowing a cell, failures logged once), and the broker observation against the test session's real broker. The
live view on a real hub, in a real browser, is tested in tests/test_hub.py, on that file's hub (one hub start for
both).
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import socket
import subprocess
import sys
import stat
import threading
import time

import pytest

from labkit.hub import observed, report, verdicts
from labkit.workspace import SOURCES

# --- the store and what a report may say ---------------------------------------------------------------------------


def test_a_report_names_a_notebook_a_kind_and_an_outcome_only():
    assert verdicts.parse_report(b'{"notebook": "03", "kind": "claims", "ok": false}') == ("03", "claims", False)
    for body, why in [
        (b'{"notebook": "00", "kind": "claims", "ok": true, "user": "bob"}', "the user is the token's"),
        (b'{"notebook": "09", "kind": "claims", "ok": true}', "notebook must be one of"),
        (b'{"notebook": "00", "kind": "grade", "ok": true}', "kind must be one of"),
        (b'{"notebook": "00", "kind": "exercise", "ok": 1}', "ok must be true or false"),
        (b'{"notebook": "00"}', "exactly the fields"), (b"[1]", "exactly the fields"), (b"{", "a JSON object"),
        (b'{"notebook": "00", "kind": "exercise", "ok": true, "x": "' + b"a" * 2000 + b'"}', "at most 1024 bytes"),
    ]:
        with pytest.raises(verdicts.BadReport, match=why):
            verdicts.parse_report(body)


def test_the_notebooks_a_report_may_name_are_the_lab_s():
    assert verdicts.NOTEBOOKS == tuple(sorted(p.name[:2] for p in SOURCES.glob("[0-9][0-9]_*.ipynb")))


def test_the_store_keeps_the_latest_outcome_and_counts_the_reports(tmp_path):
    store = verdicts.Store(tmp_path / verdicts.FILE_NAME)
    assert stat.S_IMODE((tmp_path / verdicts.FILE_NAME).stat().st_mode) == 0o600
    store.record("ada", "00", "exercise", False, at=100.0)
    store.record("ada", "00", "exercise", True, at=160.0)
    store.record("ada", "00", "claims", False, at=170.0)
    store.record("bob", "01", "claims", True, at=180.0)
    store.close()
    again = verdicts.Store(tmp_path / verdicts.FILE_NAME)  # kept across a restart of the service
    assert again.marks() == {
        "ada": {("00", "exercise"): verdicts.Mark(True, 160.0, 2), ("00", "claims"): verdicts.Mark(False, 170.0, 1)},
        "bob": {("01", "claims"): verdicts.Mark(True, 180.0, 1)}}
    again.close()


def test_the_hub_runs_the_live_view_and_tells_attendees_where_it_is():
    from traitlets.config import Config

    from labkit.hub.config import HubSettings, configure
    from labkit.hub.firewall import HUB_PORTS

    c = Config()
    configure(c, HubSettings(ip="127.0.0.1", port=1, hub_port=2, proxy_api_port=3, prefix="/opt/x", state="/s",
                             proxy="/p").__dict__)
    (service,) = [s for s in c.JupyterHub.services if s["name"] == "liveview"]
    assert service["command"] == ["/opt/x/venv/bin/python", "-m", "labkit.hub.liveview"]
    assert service["environment"] == {"LABKIT_HUB_STATE": "/s"} and service["oauth_no_confirm"]
    port = int(service["url"].rsplit(":", 1)[1])
    assert service["url"] == f"http://127.0.0.1:{port}" and port in HUB_PORTS  # outside every attendee's block
    assert c.Spawner.environment[report.URL_ENV] == f"{service['url']}/services/liveview/"
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "liveview"]
    assert role == {"name": "liveview", "services": ["liveview"], "scopes": ["list:users", "read:users", "read:servers"]}


# --- the kernel side -----------------------------------------------------------------------------------------------

def test_the_kernel_knows_its_notebook_and_every_claims_cell_but_04_s():
    assert report.notebook_of("/home/lab-ada/labkit/work/00_tour.ipynb") == "00"
    assert report.notebook_of("/home/lab-ada/labkit/work/Untitled.ipynb") is None
    assert report.notebook_of("08_broker_crashes.py") is None and report.notebook_of(None) is None
    found = {}
    for path in sorted(SOURCES.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        found[path.name[:2]] = sum(map(report.is_claims_cell, code))
    # one claims cell per notebook; 04 has none (its assertions are spread over its parts, none prints the line)
    assert found == {n: (0 if n == "04" else 1) for n in verdicts.NOTEBOOKS}, found


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
            ipython.events.unregister("post_run_cell", report._reporter.after_cell)
        server.shutdown()
        server.server_close()


def _wait(predicate, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(predicate())


def test_a_kernel_reports_claims_cells_and_verdicts_with_its_token(shell):
    from labkit.exercise import compare

    ipython, recorder, url = shell
    reporter = report.install(ipython)
    assert reporter is not None and report.install(ipython) is reporter  # once per kernel
    ipython.run_cell("x = 1")  # not a claims cell: nothing
    ipython.run_cell('assert x == 2, x\nprint("All claims hold on the real broker.")')
    ipython.run_cell('assert x == 1\nprint("All claims hold on the real broker.")')
    assert not compare(2, 3, "Right.", "Not yet.").ok and compare(2, 2, "Right.", "Not yet.").ok
    assert _wait(lambda: len(recorder.got) == 4), recorder.got
    assert {(path, auth) for path, auth, _ in recorder.got} == {("/services/liveview/api/report", "token token-of-ada")}
    assert [body for _, _, body in recorder.got] == [
        {"notebook": "03", "kind": "claims", "ok": False}, {"notebook": "03", "kind": "claims", "ok": True},
        {"notebook": "03", "kind": "exercise", "ok": False}, {"notebook": "03", "kind": "exercise", "ok": True}]
    assert reporter.sent == 4


def test_outside_a_hub_kernel_nothing_reports(shell, monkeypatch):
    ipython, recorder, url = shell
    monkeypatch.delenv(report.URL_ENV)
    assert report.install(ipython) is None  # not on the hub
    report.verdict(True)
    # a process of the lab that is not a kernel (a participant, Spark) imports labkit on the hub: it reports nothing
    participant = subprocess.run([sys.executable, "-c", "import labkit\nfrom labkit.hub import report\n"
                                  "from labkit.exercise import Verdict\nVerdict(True, 'x')\nprint(report._reporter)"],
                                 env={**os.environ, report.URL_ENV: url}, capture_output=True, text=True, timeout=60)
    assert participant.stdout.strip() == "None", participant.stdout + participant.stderr
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
                result = ipython.run_cell('print("All claims hold on the real broker.")')
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


def test_a_broker_is_up_only_when_a_process_of_the_attendee_listens_and_answers(tmp_path, bootstrap):
    port = int(bootstrap.rsplit(":", 1)[1])
    uid = os.getuid()  # the test session's broker runs as this user: it plays the attendee's
    owners = observed.listeners()
    assert owners[port] == uid and observed.answers_kafka(port)
    good = json.dumps({"pid": 1, "bootstrap": f"127.0.0.1:{port}"})
    cases = {"none": (None, "file"), "up": (good, "file"), "link": (good, "link"), "fifo": (None, "fifo"),
             "stranger": (good, "file"), "closed": (json.dumps({"bootstrap": "127.0.0.1:1"}), "file"),
             "garbled": ("{", "file")}
    seen = {}
    for name, (content, mode) in cases.items():
        home = tmp_path / name
        home.mkdir()
        if content is not None or mode == "fifo":
            _state(home, content, mode)
        seen[name] = observed.broker_status(home, uid if name != "stranger" else uid + 12345, owners)
    assert seen == {"none": "none", "up": "up", "link": "none", "fifo": "none", "stranger": "none", "closed": "down",
                    "garbled": "none"}, seen
    assert not observed.answers_kafka(1)
    # a process of another user listening on the port the state names: "down" (it is not this attendee's broker)
    assert observed.broker_status(tmp_path / "up", uid, {**owners, port: uid + 1}) == "down"


# --- a real hub, as root -------------------------------------------------------------------------------------------
