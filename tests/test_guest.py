"""bench/guest.py's pure parts: the image cache key and its refusals (the guest itself boots only in the bench run,
minutes under TCG, never in ``make test``)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))  # a bench script imports its neighbours, as when run
import guest  # noqa: E402


def test_the_cache_key_changes_with_each_thing_the_image_is_built_from_and_not_with_package_order():
    key = guest.cache_key("bookworm", ("python3", "systemd"), agent=b"agent")
    assert key == guest.cache_key("bookworm", ("systemd", "python3", "systemd"), agent=b"agent")
    others = {guest.cache_key("trixie", ("python3", "systemd"), agent=b"agent"),
              guest.cache_key("bookworm", ("python3", "systemd", "default-jre-headless"), agent=b"agent"),
              guest.cache_key("bookworm", ("python3", "systemd"), mirror="http://example.org/debian", agent=b"agent"),
              guest.cache_key("bookworm", ("python3", "systemd"), agent=b"agent, changed")}
    assert key not in others and len(others) == 4 and len(key) == 12


def test_an_unknown_suite_is_refused_by_the_key_and_by_the_command_line(capsys):
    with pytest.raises(guest.GuestError, match="one of bookworm, trixie"):
        guest.cache_key("sid", ())
    with pytest.raises(SystemExit) as stopped:
        guest.main(["--suite", "sid"])
    assert stopped.value.code == 2 and "invalid choice: 'sid'" in capsys.readouterr().err


def test_missing_tools_are_named_with_the_apt_line_that_installs_them(monkeypatch, capsys):
    monkeypatch.setattr(guest.shutil, "which", lambda tool: None if tool == "mmdebstrap" else "/usr/bin/" + tool)
    with pytest.raises(SystemExit) as stopped:
        guest.main(["--suite", "bookworm"])
    assert stopped.value.code == 2
    assert "missing mmdebstrap: apt-get install mmdebstrap qemu-system-x86 e2fsprogs" in capsys.readouterr().err
