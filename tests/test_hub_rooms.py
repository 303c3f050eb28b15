"""A workshop is a room with a start and an end (labkit/hub/rooms.py, issue 65): a plain ``make hub`` starts a new room
that sees nothing of an earlier one, a named room is resumed with its marks, and the end of the day writes the room's
marks and predictions to a CSV and removes the room's Unix users and folder, nothing else. The functions themselves on
real files, SQLite stores and (as root) real Unix users; the same end of a room on a real hub is in
tests/test_hub_room.py."""

from __future__ import annotations

import csv
import os
import pwd
import secrets
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit.core.errors import LabkitError
from labkit.hub import names, rooms, run, sandbox, users
from labkit.hub.config import landing
from labkit.hub.verdicts import FILE_NAME, Store
from labkit.learn.marks import CHOICES

DAY = date(2026, 12, 7)


def _room(rooms_dir: Path, name: str | None = None) -> tuple[Path, dict]:
    """A room as ``make hub`` leaves it: chosen, locked once (``hub.lock``), its record made."""
    state, _ = rooms.choose(name, rooms_dir, DAY)
    os.close(run.lock_state(state))
    return state, rooms.ensure_record(state)


def _mark(state: Path, *marks: tuple) -> None:
    store = Store(state / FILE_NAME)
    try:
        for user, notebook, kind, value in marks:
            store.record(user, notebook, kind, value, at=1_765_000_000.0)
    finally:
        store.close()


def test_a_plain_make_hub_starts_a_new_room_with_an_empty_live_view_and_names_the_old_one_not_ended(tmp_path):
    old, _ = _room(tmp_path)
    _mark(old, ("ada", "00", "exercise", "right"), ("ada", "00", "prediction", "gone"))
    state, new = rooms.choose(None, tmp_path, DAY)
    assert new and state == tmp_path / "2026-12-07-2" and old == tmp_path / "2026-12-07"
    os.close(run.lock_state(state))
    record = rooms.ensure_record(state)
    assert record["name"] == "2026-12-07-2" and record["id"] != rooms.record(old)["id"]
    assert Store(state / FILE_NAME).marks() == {}  # the live view's store: no old marks nor predictions
    assert not (state / "passwords.dbm").exists() and not (state / "jupyterhub.sqlite").exists()  # no old names
    lines = rooms.first_lines(state, True, tmp_path, tmp_path / "no-old-state")
    assert lines[0].startswith("New room 2026-12-07-2: no attendees, marks or predictions yet"), lines
    assert "sudo make hub ROOM=2026-12-07-2" in lines[0] and "sudo make hub-end ROOM=2026-12-07-2" in lines[0]
    assert lines[1].startswith("  not ended: room 2026-12-07 (") and "make hub-end ROOM=2026-12-07" in lines[1], lines
    assert len(lines) == 2


def test_a_room_named_again_is_resumed_with_its_marks_and_a_bad_name_is_refused(tmp_path):
    state, record = _room(tmp_path, "kafka-day")
    _mark(state, ("ada", "09", "claims", "held"))
    again, new = rooms.choose("kafka-day", tmp_path, DAY)
    assert again == state and not new and rooms.ensure_record(again) == record
    assert Store(again / FILE_NAME).marks()["ada"][("09", "claims")].state == "held"
    lines = rooms.first_lines(again, False, tmp_path, tmp_path / "no-old-state")
    assert lines[0].startswith("Resuming room kafka-day (started ") and "1 marks kept" in lines[0], lines
    with pytest.raises(LabkitError, match="cannot name a room"):
        rooms.choose("../etc", tmp_path)
    before_rooms = tmp_path / "state"  # a hub's state from before rooms: its database, no record
    before_rooms.mkdir()
    (before_rooms / "jupyterhub.sqlite").touch()
    assert not rooms.unused(before_rooms) and rooms.unused(tmp_path / "2026-12-08")
    assert rooms.first_lines(state, False, tmp_path, before_rooms)[-1].startswith(f"  not ended: {before_rooms}, a "
                                                                                  "hub's state from before rooms")


