"""The instructor's reset of an attendee's forgotten password: a one-time code that keeps the name for its owner
(issue 63).

JupyterHub's *Delete User*, the reset the run-sheet gave before, drops the name's password
(``FirstUseAuthenticator.delete_user``) and leaves its Unix user and files: the next sign-in under the name with the
workshop code, anyone's, set a new password and got the owner's files. Now a name whose Unix user the lab made
(:func:`labkit.hub.users.is_lab_user_name`) and that has no password is refused even with the workshop code
(:mod:`labkit.hub.auth`), and its owner gets back in with a code only the instructor can make:

* ``sudo .venv/bin/python -m labkit.hub reset-password NAME [--room ROOM]`` (:func:`main`, as root, on the hub's
  machine, while the hub runs or not) makes a new code for ``NAME`` (:func:`issue`), prints it once and keeps only
  its SHA-256 in ``<state>/password_resets.json`` (:data:`FILE_NAME`, mode 0600, in the hub's 0700 state folder). A
  later reset replaces the code; the old password no longer signs in from then on.
* The attendee signs in with their name, a new password of their own and the code in the form's code field: the
  hub checks the code (:func:`redeem`, which removes it: it works once), sets the new password and signs them in. A
  wrong code counts as a failed sign-in of their address (:mod:`labkit.hub.auth`'s throttle): 48 random bits against
  30 tries a minute.

Read-modify-write of the file is under a lock of root's alone (:mod:`labkit.hub.rootlock`, in the state folder), the
file replaced whole (:func:`labkit.core.jsonfile.write_json`): the CLI and the hub may write it at once.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import secrets
from pathlib import Path

from labkit.core.errors import LabkitError
from labkit.core.jsonfile import write_json
from labkit.hub import rootlock
from labkit.hub.names import shown
from labkit.hub.users import is_lab_user_name

#: The file of pending resets in the hub's state folder: ``{name: sha256 hex of its code}``.
FILE_NAME = "password_resets.json"
#: Seconds a reset waits for the file's lock (each holder keeps it for one read and write, milliseconds).
LOCK_WAIT_S = 10.0


def _digest(code: str) -> str:
    return hashlib.sha256(code.strip().encode()).hexdigest()


def _read(state: Path) -> dict[str, str]:
    try:
        return json.loads((state / FILE_NAME).read_text())
    except FileNotFoundError:
        return {}


def _locked(state: Path):
    return rootlock.held(state / "password_resets.lock", LOCK_WAIT_S, "The hub's password-reset lock")


def issue(state: Path | str, name: str) -> str:
    """Make a new one-time code for hub user ``name`` (replacing any earlier one) and return it: 12 hexadecimal
    characters (48 random bits, :mod:`secrets`). Only its SHA-256 is kept, in ``state``/:data:`FILE_NAME`.

    Raises:
        LabkitError: ``name`` is not an attendee the lab made (no Unix user ``lab-NAME`` of the lab's), or the file's
            lock was held :data:`LOCK_WAIT_S` seconds.
    """
    if not is_lab_user_name(name):
        raise LabkitError(f"{shown(name)} is no attendee of this machine (no Unix user lab-<name> made by the lab): "
                          "a new name needs no reset, its first sign-in sets its password.")
    state, code = Path(state), secrets.token_hex(6)
    with _locked(state):
        write_json(state / FILE_NAME, {**_read(state), name: _digest(code)}, mode=0o600)
    return code


def pending(state: Path | str, name: str) -> bool:
    """Whether ``name`` has a reset not yet used (its old password no longer signs in)."""
    return name in _read(Path(state))


def redeem(state: Path | str, name: str, code: str) -> bool:
    """Whether ``code`` is ``name``'s pending one-time code; if it is, the reset is used up (removed). Blocking (a
    lock, a file): call it from a thread in the hub.

    Raises:
        LabkitError: the file's lock was held :data:`LOCK_WAIT_S` seconds.
    """
    state = Path(state)
    with _locked(state):
        resets = _read(state)
        if name not in resets or not hmac.compare_digest(resets[name], _digest(code)):
            return False
        del resets[name]
        write_json(state / FILE_NAME, resets, mode=0o600)
    return True


def main(argv: list[str]) -> int:
    """``python -m labkit.hub reset-password NAME [--room ROOM | --state DIR]``: print a new one-time code for ``NAME``
    (module docstring) in the room named (default: the room whose hub runs, :func:`labkit.hub.rooms.chosen_state`) and
    what the attendee does with it. Returns the exit status (1: no such attendee).

    Raises:
        LabkitError: the file's lock was held :data:`LOCK_WAIT_S` seconds, or no room was named and not exactly one
            runs or exists.
    """
    from labkit.hub import rooms

    parser = argparse.ArgumentParser(prog="python -m labkit.hub reset-password", description="A one-time code with "
                                     "which an attendee who forgot their password sets a new one.")
    parser.add_argument("name", help="the attendee's hub name (the name they sign in with)")
    parser.add_argument("--room", default=None, help="the room (default: the one whose hub runs)")
    parser.add_argument("--state", type=Path, default=None, help="a hub's state folder instead of a room's name")
    args = parser.parse_args(argv)
    try:
        code = issue(rooms.chosen_state(args.room, args.state), args.name)
    except LabkitError as exc:
        print(exc)
        return 1
    print(f"One-time code for {args.name}: {code}\nGive it to {args.name} alone (it is shown once). On the sign-in "
          f"page they type their name, a new password of their own, and this code in the code field; it works once. "
          f"Their old password no longer signs in.")
    return 0
