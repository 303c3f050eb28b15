"""Who may sign in to the workshop hub: a name is its owner's (issue 49).

:class:`LabAuthenticator` is jupyterhub-firstuseauthenticator's ``FirstUseAuthenticator`` (PyPI, JupyterHub's own
organisation): the first sign-in under a name sets that name's password (bcrypt, in a dbm file of the hub's state
folder), which every later sign-in needs. Chosen over NativeAuthenticator because that is the model a room needs and
nothing more: one form, no separate sign-up page or approval step. What the workshop adds:

* **The workshop's code** (the shared password, ``workshop_code``, at least 8 characters) is asked on the first sign-in
  under a name only: the form's third field (the lab's ``login.html``, :data:`labkit.hub.config.TEMPLATES`). A first
  sign-in without it, or with a wrong one, is refused; so is an own password shorter than 8 characters or equal to the
  code.
* **A name already taken** is refused as taken when the code is given with a wrong password (a newcomer who chose a
  name in use), as a wrong password otherwise; nothing starts. A name whose Unix user the lab made
  (:func:`labkit.hub.users.is_lab_user_name`) is taken even when it has no password (JupyterHub's *Delete User*
  dropped it, ``FirstUseAuthenticator.delete_user``): refused with the workshop code too, so nobody signs in first
  under it and gets its owner's files (issue 63).
* **A forgotten password**: the instructor makes a one-time code for the name (:mod:`labkit.hub.resets`,
  ``python -m labkit.hub reset-password NAME``); from then on the old password is refused, and a sign-in with the
  name, a new password of the attendee's own and that code in the code field sets the new password, once. A wrong
  code is a failed sign-in of the address.
* **Throttled failures, by address and name**: after :attr:`LabAuthenticator.allowed_failures` failed sign-ins
  within :attr:`LabAuthenticator.window_s` seconds, the same kind of attempt from that address is refused, before any
  password is checked, until the window has passed since its last failure, the message saying how long. Two kinds,
  counted apart (:meth:`LabAuthenticator.throttle_key`): a wrong password or one-time code under a name that has one
  counts against that address *and that name*; a first sign-in that fails (a wrong workshop code, a lab's name
  without a password) against that address's first sign-ins. A room signs in from one address (the venue's NAT, as
  the proxy sees it), so one attendee failing on purpose, or a guesser, keeps out at most the one name they fail
  under from that address, and newcomers (by failing first sign-ins), never the room: an address-wide count did
  (issue 63). The instructor's name is never throttled: its password is at least 32 characters, beyond guessing, and
  nobody can keep the instructor out. The address is the one the hub's own proxy saw (:func:`client_address`), which
  a request cannot forge. The table keeps at most :data:`MAX_ADDRESSES` entries (the least recently failed go first),
  each with at most its allowance of failures.
* **A password is at most** :data:`MAX_PASSWORD_BYTES` **bytes** (bcrypt's limit, which bcrypt 5 enforces by raising):
  a longer one is refused with that reason on the form, never checked (issue 63: an HTTP 500 before).
* **The instructor** signs in under their name (``instructor``) with their own password (``admin_password``,
  at least 32 characters, from the hub's environment): never set by a first sign-in, so nobody can take the name first.
  They are no JupyterHub admin (``"admin": False``): their powers are :data:`labkit.hub.config.INSTRUCTOR_ROLE`'s.
* **Names** :func:`labkit.hub.names.why_refused` refuses (``root``, an existing account, a name ``useradd`` would
  reject) are refused with the reason on the form, before anything else: no password checked or stored, nothing
  counted, and the name logged cut short (:func:`labkit.hub.names.shown`: a name can be a megabyte long).
"""

from __future__ import annotations

import asyncio
import dbm
import hmac
import time
from collections import OrderedDict, deque
from pathlib import Path

from firstuseauthenticator import FirstUseAuthenticator
from firstuseauthenticator.firstuseauthenticator import CustomLoginHandler
from traitlets import Float, Integer, Unicode

from labkit.hub import resets
from labkit.hub.names import shown, why_refused
from labkit.hub.sandbox import GATEWAY
from labkit.hub.users import is_lab_user_name

#: The least length of the workshop code and of an attendee's own password (characters).
MIN_PASSWORD = 8
#: The longest password, in bytes of UTF-8: bcrypt reads no more (bcrypt 5 raises ValueError for a longer one, its
#: changelog's 5.0.0).
MAX_PASSWORD_BYTES = 72
#: The most addresses the failure table keeps (a few hundred bytes each): past it, the least recently failed is
#: forgotten.
MAX_ADDRESSES = 4096
#: The peers whose ``X-Forwarded-For`` is believed: the hub's own proxy (configurable-http-proxy on this machine,
#: reaching the hub on the gateway address, :data:`labkit.hub.sandbox.GATEWAY`, or on the loopback).
PROXY_PEERS = frozenset({GATEWAY, "127.0.0.1", "::1"})