def test_the_instructor_lands_on_the_live_view_and_an_attendee_on_their_lab():
    def handler(roles: list[str] | None):
        user = None if roles is None else SimpleNamespace(roles=[SimpleNamespace(name=r) for r in roles], admin=False)
        return SimpleNamespace(current_user=user, base_url="/")

    assert landing(handler(["instructor", "user"])) == "/services/liveview/"  # config.INSTRUCTOR_ROLE, not admin
    assert landing(handler(["user"])) == "" and landing(handler(None)) == ""  # JupyterHub's default: their own lab


def test_ending_a_room_that_is_no_hub_s_or_whose_hub_runs_removes_nothing(tmp_path):
    folder = tmp_path / "not-a-room"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(LabkitError, match="not a hub's state folder"):
        rooms.end(folder, tmp_path / "marks.csv", say=lambda line: None)
    state, _ = _room(tmp_path, "busy")
    fd = run.lock_state(state)  # a hub holding it
    try:
        with pytest.raises(LabkitError, match="still runs"):
            rooms.end(state, tmp_path / "marks.csv", say=lambda line: None)
    finally:
        os.close(fd)
    assert (folder / "keep.txt").exists() and (state / rooms.RECORD).exists() and not (tmp_path / "marks.csv").exists()


@pytest.fixture
def attendees():
    """Three hub names unique to this run; after, their Unix users removed if the lab made them (root only)."""
    if os.geteuid() != 0:
        pytest.skip("ending a room removes real Unix users: run it as root")
    made = [f"r{secrets.token_hex(3)}{c}" for c in "abc"]
    yield made
    for name in made:
        users.remove(name, "/nonexistent")


def test_the_end_of_the_day_writes_the_room_s_csv_then_removes_its_users_and_folder_and_no_other_room_s(
        tmp_path, attendees, capsys):
    ada, bob, other = attendees
    state, record = _room(tmp_path, "day-1")
    for name in (ada, bob):
        users.create(name, record["id"])
    users.create(other, "0ther1d0")  # a user of another room, not ended
    (sandbox.private_root(state) / str(pwd.getpwnam(names.unix_name(ada)).pw_uid)).mkdir(parents=True)
    _mark(state, (ada, "00", "exercise", "right"), (ada, "00", "prediction", "gone"), (ada, "00", "kernel", "idle"))
    with pytest.raises(LabkitError, match="another room's"):
        users.create(other, record["id"])
    assert [e.pw_name for e in rooms.members(state)] == sorted(names.unix_name(n) for n in (ada, bob))
    marks_csv = tmp_path / "records" / "day-1.csv"
    assert rooms.main(["day-1", "--csv", str(marks_csv)], rooms=tmp_path) == 0
    out = capsys.readouterr().out
    assert f"Marks and predictions of room day-1: {marks_csv} (3 rows)" in out, out
    with open(marks_csv, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == list(rooms.COLUMNS)  # then by attendee, notebook and kind; the kernel's state left out
    assert rows[1:] == sorted([["day-1", ada, "00", "exercise", "right", "", "2025-12-06T05:46:40+00:00", "1"],
                               ["day-1", ada, "00", "prediction", "gone", CHOICES["00"]["gone"],
                                "2025-12-06T05:46:40+00:00", "1"],
                               ["day-1", bob, "", "", "", "", "", ""]], key=lambda row: row[1])
    assert oct(marks_csv.stat().st_mode & 0o777) == "0o600"
    assert not users.is_lab_user_name(ada) and not users.is_lab_user_name(bob)
    assert names.why_refused(ada) is None  # the name is free for a later room
    assert not state.exists()
    assert users.is_lab_user_name(other) and users.room_of(pwd.getpwnam(names.unix_name(other))) == "0ther1d0"
