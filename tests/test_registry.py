"""The role registry: roles found by file name, options checked with a clear error, a process importing only its
own role, and a role added as one module from outside labkit (tests/echo_role.py), run as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.registry import load, role_modules

ROOT = Path(__file__).parents[1]


def test_every_labkit_role_is_found_by_its_file_name():
    assert set(role_modules()) == {"producer", "consumer", "processor", "share_consumer", "spark_pipeline",
                                   "spark_realtime"}
    for name in role_modules():
        role = load(name)
        assert role.name == name and role.steps and callable(role.run)


def test_an_unknown_option_names_the_closest_valid_one(tmp_path):
    exp = Experiment("registry", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="no option 'idle_m' \\(did you mean 'idle_ms'\\?\\); its options are "):
        exp.participant("c", "consumer", topic="t", group_id="g", idle_m=20_000)
    with pytest.raises(ValueError, match="idle_ms must be int, not str '20s'"):
        exp.participant("c", "consumer", topic="t", group_id="g", idle_ms="20s")
    with pytest.raises(ValueError, match="transactional must be bool, not int 1"):
        exp.participant("p", "processor", topic="t", group_id="g", output_topic="o", transactional=1)
    with pytest.raises(ValueError, match="unknown role 'consumr'; the roles are consumer, processor, producer"):
        exp.participant("c", "consumr", topic="t")
    with pytest.raises(ValueError, match="a transactional producer needs transactional_id"):
        exp.participant("p", "producer", topic="t", mode="transactional")


def test_defaults_are_filled_in_and_a_restart_checks_its_changes(tmp_path):
    exp = Experiment("registry", "127.0.0.1:1", folder=tmp_path)
    p = exp.participant("p", "producer", topic="t", batch=5)
    assert (p.spec["batch"], p.spec["iterations"], p.spec["mode"]) == (5, 10, "idempotent")
    with pytest.raises(ValueError, match="no option 'batches'"):
        p.restart(batches=3)


@pytest.mark.parametrize("role", ["producer", "consumer", "processor", "share_consumer", "spark_pipeline"])
def test_a_participant_process_imports_only_its_own_role(role):
    loaded = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, sys; import labkit.crashlab.run; from labkit.crashlab.registry import load; "
         f"load({role!r}); print(json.dumps(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True, cwd=ROOT, timeout=60).stdout)
    own = role_modules()[role]
    package = own.split(".")[1]  # the role's own package: a Spark role needs labkit.spark's session
    roles = [m for m in loaded if ".roles." in m]
    topics = [m for m in loaded if m.startswith(("labkit.share", "labkit.spark")) and m.split(".")[1] != package]
    assert roles == [own] and topics == [], (roles, topics)
    assert not [m for m in loaded if m.startswith(("pandas", "pyspark", "plotly", "labkit.lessons", "labkit.models"))]


def test_a_role_added_as_one_module_runs_as_a_participant(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the child imports tests.echo_role, as any importable module
    exp = Experiment("registry", "127.0.0.1:1", folder=tmp_path)
    modules = tmp_path / "modules.json"
    echo = exp.participant("echo", "tests.echo_role", topic="t", times=3, modules_file=str(modules))
    assert echo.start().wait(30) == "finished"
    assert [e.value_id for e in exp.history.events() if e.kind == "send"] == ["echo-1", "echo-2", "echo-3"]
    assert "labkit.crashlab.roles.producer" not in json.loads(modules.read_text())
    crashing = exp.participant("echo-2", "tests.echo_role", topic="t", modules_file=str(modules), crash_at="tick",
                               crash_iteration=2)
    assert crashing.start().wait(30) == "crashed"
    assert [e.value_id for e in exp.history.events() if e.kind == "send" and e.participant == "echo-2"] == ["echo-2-1"]
