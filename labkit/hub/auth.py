"""Who may sign in to the workshop hub: a name is its owner's (issue 49).

:class:`LabAuthenticator` is jupyterhub-firstuseauthenticator's ``FirstUseAuthenticator`` (PyPI, JupyterHub's own
organisation): the first sign-in under a name sets that name's password (bcrypt, in a dbm file of the hub's state
folder), which every later sign-in needs. Chosen over NativeAuthenticator because that is the model a room needs and
nothing more: one form, no separate sign-up page or approval step; the instructor resets a forgotten password with
JupyterHub's own admin page (*Delete User* drops the password, ``FirstUseAuthenticator.delete_user``; the attendee's
Unix user and files stay, and their next sign-in sets a new one). What the workshop adds:

* **The workshop's code** (the shared password, ``workshop_code``, at least 8 characters) is asked on the first
  sign-in under a name only: the form's third field (the lab's ``login.html``, :data:`labkit.hub.config.TEMPLATES`). A first sign-in
  without it, or with a wrong one, is refused; so is an own password shorter than 8 characters or equal to the code.
* **A name already taken** is refused as taken when the code is given with a wrong password (a newcomer who chose a
  name in use), as a wrong password otherwise; nothing starts.
* **Throttled failures**: after :attr:`LabAuthenticator.allowed_failures` failed sign-ins under one name, or
  :attr:`LabAuthenticator.allowed_failures_per_address` from one address, within :attr:`LabAuthenticator.window_s`
  seconds, that name or address is refused until the window has passed since its last failure, the message saying
  how long.
* **The instructor** signs in under their admin name (``admin_users``) with their own password (``admin_password``,
  at least 32 characters, from the hub's environment): never set by a first sign-in, so nobody can take the name first.
* **Names** :func:`labkit.hub.names.why_refused` refuses (``root``, an existing account, a name ``useradd`` would
  reject) are refused with the reason on the form, before any password is stored.
"""

from __future__ import annotations

import dbm
import hmac
import time
from collections import defaultdict, deque

from firstuseauthenticator import FirstUseAuthenticator
from traitlets import Float, Integer, Unicode

from labkit.hub.names import why_refused

#: The least length of the workshop code and of an attendee's own password (characters).
MIN_PASSWORD = 8


class LabAuthenticator(FirstUseAuthenticator):
    """``FirstUseAuthenticator`` with the workshop's code on a first sign-in, throttled failures, the instructor's own
    password and the lab's name rules (module docstring)."""

    workshop_code = Unicode(config=True, help="The code a first sign-in under a name needs (the shared password).")
    admin_password = Unicode(config=True, help="The instructor's password (at least 32 characters).")
    allowed_failures = Integer(5, config=True, help="Failed sign-ins under one name before it waits.")
    allowed_failures_per_address = Integer(30, config=True, help="Failed sign-ins from one address before it waits.")
    window_s = Float(60.0, config=True, help="Seconds a name or address waits after its last counted failure.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.min_password_length = MIN_PASSWORD
        self._failures: dict[str, deque[float]] = defaultdict(deque)

    def _wait_s(self, key: str, allowed: int) -> float:
        """Seconds ``key`` (``name:<n>`` or ``address:<a>``) must still wait, 0 if it may try."""
        failures = self._failures[key]
        while failures and time.monotonic() - failures[0] > self.window_s:
            failures.popleft()
        return self.window_s - (time.monotonic() - failures[-1]) if len(failures) >= allowed else 0.0

    def _failed(self, handler, keys: list[str], message: str) -> None:
        for key in keys:
            self._failures[key].append(time.monotonic())
        handler.custom_login_error = message
        self.log.warning("Refused sign-in (%s): %s", ", ".join(keys), message)

    async def authenticate(self, handler, data):
        """``{"name", "admin"}`` for a right password (the instructor's, or the name's own: set by a first sign-in
        that gave the workshop code), else ``None`` with the reason on the form (``handler.custom_login_error``,
        which ``FirstUseAuthenticator``'s login handler shows), a name that cannot be an attendee's Unix user
        included."""
        name = self.normalize_username(data.get("username", ""))
        password, code = data.get("password", ""), data.get("workshop_code", "")
        keys = [f"name:{name}", f"address:{handler.request.remote_ip}"]
        wait = max(self._wait_s(keys[0], self.allowed_failures),
                   self._wait_s(keys[1], self.allowed_failures_per_address))
        if wait > 0:
            handler.custom_login_error = f"Too many failed sign-ins: try again in {wait:.0f} s."
            return None
        if name in self.admin_users:
            if self.admin_password and hmac.compare_digest(password.encode(), self.admin_password.encode()):
                return {"name": name, "admin": True}
            return self._failed(handler, keys, "Invalid username or password.")
        if (why := why_refused(name)):
            self.log.warning("Refused sign-in as %r: %s", name, why)
            handler.custom_login_error = why
            return None
        if self._has_password(name):
            if await super().authenticate(handler, {"username": name, "password": password}):
                self._failures.pop(keys[0], None)
                return {"name": name, "admin": False}
            return self._failed(handler, keys, f"The name {name} is taken: choose another." if code else
                                "Invalid username or password (a first sign-in gives the workshop code too).")
        if not hmac.compare_digest(code.encode(), self.workshop_code.encode()):
            return self._failed(handler, keys, f"{name} is a new name here: its first sign-in needs the workshop code "
                                "(ask the instructor) and a password of your own.")
        if len(password) < MIN_PASSWORD or password == code:
            handler.custom_login_error = (f"Choose a password of your own, at least {MIN_PASSWORD} characters, not the "
                                          "workshop code: you will need it to sign in again.")
            return None
        return {"name": await super().authenticate(handler, {"username": name, "password": password}), "admin": False}

    def _has_password(self, name: str) -> bool:
        """Whether ``name`` has a password (its first sign-in happened and no instructor reset it since)."""
        with dbm.open(self.dbm_path, "c", 0o600) as db:
            return name.encode() in db