def client_address(request) -> str:
    """The address a sign-in came from, as the hub's own proxy saw it: the last entry of ``X-Forwarded-For`` (which
    configurable-http-proxy appends, its ``xfwd`` option on by default: its ``--no-x-forward``) when the request's TCP
    peer is that proxy (:data:`PROXY_PEERS`), else the TCP peer itself (an attendee's lab can reach the hub's port on
    the gateway directly). Never ``X-Real-IP`` nor an earlier ``X-Forwarded-For`` entry, which the client writes:
    tornado's ``request.remote_ip``, with the ``xheaders`` JupyterHub turns on, takes ``X-Real-IP`` from any client
    as it is (``_apply_xheaders``; ``JupyterHub.trusted_downstream_ips`` only skips entries of ``X-Forwarded-For``),
    so a new forged header a sign-in was a new address (issue 63).

    ``request``: tornado's ``HTTPServerRequest`` of an ``HTTPServer`` (its connection's ``context.address`` is the
    socket's peer).
    """
    peer = request.connection.context.address[0]
    if peer not in PROXY_PEERS:
        return peer
    return request.headers.get("X-Forwarded-For", peer).rsplit(",", 1)[-1].strip() or peer


class LoginHandler(CustomLoginHandler):
    """FirstUseAuthenticator's sign-in page (``CustomLoginHandler``: the authenticator's own message on the form), able
    to show an error too. JupyterHub 6 shows an error of a form's POST as the form (``LoginHandler.render_template``
    calls ``_render(**ns)`` with the error page's names: ``sync``, ``status_code``, ...), which FirstUseAuthenticator
    1.1.1's ``_render(login_error, username)`` refuses with a TypeError: the error page itself failed, and the browser
    got a bare, empty HTTP 500 (issue 63, a real JupyterHub 6.1.1's log: "Uncaught exception in write_error ...
    unexpected keyword argument 'sync'")."""

    def _render(self, login_error=None, username=None, **kwargs):
        return super(CustomLoginHandler, self)._render(self.custom_login_error or login_error, username, **kwargs)


