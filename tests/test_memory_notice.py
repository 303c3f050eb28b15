"""The learner told in their notebook that their lab reached its memory limit (labkit/hub/memory_notice.py, issue 49):
from what the hub wrote of their memory group, once per new OOM kill, before the next cell in a real IPython shell."""

from __future__ import annotations

import json

from IPython.core.interactiveshell import InteractiveShell

from labkit.hub import memory_notice


def _observed(path, kills: int, limit: int = 2048) -> None:
    path.write_text(json.dumps({"limit_mib": limit, "oom_kills": kills}))


def test_a_notice_comes_once_per_new_oom_kill_and_never_for_a_missing_or_garbled_file(tmp_path):
    info, told = tmp_path / "memory.json", tmp_path / "lab" / memory_notice.TOLD
    assert memory_notice.notice(info, told) is None  # not on the hub, or nothing written yet
    _observed(info, 0)
    assert memory_notice.notice(info, told) is None
    _observed(info, 1, 1536)
    first = memory_notice.notice(info, told)
    assert "memory limit (1536 MiB)" in first and "1 time since" in first and told.read_text() == "1"
    assert memory_notice.notice(info, told) is None  # told already
    _observed(info, 3)
    assert "2 times since" in memory_notice.notice(info, told)
    info.write_text("{")
    assert memory_notice.notice(info, told) is None


def test_the_notice_heads_the_next_cell_s_output_in_a_real_ipython_shell(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path / "home"))
    info = tmp_path / "memory.json"
    assert not memory_notice.install(InteractiveShell.instance(), info)  # no file: not the hub, nothing installed
    _observed(info, 0)
    shell = InteractiveShell.instance()
    assert memory_notice.install(shell, info)
    shell.run_cell("x = 1")
    assert "memory limit" not in capsys.readouterr().err
    _observed(info, 1)
    shell.run_cell("x = 2")
    assert "Your lab reached its memory limit (2048 MiB)" in capsys.readouterr().err
    shell.run_cell("x = 3")
    assert "memory limit" not in capsys.readouterr().err
    assert (tmp_path / "home" / "lab" / memory_notice.TOLD).read_text() == "1"
