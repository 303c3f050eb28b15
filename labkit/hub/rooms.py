"""A workshop is a room with a start and an end (issue 65): each room's hub state in a folder of its own, and the end
of the day that removes everything of the room after writing its marks to a CSV.

* **A room** is a hub state folder (:mod:`labkit.hub.run`: JupyterHub's database, the attendees' passwords, the live
  view's marks and predictions, pending password resets, the attendees' private folders) under :data:`ROOMS`
  (``.hub/rooms/<name>/``), with a record :data:`RECORD` (``room.json``: its name, a random id, when it started). A
  plain ``make hub`` starts a new room named after the day (``2026-12-07``, then ``2026-12-07-2``...: :func:`choose`),
  so nothing of an earlier room is seen: no account, password, mark or prediction. ``make hub ROOM=NAME`` resumes room
  ``NAME`` (or starts it, new, under that name). The hub's first lines say which (:func:`first_lines`), and name every
  room not ended, whose attendees' names stay taken (their Unix users and files are theirs) until it is.
* **Its Unix users** carry its id (:func:`labkit.hub.users.create` writes ``room <id>`` in their comment): an
  attendee's, and the instructor's own lab when they ask for one (:mod:`labkit.hub.config` sends the instructor to the
  live view, not to a lab, at sign-in). A user another room made is never used nor removed by this one.
* **The end of the day**, ``sudo make hub-end ROOM=NAME`` (``python -m labkit.hub end-room NAME``: :func:`main`), with
  the room's hub stopped: what a killed hub left running stopped (:func:`labkit.hub.leftovers.stop_left_by`), the
  room's marks and predictions written to a CSV (:func:`write_marks`; its path printed), then every Unix user of the
  room removed (:func:`labkit.hub.users.remove`: processes, sandbox, files of its uid, home) and the room's folder.
  Nothing the lab did not make is touched: users are the lab's (:func:`labkit.hub.names.is_lab_user`) and the room's
  (its id, or for a user made before rooms, found in the room's marks or private folders), and a folder is removed only
  if a hub ran from it (its ``hub.lock`` or :data:`RECORD`).

Blocking (files, ``userdel``): not for the hub's event loop.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pwd
import re
import secrets
import shutil
import time
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable

import psutil

from labkit.core.errors import LabkitError
from labkit.core.jsonfile import write_json
from labkit.hub import install, leftovers, sandbox, users
from labkit.hub.names import hub_name, is_lab_user, unix_name
from labkit.hub.verdicts import FILE_NAME, Store
from labkit.learn.marks import CHOICES, PREDICTION

#: The rooms' state folders, one per room (git-ignored with the rest of ``.hub/``, each mode 0700).
ROOMS = install.HUB_DIR / "rooms"
#: Where the marks of an ended room go unless ``--csv`` says otherwise.
RECORDS = install.HUB_DIR / "records"
#: The state folder of a hub from before rooms (``make hub``'s default until issue 65): named when it exists.
OLD_STATE = install.HUB_DIR / "state"
#: A room's record in its state folder: ``{"name", "id", "started"}`` (``started``: ISO 8601, UTC).
RECORD = "room.json"
#: A room's name: lowercase letters, digits, ``.``, ``-``, ``_``; at most 40 characters.
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")
#: The kinds of marks the CSV keeps: a kernel's busy or idle state and a participant seen stalled are of the moment.
KEPT_KINDS = ("exercise", "claims", PREDICTION)
#: The CSV's columns, in order (``at``: ISO 8601, UTC; ``words``: a prediction's words as the learner chose them).
COLUMNS = ("room", "attendee", "notebook", "kind", "state", "words", "at", "reports")


def check_name(name: str) -> str:
    """``name`` if it can name a room (:data:`NAME`).

    Raises:
        LabkitError: it cannot (the message says what can).
    """
    if not NAME.match(name):
        raise LabkitError(f"{name!r} cannot name a room: use lowercase letters, digits, '.', '-' or '_' (at most 40 "
                          "characters), e.g. 2026-12-07 or kafka-day-2.")
    return name


def choose(name: str | None = None, rooms: Path = ROOMS, today: date | None = None) -> tuple[Path, bool]:
    """The state folder of the room ``make hub`` runs, and whether it is new: room ``name`` (resumed if its folder has a
    :data:`RECORD`, else new), or with no name a new room named after ``today`` (``YYYY-MM-DD``, ``-2``, ``-3``... when
    taken). Makes nothing (:func:`ensure_record` does, once the hub holds the folder's lock).

    Raises:
        LabkitError: ``name`` cannot name a room (:func:`check_name`).
    """
    if name is not None:
        state = Path(rooms) / check_name(name)
        return state, unused(state)
    base = (today or date.today()).isoformat()
    state, n = Path(rooms) / base, 1
    while state.exists():
        n += 1
        state = Path(rooms) / f"{base}-{n}"
    return state, True


def unused(state: Path | str) -> bool:
    """Whether no hub ran from ``state`` yet: it has neither a room's record (:data:`RECORD`) nor JupyterHub's
    database (a state folder from before rooms has the database only)."""
    return not (Path(state) / RECORD).is_file() and not (Path(state) / "jupyterhub.sqlite").is_file()


def record(state: Path | str) -> dict | None:
    """The room's record in ``state`` (:data:`RECORD`), None if there is none (a folder from before rooms)."""
    try:
        return json.loads((Path(state) / RECORD).read_text())
    except FileNotFoundError:
        return None


def ensure_record(state: Path | str) -> dict:
    """The room's record in ``state``, made (name: the folder's, a new 8-hex-digit id, started now) if there is none.

    Raises:
        OSError: the folder cannot be written.
    """
    found = record(state)
    if found is None:
        found = {"name": Path(state).name, "id": secrets.token_hex(4),
                 "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        write_json(Path(state) / RECORD, found, mode=0o600)
    return found


def members(state: Path | str) -> list[pwd.struct_passwd]:
    """The Unix users of the room in ``state``, sorted by name: the lab's users (:func:`labkit.hub.names.is_lab_user`)
    whose comment carries the room's id (:func:`labkit.hub.users.room_of`), and those with no room in their comment
    (made before rooms) that the room knows: named in its marks, or with a private folder under its state. A user of
    another room is never one."""
    state = Path(state)
    room_id = (record(state) or {}).get("id", "")
    found = {e.pw_name: e for e in pwd.getpwall() if is_lab_user(e) and room_id and users.room_of(e) == room_id}
    known: list[pwd.struct_passwd] = []
    for name in _marks(state):
        try:
            known.append(pwd.getpwnam(unix_name(name)))
        except KeyError:
            continue
    root = sandbox.private_root(state)
    for folder in (root.iterdir() if root.is_dir() else ()):
        try:
            known.append(pwd.getpwuid(int(folder.name)))
        except (ValueError, KeyError):
            continue
    found.update({e.pw_name: e for e in known if is_lab_user(e) and users.room_of(e) in ("", room_id)})
    return [found[name] for name in sorted(found)]


def _marks(state: Path) -> dict:
    """The room's marks (:meth:`labkit.hub.verdicts.Store.marks`), ``{}`` when it has no store (none is made)."""
    if not (state / FILE_NAME).is_file():
        return {}
    store = Store(state / FILE_NAME)
    try:
        return store.marks()
    finally:
        store.close()


def hub_pid(state: Path | str) -> int | None:
    """The pid of the hub running from ``state``: the one its ``hub.lock`` names, alive, no zombie and working in
    ``state`` (as the hub does), else None."""
    try:
        proc = psutil.Process(int((Path(state) / "hub.lock").read_text().strip()))
        alive = proc.status() != psutil.STATUS_ZOMBIE and proc.cwd() == str(Path(state).resolve())
        return proc.pid if alive else None
    except (FileNotFoundError, ValueError, psutil.Error):
        return None


def first_lines(state: Path | str, new: bool, rooms: Path = ROOMS, old_state: Path = OLD_STATE) -> list[str]:
    """What ``make hub`` says first: whether it starts the room in ``state`` new or resumes it (with how many
    attendees' Unix users and marks it keeps), how to resume and end it, then each other room not ended under
    ``rooms`` (its attendees' names stay taken) and a hub state folder from before rooms (``old_state``) if any."""
    state = Path(state)
    name = (record(state) or {}).get("name", state.name)
    where = f"make hub ROOM={name}" if state.parent == Path(rooms) else f"make hub ARGS='--state {state}'"
    ending = (f"make hub-end ROOM={name}" if state.parent == Path(rooms)
              else f".venv/bin/python -m labkit.hub end-room --state {state}")
    if new:
        lines = [f"New room {name}: no attendees, marks or predictions yet (its state: {state}). Resume it later with "
                 f"sudo {where}; at the end of the day, sudo {ending}."]
    else:
        marks = sum(len(m) for m in _marks(state).values())
        lines = [f"Resuming room {name} (started {(record(state) or {}).get('started', '?')}): "
                 f"{len(members(state))} Unix users of its attendees and {marks} marks kept (its state: {state}). "
                 f"A new room instead: sudo make hub. At the end of the day: sudo {ending}."]
    others = sorted(p for p in Path(rooms).glob("*") if (p / RECORD).is_file() and p.resolve() != state.resolve())
    for other in others:
        lines.append(f"  not ended: room {other.name} (started {(record(other) or {}).get('started', '?')}, "
                     f"{len(members(other))} Unix users): their names stay taken until you end it (sudo make hub-end "
                     f"ROOM={other.name}); to go on with it instead, stop this hub and sudo make hub "
                     f"ROOM={other.name}.")
    if Path(old_state).is_dir() and Path(old_state).resolve() != state.resolve():
        lines.append(f"  not ended: {old_state}, a hub's state from before rooms: resume it with sudo make hub "
                     f"ARGS='--state {old_state}', end it with sudo .venv/bin/python -m labkit.hub end-room --state "
                     f"{old_state}.")
    return lines


def write_marks(state: Path | str, path: Path | str) -> int:
    """Write the marks and predictions of the room in ``state`` to the CSV file ``path`` (mode 0600; its folder made):
    :data:`COLUMNS`, one row per attendee and mark of :data:`KEPT_KINDS` (sorted by attendee, notebook, kind), and one
    row with the mark's columns empty for each of the room's users (:func:`members`) without any. Returns the rows
    written (the header not counted).

    Raises:
        OSError: the file cannot be written; sqlite3.Error: the store is not a database.
    """
    state, path = Path(state), Path(path)
    room = (record(state) or {}).get("name", state.name)
    marks = _marks(state)
    rows = []
    for user, kept in marks.items():
        for (notebook, kind), mark in kept.items():
            if kind in KEPT_KINDS:
                words = CHOICES.get(notebook, {}).get(mark.state, "") if kind == PREDICTION else ""
                at = datetime.fromtimestamp(mark.at, timezone.utc).isoformat(timespec="seconds")
                rows.append((room, user, notebook, kind, mark.state, words, at, mark.reports))
    named = {row[1] for row in rows}
    rows += [(room, hub_name(e.pw_name), "", "", "", "", "", "") for e in members(state)
             if hub_name(e.pw_name) not in named]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        writer.writerows(sorted(rows, key=lambda r: (r[1], r[2], r[3])))
    return len(rows)


def end(state: Path | str, csv_path: Path | str, say: Callable[[str], None] = print) -> list[str]:
    """End the room in ``state`` (module docstring): take its hub's lock, stop what a killed hub left, write its marks
    to ``csv_path`` (:func:`write_marks`; said first), remove its Unix users (:func:`members`, each with
    :func:`labkit.hub.users.remove`) and then its folder. Says (``say``) and returns one line per step.

    Raises:
        LabkitError: ``state`` is no hub's state folder (no ``hub.lock`` nor :data:`RECORD`: nothing is touched), its
            hub runs (its pid named), a user could not be removed (:func:`labkit.hub.users.remove`'s message; the
            CSV is written and the folder kept: run it again).
    """
    from labkit.hub.run import lock_state

    state = Path(state)
    if not ((state / "hub.lock").is_file() or (state / RECORD).is_file()):
        raise LabkitError(f"{state} is not a hub's state folder (no hub.lock, no {RECORD}): nothing removed.")
    try:
        fd = lock_state(state)
    except LabkitError:
        pid = hub_pid(state) or "?"
        raise LabkitError(f"The hub of this room still runs (pid {pid}): stop it first (Ctrl-C in its terminal, or "
                          f"kill {pid}), then end the room.") from None
    lines: list[str] = []

    def said(line: str) -> None:
        lines.append(line)
        say(line)

    try:
        leftovers.stop_left_by(state, say=said)
        rows = write_marks(state, csv_path)
        said(f"Marks and predictions of room {(record(state) or {}).get('name', state.name)}: {csv_path} ({rows} "
             "rows): keep it for your records.")
        for entry in members(state):
            removed = users.remove(hub_name(entry.pw_name), sandbox.private_root(state))
            said(f"  removed {entry.pw_name} (uid {entry.pw_uid}): its processes, sandbox, home"
                 + "".join(f", {path}" for path in removed))
    finally:
        os.close(fd)
    shutil.rmtree(state)
    said(f"  removed the room's folder {state}: its hub accounts, passwords, marks and predictions.")
    return lines


def chosen_state(room: str | None, state: Path | None, rooms: Path = ROOMS) -> Path:
    """The state folder a command names (``--state`` wins, then ``--room``), else the room whose hub runs now, else the
    one room under ``rooms``.

    Raises:
        LabkitError: the named room does not exist, or none was named and no single room runs or exists (the rooms
            named).
    """
    if state is not None:
        return Path(state)
    if room is not None:
        folder = Path(rooms) / check_name(room)
        if not (folder / RECORD).is_file():
            raise LabkitError(f"No room {room} here ({folder}): the rooms are {_names(rooms) or 'none'}.")
        return folder
    all_rooms = sorted(p for p in Path(rooms).glob("*") if (p / RECORD).is_file())
    running = [p for p in all_rooms if hub_pid(p) is not None]
    if len(running) == 1 or len(all_rooms) == 1:
        return (running or all_rooms)[0]
    raise LabkitError(f"Name the room (--room NAME): the rooms are {_names(rooms) or 'none'}"
                      + (f", {len(running)} of them running" if running else "") + ".")


def _names(rooms: Path) -> str:
    return ", ".join(sorted(p.name for p in Path(rooms).glob("*") if (p / RECORD).is_file()))


def main(argv: list[str], rooms: Path = ROOMS) -> int:
    """``python -m labkit.hub end-room NAME [--csv FILE]`` or ``end-room --state DIR``: :func:`end`, the CSV to
    ``FILE`` (default :data:`RECORDS`/``<room>-<UTC time>.csv``). Returns the exit status (0).

    Raises:
        LabkitError: not root; as :func:`chosen_state` and :func:`end`.
    """
    parser = argparse.ArgumentParser(prog="python -m labkit.hub end-room", description="End a room: write its marks "
                                     "and predictions to a CSV, then remove its attendees' Unix users, the "
                                     "instructor's lab, hub accounts, passwords, marks and predictions.")
    parser.add_argument("room", nargs="?", help=f"the room's name (a folder of {rooms})")
    parser.add_argument("--state", type=Path, default=None, help="a hub's state folder instead of a room's name")
    parser.add_argument("--csv", type=Path, default=None,
                        help=f"where the marks go (default {RECORDS}/<room>-<time>.csv)")
    args = parser.parse_args(argv)
    if args.room is None and args.state is None:
        parser.error("name the room to end (its name, or --state DIR)")
    if os.geteuid() != 0:
        raise LabkitError("Ending a room removes its attendees' Unix users: run it as root (sudo make hub-end "
                          "ROOM=...).")
    state = chosen_state(args.room, args.state, rooms)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    end(state, args.csv or RECORDS / f"{(record(state) or {}).get('name', state.name)}-{stamp}.csv")
    return 0
