"""``make hub``'s watch over JupyterHub (labkit/hub/run.py, :func:`labkit.hub.run.serve`): the URL said only once the
sign-in page answers 200 through the proxy, a line when it does not answer in time, and a second Ctrl-C that ends a
hub whose stop hangs at once, with what it ran. JupyterHub is played by a small HTTP server (``HUB``, no Kafka in it),
so that the proxy's 404 and a stop that hangs happen on cue; ``make hub`` itself runs as the command line runs it, in
a process of its own that the test sends SIGINT as a terminal's Ctrl-C does. The real hub's clean stop (SIGTERM) is
tests/test_hub.py's and tests/test_hub_room.py's; what a killed hub leaves, stopped, tests/test_hub_room.py's SIGKILL
test. Root only for the second Ctrl-C (the hub's leftovers are root's processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from labkit.broker.ports import free_port
from labkit.core.waiting import wait_until

#: JupyterHub's stand-in: ``HUB PORT FOLDER HANG``. Serves ``/hub/login`` with 404 until ``FOLDER/open`` exists, then
#: 200, counting each GET in ``FOLDER/gets``; starts a "proxy" (a process of its own session whose command line names
#: configurable-http-proxy, working in its folder, as JupyterHub's does); on SIGTERM writes ``FOLDER/stopping`` and,
#: if HANG is 1, goes on (a stop that waits on every attendee's server), else exits with its proxy.
HUB = r"""
import http.server, os, signal, subprocess, sys, threading
port, folder, hang = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
proxy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "configurable-http-proxy"],
                         cwd=folder, start_new_session=True)

class Login(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(folder, "gets"), "a") as gets:
            gets.write(self.path + "\n")
        opened = self.path == "/hub/login" and os.path.exists(os.path.join(folder, "open"))
        self.send_response(200 if opened else 404)
        self.end_headers()

    def log_message(self, *args):
        pass

def on_term(signum, frame):
    open(os.path.join(folder, "stopping"), "w").close()
    if not hang:
        proxy.kill()
        os._exit(0)

signal.signal(signal.SIGTERM, on_term)
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Login)
threading.Thread(target=server.serve_forever, daemon=True).start()
while True:
    signal.pause()
"""
#: ``make hub``'s watch as :func:`labkit.hub.run.main` runs it: ``MAKE_HUB FOLDER URL READY_S HUB...``.
MAKE_HUB = r"""
import subprocess, sys
from pathlib import Path
from labkit.core.procs import spawn
from labkit.hub import run
folder, url, ready_s, hub = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4:]
stops = run.count_stops()
proc = spawn(hub, cwd=folder, stdin=subprocess.DEVNULL, start_new_session=True)
print(f"hub {proc.pid}", flush=True)
sys.exit(run.serve(proc, url, folder, [f"READY {url}"], stops, ready_s=ready_s, say=lambda l: print(l, flush=True)))
"""


def _make_hub(tmp_path: Path, ready_s: float, hang: bool) -> tuple[subprocess.Popen, Path, str]:
    """``make hub``'s watch over a stand-in hub in ``tmp_path`` (its output in ``tmp_path/out``); returns the process,
    the output's path and the hub's URL, once the stand-in runs."""
    port, out = free_port(), tmp_path / "out"
    (tmp_path / "hub.py").write_text(HUB)
    url = f"http://127.0.0.1:{port}/"
    repo = Path(__file__).resolve().parents[1]
    with open(out, "w") as log:
        watch = subprocess.Popen([sys.executable, "-c", MAKE_HUB, str(tmp_path), url, str(ready_s), sys.executable,
                                  str(tmp_path / "hub.py"), str(port), str(tmp_path), "1" if hang else "0"],
                                 cwd=repo, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    assert wait_until(lambda: "hub " in out.read_text() or watch.poll() is not None, 30, 0.1), out.read_text()
    return watch, out, url


def _hub_and_proxy(tmp_path: Path, out: Path) -> list[psutil.Process]:
    hub = psutil.Process(int(out.read_text().split("hub ")[1].split()[0]))
    wait_until(lambda: bool(hub.children()), 10, 0.1)
    return [hub, *hub.children()]


def _end(watch: subprocess.Popen) -> None:
    if watch.poll() is None:
        watch.send_signal(signal.SIGINT)
        watch.send_signal(signal.SIGINT)
        watch.wait(30)


def test_make_hub_says_its_url_only_once_the_sign_in_page_answers_200_through_the_proxy(tmp_path):
    watch, out, url = _make_hub(tmp_path, ready_s=60, hang=False)
    try:
        assert wait_until(lambda: (tmp_path / "gets").exists(), 20, 0.1), out.read_text()
        time.sleep(1.0)  # several GETs answered 404 (the proxy before JupyterHub added its route)
        assert "READY" not in out.read_text() and set((tmp_path / "gets").read_text().split()) == {"/hub/login"}
        (tmp_path / "open").touch()
        assert wait_until(lambda: f"READY {url}" in out.read_text(), 10, 0.1), out.read_text()
        watch.send_signal(signal.SIGINT)  # one Ctrl-C: the hub's own stop, which ends it
        assert watch.wait(20) == 0, out.read_text()
        assert "Stopping the hub: every attendee's server first" in out.read_text()
        assert (tmp_path / "stopping").exists()
    finally:
        _end(watch)


def test_a_hub_that_does_not_answer_in_time_is_said_not_to_answer_naming_its_log(tmp_path):
    watch, out, url = _make_hub(tmp_path, ready_s=1.0, hang=False)
    try:
        said = f"The hub does not answer at {url}hub/login after 1 s: its log is JupyterHub's lines above"
        assert wait_until(lambda: said in out.read_text(), 20, 0.1), out.read_text()
        assert "READY" not in out.read_text()
        (tmp_path / "open").touch()  # it answers later: the URL follows then
        assert wait_until(lambda: f"READY {url}" in out.read_text(), 10, 0.1), out.read_text()
    finally:
        _end(watch)


def test_a_second_ctrl_c_kills_a_hub_whose_stop_hangs_and_stops_the_processes_it_ran(tmp_path):
    """JupyterHub runs its whole stop again on each signal (its init_signal), so a second Ctrl-C used to wait as long as
    the first (31 s measured): now it SIGKILLs JupyterHub and stops what it ran (labkit.hub.leftovers.stop_left_by:
    here the stand-in's proxy) within seconds."""
    if os.geteuid() != 0:
        pytest.skip("a hub's leftovers are root's processes (labkit.hub.leftovers): run it as root")
    watch, out, url = _make_hub(tmp_path, ready_s=60, hang=True)
    try:
        hub, proxy = _hub_and_proxy(tmp_path, out)
        watch.send_signal(signal.SIGINT)
        assert wait_until(lambda: (tmp_path / "stopping").exists(), 10, 0.1), out.read_text()
        time.sleep(1.0)
        assert hub.is_running() and watch.poll() is None  # its stop hangs, and make hub waits for it
        second = time.monotonic()
        watch.send_signal(signal.SIGINT)
        assert watch.wait(20) == 128 + signal.SIGINT, out.read_text()
        took = time.monotonic() - second
        assert took < 5, (took, out.read_text())
        assert not hub.is_running() and not proxy.is_running()
        printed = out.read_text()
        assert "Stopping the hub at once" in printed and \
            f"stopped the old hub's configurable-http-proxy (pid {proxy.pid})" in printed, printed
    finally:
        _end(watch)
