"""`make lab` / `make stop`: the lab broker and JupyterLab in the background, and 00_tour in them."""

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from labkit.broker.probe import check_reachable
from labkit.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]


from labkit.broker.settings import FEATURES_BY_VERSION, kafka_version


def lab(command, env):
    return subprocess.run([sys.executable, "-m", "labkit", command], capture_output=True, text=True,
                          timeout=180, env=env, cwd=REPO)


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_lab_up_runs_the_tour_and_down_stops_everything(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LABKIT_BOOTSTRAP"}
    env["LABKIT_HOME"] = str(tmp_path)
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
        with urllib.request.urlopen(f"{base}/api/contents/00_tour.ipynb?token={token}", timeout=10) as r:
            assert json.load(r)["name"] == "00_tour.ipynb"
        plugin = "@jupyterlab/apputils-extension:notification"  # no "official Jupyter news?" prompt
        with urllib.request.urlopen(f"{base}/lab/api/settings/{plugin}?token={token}", timeout=10) as r:
            defaults = json.load(r)["schema"]["properties"]
        assert defaults["fetchNews"]["default"] == "false" and defaults["checkForUpdates"]["default"] is False
        again = lab("up", env)  # a second `up` finds both running and starts nothing new
        assert url in again.stdout and state["broker"]["bootstrap"] in again.stdout
        assert json.loads((tmp_path / "lab" / "jupyter.json").read_text())["pid"] == state["jupyter"]["pid"]
        other = next(v for v in FEATURES_BY_VERSION if v != version)  # another release: refused, named
        mixed = lab("up", {**env, "LABKIT_KAFKA_VERSION": other})
        assert mixed.returncode != 0 and f"already runs Kafka {version}, not {other}" in mixed.stderr
        assert "make stop" in mixed.stderr

        nb = nbformat.read(REPO / "notebooks" / "00_tour.ipynb", as_version=4)
        old_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)  # the kernel inherits this: no LABKIT_BOOTSTRAP, the lab's LABKIT_HOME
        try:
            NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
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


def test_lab_settings_keep_other_overrides(tmp_path):
    from labkit.lab import LAB_SETTINGS, write_lab_settings

    (tmp_path / "overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
        "@jupyterlab/apputils-extension:notification": {"doNotDisturbMode": True, "fetchNews": "true"}}))
    written = json.loads(write_lab_settings(tmp_path).read_text())
    assert written["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert written["@jupyterlab/apputils-extension:notification"] == {
        "doNotDisturbMode": True, **LAB_SETTINGS["@jupyterlab/apputils-extension:notification"]}


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
