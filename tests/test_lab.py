"""`make lab` / `make stop`: the lab broker and JupyterLab in the background, and 00_tour in them (the learner's copy:
the repository's notebooks stay as they are)."""

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient

from labkit.broker.probe import check_reachable
from labkit.core.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]


from labkit.broker.settings import FEATURES_BY_VERSION, kafka_version
from labkit.lab.workspace import CULL_IDLE_TIMEOUT_S, LAB_SETTINGS, WIDGET_VIEW


def lab(command, env):
    return subprocess.run([sys.executable, "-m", "labkit", command], capture_output=True, text=True,
                          timeout=180, env=env, cwd=REPO)


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def tracked_notebooks() -> tuple[str, dict]:
    """``git status --porcelain notebooks/`` and the SHA-256 of every file in ``notebooks/``."""
    status = subprocess.run(["git", "status", "--porcelain", "notebooks/"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout
    return status, {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (REPO / "notebooks").iterdir()
                    if p.is_file()}


def api(base: str, token: str, path: str, body: dict | None = None, method: str | None = None) -> dict | None:
    """A call of the Jupyter server's REST API: its JSON answer, or ``None`` when it has none."""
    request = urllib.request.Request(f"{base}/api/{path}?token={token}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        answer = r.read()
    return json.loads(answer) if answer else None


def test_lab_up_runs_the_tour_and_down_stops_everything(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LABKIT_BOOTSTRAP"}
    env["LABKIT_HOME"] = str(tmp_path)
    repository_before = tracked_notebooks()
    up = lab("up", env)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        assert "Warning" not in up.stderr, up.stderr  # the first thing a newcomer reads is not a warning
        version = kafka_version()
        assert f"({'Kafka ' + version})" in up.stdout
        assert (tmp_path / "lab" / f"broker-data-{version}" / "kafka-version").read_text().strip() == version
        state = {n: json.loads((tmp_path / "lab" / f"{n}.json").read_text()) for n in ("broker", "jupyter")}
        check_reachable(state["broker"]["bootstrap"])
        url = state["jupyter"]["url"]
        assert url in up.stdout and url.startswith("http://127.0.0.1:") and "token=" in url
        base, token = url.split("/lab/")[0], url.split("token=")[1]
        work = tmp_path / "work"  # JupyterLab serves the learner's copies, made by this first `up`
        assert f"Notebooks:    your own copies, in {work}" in up.stdout and "made your copies of" in up.stdout
        tour = api(base, token, "contents/00_tour.ipynb")
        assert tour["name"] == "00_tour.ipynb"
        assert (work / "00_tour.ipynb").exists() and (work / "glossary.md").exists()
        # a learner's save (JupyterLab's autosave), with a widget view whose model is not saved: it lands in the copy,
        # without the view (reopened, it would say "model not found")
        nb = tour["content"]
        code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        code["source"] += "\n# my change"
        code["outputs"] = [{"output_type": "display_data", "metadata": {}, "data": {
            "text/plain": "ControlPanel()", WIDGET_VIEW: {"model_id": "f00", "version_major": 2, "version_minor": 0}}}]
        api(base, token, "contents/00_tour.ipynb", {"type": "notebook", "format": "json", "content": nb}, "PUT")
        saved = json.loads((work / "00_tour.ipynb").read_text())
        saved_code = next(c for c in saved["cells"] if c["cell_type"] == "code")
        assert "# my change" in "".join(saved_code["source"])
        assert list(saved_code["outputs"][0]["data"]) == ["text/plain"]
        # a kernel started by the server: it runs with the lab's culling of idle kernels
        session = api(base, token, "sessions", {"path": "01_idempotence.ipynb", "type": "notebook",
                                                "name": "01_idempotence.ipynb", "kernel": {"name": "python3"}})
        culling = f"Culling kernels with idle durations > {CULL_IDLE_TIMEOUT_S} seconds"
        assert wait_until(lambda: culling in (tmp_path / "lab" / "jupyter.log").read_text(), 30)
        assert "Culling kernels even with connected clients" in (tmp_path / "lab" / "jupyter.log").read_text()
        api(base, token, f"sessions/{session['id']}", method="DELETE")
        for plugin, wanted in LAB_SETTINGS.items():  # e.g. no "official Jupyter news?" prompt, a 15 s save margin
            with urllib.request.urlopen(f"{base}/lab/api/settings/{plugin}?token={token}", timeout=10) as r:
                defaults = json.load(r)["schema"]["properties"]
            assert {key: defaults[key]["default"] for key in wanted} == wanted, plugin
        again = lab("up", env)  # a second `up` finds both running and starts nothing new, and makes no copy again
        assert url in again.stdout and state["broker"]["bootstrap"] in again.stdout
        assert "made your copies" not in again.stdout and "newer version" not in again.stdout
        assert "# my change" in (work / "00_tour.ipynb").read_text()
        assert json.loads((tmp_path / "lab" / "jupyter.json").read_text())["pid"] == state["jupyter"]["pid"]
        other = next(v for v in FEATURES_BY_VERSION if v != version)  # another release: refused, named
        mixed = lab("up", {**env, "LABKIT_KAFKA_VERSION": other})
        assert mixed.returncode != 0 and f"already runs Kafka {version}, not {other}" in mixed.stderr
        assert "make stop" in mixed.stderr

        nb = nbformat.read(work / "00_tour.ipynb", as_version=4)  # the learner's copy, run from its folder
        old_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)  # the kernel inherits this: no LABKIT_BOOTSTRAP, the lab's LABKIT_HOME
        try:
            NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(work)}}).execute()
        finally:
            os.environ.clear()
            os.environ.update(old_env)
        printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert f"Kafka {version} at {state['broker']['bootstrap']} (the lab broker, make lab)" in printed
    finally:
        down = lab("down", env)
    assert "broker" in down.stdout and "jupyter" in down.stdout
    assert wait_until(lambda: not any(alive(s["pid"]) for s in state.values()), 30)
    assert lab("status", env).stdout.count("not running") == 2
    assert tracked_notebooks() == repository_before  # the repository's notebooks: not one byte written


