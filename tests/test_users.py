"""Attendees' Unix users (labkit/hub/users.py) made by several hubs of one machine at the same moment: each a uid of
its own, none refused. Root only (skipped otherwise, saying why); every user made is removed."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.core.errors import LabkitError
from labkit.hub import sandbox, users

#: One hub's first sign-in, in a process of its own: wait for the start file, make the user, print its uid.
MAKE = """
import os, sys, time
from labkit.hub import users
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
print(users.create(sys.argv[1]).pw_uid)
"""
HUBS = 6


def test_hubs_making_attendees_at_the_same_moment_give_each_a_uid_of_its_own(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the test makes Unix users: run it as root")
    start = tmp_path / "start"
    names = [f"race{secrets.token_hex(4)}" for _ in range(HUBS)]
    repo = Path(__file__).resolve().parents[1]
    hubs = [subprocess.Popen([sys.executable, "-c", MAKE, name, str(start)], cwd=repo, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for name in names]
    try:
        start.touch()  # all at once
        done = [hub.communicate(timeout=300) for hub in hubs]
        assert [hub.returncode for hub in hubs] == [0] * HUBS, [err[-500:] for _, err in done]
        uids = [int(out) for out, _ in done]
        assert len(set(uids)) == HUBS and all(uid in sandbox.ATTENDEE_UIDS for uid in uids), uids
    finally:
        for hub in hubs:
            hub.kill()
            hub.wait()
        for name in names:
            users.remove(name, tmp_path)


def test_with_every_attendee_uid_taken_a_sign_in_is_told_to_end_a_room_or_remove_attendees_as_the_run_sheet_says(
        monkeypatch):
    """The message counts who holds the uids and names the run-sheet's two ways to free them (docs/instructor.md):
    ``make hub-end`` and ``labkit.hub.users remove``, never a bare ``userdel -r`` (it leaves the attendee's files
    outside the home to the next attendee given that uid)."""
    if os.geteuid() != 0:
        pytest.skip("the accounts lock is root's: run it as root")
    monkeypatch.setattr(users, "ATTENDEE_UIDS", range(0, 2))  # root and daemon: taken, and not the lab's
    with pytest.raises(LabkitError) as refused:
        users.create(f"full{secrets.token_hex(4)}", room="0123abcd")
    message = str(refused.value)
    assert "All 2 attendee accounts of this machine are taken (uids 0-1)" in message, message
    assert "0 by this room's attendees, 0 by other rooms' (or from before rooms), 2 by users the lab did not make" \
        in message, message
    assert "sudo make hub-end ROOM=<its name>" in message and "python -m labkit.hub.users remove <name>" in message
    assert "userdel" not in message