class LabAuthenticator(FirstUseAuthenticator):
    """``FirstUseAuthenticator`` with the workshop's code on a first sign-in, throttled failures by address and name,
    the instructor's own password and the lab's name rules (module docstring)."""

    workshop_code = Unicode(config=True, help="The code a first sign-in under a name needs (the shared password).")
    admin_password = Unicode(config=True, help="The instructor's password (at least 32 characters).")
    instructor = Unicode(config=True, help="The instructor's name (labkit.hub.config.INSTRUCTOR_ROLE holds it).")
    allowed_failures = Integer(30, config=True, help="Failed sign-ins of one kind (throttle_key) before it waits.")
    window_s = Float(60.0, config=True, help="Seconds a throttled kind waits after its last counted failure.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.min_password_length = MIN_PASSWORD
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()  # throttle key -> failures, LRU

    def throttle_key(self, name: str, address: str) -> tuple[str, str] | None:
        """What a failed sign-in under ``name`` from ``address`` counts against: ``(address, name)`` when the name has
        a password or a pending reset (guessing that one name's secret), ``(address, "")`` for a first sign-in (the
        workshop code), ``None`` for the instructor's name (never throttled: module docstring)."""
        if self.instructor and name == self.instructor:
            return None
        if self._has_password(name) or resets.pending(Path(self.dbm_path).parent, name):
            return (address, name)
        return (address, "")

    def _wait_s(self, key: tuple[str, str] | None) -> float:
        """Seconds ``key`` must still wait, 0 if it may try (nothing stored for a key without failures)."""
        failures = self._failures.get(key)
        if failures is None or len(failures) < self.allowed_failures:
            return 0.0
        return max(0.0, self.window_s - (time.monotonic() - failures[-1]))

    def _failed(self, handler, name: str, address: str, message: str) -> None:
        now = time.monotonic()
        key = self.throttle_key(name, address)
        handler.custom_login_error = message
        self.log.warning("Refused sign-in (name:%s, address:%s): %s", name, address, message)
        if key is None:
            return
        failures = self._failures.pop(key, None) or deque(maxlen=self.allowed_failures)
        while failures and now - failures[0] > self.window_s:
            failures.popleft()
        failures.append(now)
        self._failures[key] = failures  # the most recently failed last
        while len(self._failures) > MAX_ADDRESSES:
            self._failures.popitem(last=False)

    async def authenticate(self, handler, data):
        """``{"name", "admin"}`` for a right password (the instructor's, or the name's own: set by a first sign-in that
        gave the workshop code), else ``None`` with the reason on the form (``handler.custom_login_error``, which
        ``FirstUseAuthenticator``'s login handler shows): a name that cannot be an attendee's Unix user, an address that
        failed too often under that name or at first sign-ins (:meth:`throttle_key`, :func:`client_address`), a password
        over :data:`MAX_PASSWORD_BYTES`, a wrong password or code, a name of the lab without a password (module
        docstring) or with a pending reset and no right one-time code. A right password is never refused for failures
        under its name (module docstring).

        Raises:
            labkit.core.errors.LabkitError: the reset file's lock was held (:func:`labkit.hub.resets.redeem`)."""
        name = self.normalize_username(data.get("username", ""))
        password, code = data.get("password", ""), data.get("workshop_code", "")
        if not (self.instructor and name == self.instructor) and (why := why_refused(name)):
            self.log.warning("Refused sign-in as %s: not an attendee's name", shown(name))
            handler.custom_login_error = why
            return None
        address = client_address(handler.request)
        key = self.throttle_key(name, address)
        if (wait := self._wait_s(key)) > 0:
            handler.custom_login_error = (f"Too many failed sign-ins as {name} from your address: try again in "
                                          f"{wait:.0f} s." if key[1] else "Too many failed first sign-ins from your "
                                          f"address: try again in {wait:.0f} s.")
            return None
        if len(password.encode()) > MAX_PASSWORD_BYTES:
            handler.custom_login_error = (f"A password is at most {MAX_PASSWORD_BYTES} bytes (bcrypt's limit): yours "
                                          f"is {len(password.encode())}. Choose a shorter one.")
            return None
        if self.instructor and name == self.instructor:
            if self.admin_password and hmac.compare_digest(password.encode(), self.admin_password.encode()):
                return {"name": name, "admin": False}
            return self._failed(handler, name, address, "Invalid username or password.")
        state = Path(self.dbm_path).parent
        if resets.pending(state, name):
            return await self._reset(handler, name, password, code, address, state)
        if self._has_password(name):
            if await super().authenticate(handler, {"username": name, "password": password}):
                return {"name": name, "admin": False}
            return self._failed(handler, name, address, f"The name {name} is taken: choose another." if code else
                                "Invalid username or password (a first sign-in gives the workshop code too).")
        if is_lab_user_name(name):  # its password dropped (Delete User): its files stay its owner's
            return self._failed(handler, name, address, f"{name} has a lab on this machine already: if it is yours and "
                                "you forgot your password, ask the instructor for a one-time code.")
        if not code:
            return self._failed(handler, name, address, f"{name} is a new name here: its first sign-in needs the "
                                "workshop code (ask the instructor) and a password of your own.")
        if not hmac.compare_digest(code.encode(), self.workshop_code.encode()):
            return self._failed(handler, name, address, "That is not the workshop code: check it with the instructor "
                                f"(a first sign-in as {name} needs it, and a password of your own).")
        if len(password) < MIN_PASSWORD or password == code:
            handler.custom_login_error = (f"Choose a password of your own, at least {MIN_PASSWORD} characters, not the "
                                          "workshop code: you will need it to sign in again.")
            return None
        return {"name": await super().authenticate(handler, {"username": name, "password": password}), "admin": False}

    async def _reset(self, handler, name: str, password: str, code: str, address: str, state: Path):
        """A sign-in under ``name``, which has a pending reset: the new ``password`` set and the name signed in when
        ``code`` is its one-time code (used up), else refused (a wrong code counted as a failure of ``address``)."""
        if len(password) < MIN_PASSWORD or password == code:
            handler.custom_login_error = (f"Choose a new password of your own, at least {MIN_PASSWORD} characters, and "
                                          "type the one-time code the instructor gave you in the code field.")
            return None
        if not await asyncio.to_thread(resets.redeem, state, name, code):
            return self._failed(handler, name, address, f"The password of {name} was reset: sign in with the one-time "
                                "code the instructor gave you in the code field and a new password of your own.")
        self.reset_password(name, password)
        self.log.info("%s set a new password with the instructor's one-time code", name)
        return {"name": name, "admin": False}

    def reset_password(self, username: str, new_password: str) -> str:
        """As ``FirstUseAuthenticator.reset_password`` (its change-password page), but a password over
        :data:`MAX_PASSWORD_BYTES` is refused with that reason, as at sign-in, instead of bcrypt's ValueError."""
        if len(new_password.encode()) > MAX_PASSWORD_BYTES:
            return f"A password is at most {MAX_PASSWORD_BYTES} bytes (bcrypt's limit): choose a shorter one."
        return super().reset_password(username, new_password)

    def get_handlers(self, app):
        """FirstUseAuthenticator's pages, its sign-in page as :class:`LoginHandler`."""
        return [(path, LoginHandler if handler is CustomLoginHandler else handler)
                for path, handler in super().get_handlers(app)]

    def _has_password(self, name: str) -> bool:
        """Whether ``name`` has a password (its first sign-in happened and no instructor reset it since)."""
        with dbm.open(self.dbm_path, "c", 0o600) as db:
            return name.encode() in db
