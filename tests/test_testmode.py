"""``labkit.under_test()``: a notebook's CI-only cells (pressing a playground's buttons) act only under the test
runner, which says so with ``LABKIT_CI=1`` (conftest.py, ``make test``); every kernel nbval starts inherits it."""

import pytest

import labkit
from labkit.learn import testmode


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", " 1 "])
def test_under_test_when_the_test_run_sets_labkit_ci(monkeypatch, value):
    monkeypatch.setenv("LABKIT_CI", value)
    assert labkit.under_test() is True


@pytest.mark.parametrize("value", [None, "", "0", "false", "no", "off"])
def test_not_under_test_in_a_learners_lab(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("LABKIT_CI", raising=False)
    else:
        monkeypatch.setenv("LABKIT_CI", value)
    assert labkit.under_test() is False


def test_it_is_public_and_read_at_each_call(monkeypatch):
    assert "under_test" in labkit.__all__ and labkit.under_test is testmode.under_test and testmode.ENV == "LABKIT_CI"
    monkeypatch.setenv("LABKIT_CI", "1")
    assert labkit.under_test()
    monkeypatch.delenv("LABKIT_CI")
    assert not labkit.under_test()


def test_the_test_run_sets_it_and_an_nbval_kernel_inherits_it():
    """conftest.py's ``pytest_configure`` set it in this process; a kernel started the way nbval starts one sees it."""
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, start_new_kernel

    assert labkit.under_test()
    seen = []
    km, kc = start_new_kernel(kernel_name=CURRENT_ENV_KERNEL_NAME)
    try:
        reply = kc.execute_interactive("import labkit, os; print(os.environ.get('LABKIT_CI'), labkit.under_test())",
                                       timeout=60, output_hook=seen.append)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    text = "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
    assert text.split() == ["1", "True"], text


RUN = '''
import pathlib, time, pytest

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    pathlib.Path("made").write_text("yes")
    try:
        yield
    finally:
        time.sleep(2)  # a teardown that takes a while, as the hub's does
        pathlib.Path("removed").write_text("yes")

def test_waits(made):
    time.sleep(600)
'''


def test_a_sigterm_to_the_controller_stops_the_run_after_every_fixtures_teardown(tmp_path):
    """Killed by a time limit, the xdist run still tears its fixtures down: what they made (a hub's Unix users) is
    removed. A job runner may signal the controller only: it passes the SIGTERM on to its worker, which tears down and
    reports the interruption (``timeout`` signals the whole process group: the worker's own handler acts at once and
    the controller's copy finds it ignoring SIGTERM already)."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import psutil

    from labkit.core.waiting import wait_until

    (tmp_path / "conftest.py").write_text("from labkit.learn import testmode\n\ndef pytest_configure(config):\n"
                                          "    testmode.stop_on_sigterm(not hasattr(config, 'workerinput'))\n")
    (tmp_path / "test_run.py").write_text(RUN)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", "test_run.py"],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        assert wait_until(lambda: (tmp_path / "made").exists() or run.poll() is not None, 180, 0.2), "no fixture set up"
        workers = psutil.Process(run.pid).children()
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert (tmp_path / "removed").exists(), out
    assert run.returncode == 2 and "keyboard-interrupt" in out, out  # pytest's "interrupted", from the worker
    assert workers and not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
