import json
import os
import subprocess
import sys
import time

import pytest

import labkit
from labkit.broker.ports import free_port
from labkit.core.errors import BrokerUnreachableError


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.delenv("LABKIT_BOOTSTRAP", raising=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)  # make lab's kernel, not the workshop hub's
    (tmp_path / "lab").mkdir()
    return tmp_path


def test_labkit_bootstrap_is_the_broker_connect_returns(bootstrap, monkeypatch):
    monkeypatch.setenv("LABKIT_BOOTSTRAP", bootstrap)
    assert labkit.connect(quiet=True) == bootstrap


def test_unreachable_labkit_bootstrap_fails_fast_naming_it(monkeypatch):
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("LABKIT_BOOTSTRAP", address)
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match=f"{address}.*LABKIT_BOOTSTRAP"):
        labkit.connect(timeout_s=2)
    assert time.monotonic() - started < 5


def test_the_lab_broker_is_found_through_its_state_file(home, bootstrap, capsys):
    (home / "lab" / "broker.json").write_text(json.dumps({"pid": os.getpid(), "bootstrap": bootstrap,
                                                          "version": "4.3.2"}))
    assert labkit.connect() == bootstrap
    assert f"Kafka 4.3.2 at {bootstrap} (the lab broker, make lab)" in capsys.readouterr().out


def test_on_the_workshop_hub_the_lab_broker_is_said_to_be_the_attendee_s_own_not_make_lab_s(home, bootstrap,
                                                                                              monkeypatch, capsys):
    """JupyterHub sets JUPYTERHUB_USER in each single-user server's environment (Spawner.get_env), and the kernels of
    that server inherit it: their lab broker is the one the hub's server started for them, not ``make lab``'s."""
    (home / "lab" / "broker.json").write_text(json.dumps({"pid": os.getpid(), "bootstrap": bootstrap,
                                                          "version": "4.4.0"}))
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    assert labkit.connect() == bootstrap
    printed = capsys.readouterr().out
    assert (f"Kafka 4.4.0 at {bootstrap} (your own lab broker, started by the workshop hub when your first kernel "
            "asked for it)") in printed and "make lab" not in printed, printed


def test_without_lab_or_env_a_kernel_broker_starts(home):
    # a stale state file (its process is gone) is ignored
    (home / "lab" / "broker.json").write_text(json.dumps({"pid": 2**22 + 12345, "bootstrap": "127.0.0.1:1"}))
    code = "import labkit; a = labkit.connect(); assert labkit.connect(quiet=True) == a"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LABKIT_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert f"Kafka {labkit.kafka_version()} at 127.0.0.1:" in done.stdout
    assert "(a broker started for this kernel)" in done.stdout