def test_stop_never_signals_a_process_that_reuses_a_recorded_pid(tmp_path):
    """A state file naming a live process the lab did not start (pid reuse after a reboot, or a state file of an
    older labkit without a start time): `make stop` leaves it alone and says why."""
    env = {**os.environ, "LABKIT_HOME": str(tmp_path)}
    (tmp_path / "lab").mkdir()
    strangers = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    try:
        (tmp_path / "lab" / "broker.json").write_text(json.dumps(
            {"pid": strangers[0].pid, "started": 1.0, "bootstrap": "127.0.0.1:1", "version": kafka_version()}))
        (tmp_path / "lab" / "jupyter.json").write_text(json.dumps({"pid": strangers[1].pid, "url": "http://x"}))
        status = lab("status", env).stdout
        assert "broker: not running (pid reused" in status and "jupyter: not verifiable" in status
        down = lab("down", env)
        assert down.returncode == 0, down.stderr
        assert f"broker: not running (pid reused: pid {strangers[0].pid}" in down.stdout
        assert "jupyter: not verifiable" in down.stdout and "not signalled" in down.stdout
        assert all(s.poll() is None for s in strangers)  # both still alive
        assert not list((tmp_path / "lab").glob("*.json"))
    finally:
        for s in strangers:
            s.kill()
            s.wait()


def test_up_refuses_a_running_jupyterlab_that_serves_the_repository(tmp_path, monkeypatch):
    """A JupyterLab an older labkit started serves the repository's own notebooks (its state file names no root):
    `make lab` says to stop it first rather than hand out its URL."""
    from labkit.lab import server as lab_module
    from labkit.core.errors import LabkitError
    from labkit.core.procs import start_time

    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    (tmp_path / "lab").mkdir()
    old = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (tmp_path / "lab" / "jupyter.json").write_text(json.dumps(
            {"pid": old.pid, "started": start_time(old.pid), "url": "http://127.0.0.1:1/lab"}))
        with pytest.raises(LabkitError, match="serves the repository's own notebooks.*make stop"):
            lab_module._start_jupyter(5)
        assert old.poll() is None
    finally:
        old.kill()
        old.wait()


def test_a_kernel_run_while_the_lab_broker_starts_waits_for_it_and_starts_no_broker_of_its_own(tmp_path, monkeypatch):
    """The workshop hub starts an attendee's broker beside JupyterLab (labkit.hub.singleuser): a notebook's first
    ``labkit.connect()`` during the broker's start says it waits, then uses that broker; its process started no JVM."""
    from labkit.lab import server as lab_module

    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.delenv("LABKIT_BOOTSTRAP", raising=False)
    env = {**os.environ}
    daemon = lab_module.spawn_broker()
    try:
        assert daemon is not None and lab_module.starting_broker()["pid"] == daemon.pid
        assert lab("status", env).stdout.startswith("broker: starting")
        assert lab_module.spawn_broker() is None  # one starts already: no second daemon
        kernel = subprocess.Popen([sys.executable, "-c", "import labkit; print(labkit.connect())"], env=env,
                                  cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        jvms = set()
        while kernel.poll() is None:  # the JVMs it starts, if any, as it runs
            try:
                jvms |= {c.pid for c in psutil.Process(kernel.pid).children(recursive=True) if "java" in c.name()}
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        out, err = kernel.communicate(timeout=60)
        assert kernel.returncode == 0, err
        assert "The lab broker is starting: waiting for it" in out, out
        assert f"at {lab_module.running_broker()} (the lab broker, make lab)" in out and not jvms, (out, jvms)
    finally:
        lab("down", env)
    assert wait_until(lambda: daemon.poll() is not None, 60) and lab_module.starting_broker() is None
