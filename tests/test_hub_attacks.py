"""The attacker's tests of the workshop hub (issue 63): each attempt made as an attendee would make it, against the
real code, asserting that it fails the way a safe room fails it (refused, bounded), where it got through before.

* **The hub's locks** (:mod:`labkit.hub.rootlock`): a real unprivileged process (``nobody``, by ``setpriv``) tries to
  open and ``flock`` the accounts lock and the set-up's lock, as an attendee's kernel did to stop every sign-in; eight
  real ``LabSpawner.start`` calls wait on a held accounts lock (a test's own, in a temporary folder) while the hub's
  default thread pool must stay free.
* **The live view's broker probe** (:func:`labkit.kafka.wire.call`): a real TCP server on this machine answers as an
  attendee's fake broker would, with a 2 GiB length, or a byte every 0.2 s.
* **Sign-in** (:mod:`labkit.hub.auth`): the authenticator's real code, with real bcrypt and FirstUseAuthenticator,
  behind a real tornado ``HTTPServer`` with ``xheaders`` on, as JupyterHub serves its pages: wrong passwords under
  the instructor's name, forged ``X-Real-IP`` and ``X-Forwarded-For``, megabyte names, a 73-byte password, each a
  real HTTP request. Run in the hub's venv (JupyterHub and bcrypt are installed there only), with the checkout's
  labkit first on its path.
* **A forgotten password's reset** (:mod:`labkit.hub.resets`): the same authenticator and server, a real Unix user of
  the lab's, the admin page's *Delete User* and the instructor's ``python -m labkit.hub reset-password``: an attacker
  with the workshop code tries to take the name first.

Root only (the locks are root's, and ``nobody`` is reached by ``setpriv``): skipped otherwise, saying why.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from labkit.core.errors import BrokerUnreachableError, LabkitError
from labkit.hub import install, observed, rootlock, users
from labkit.kafka import wire

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the hub's locks are root's and the attendee is reached "
                                "by setpriv: run as root (sudo make test)")

#: Run as ``nobody``: open ``argv[1]`` read-only and try an exclusive ``flock`` without waiting; one word.
TRY_LOCK = """
import fcntl, sys
try:
    handle = open(sys.argv[1], "rb")
except PermissionError:
    print("cannot-open")
    raise SystemExit
try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("held")
except BlockingIOError:
    print("busy")
"""


def as_nobody(script: str, *args: str) -> str:
    """Run ``script`` as ``nobody`` (uid and groups dropped by ``setpriv``), as an attendee's process would; its
    output."""
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
                           script, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def hub_python() -> Path:
    """The hub's venv's Python (JupyterHub, FirstUseAuthenticator and bcrypt are installed there only), made by the
    hub's set-up (:func:`labkit.hub.install.install_shared`) if this machine has none; run it with the checkout's
    labkit first on its path (``PYTHONPATH``)."""
    python = install.venv_python(install.shared_prefix())
    if not python.exists():
        install.install_shared(say=lambda line: None)
    return python


# --- the hub's locks ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lock", ["accounts", "set-up"])
def test_an_attendee_cannot_open_let_alone_hold_the_hub_s_locks(lock):
    path = users.ACCOUNTS_LOCK if lock == "accounts" else install.setup_lock(install.shared_prefix())
    if not path.exists():  # made as the hub makes it (when a set-up runs, it holds it: only made then)
        with rootlock.held(path, 60.0, lock):
            pass
    assert as_nobody(TRY_LOCK, str(path)) == "cannot-open"
    info = path.stat()
    assert (info.st_uid, info.st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0, 0o600, 0o700)


@pytest.mark.parametrize("made", ["folder open to others", "file open to others", "file of another user"])
def test_a_lock_folder_or_file_that_is_not_root_s_alone_is_refused_not_used(tmp_path, made):
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o755 if made == "folder open to others" else 0o700)
    folder.chmod(0o755 if made == "folder open to others" else 0o700)
    path = folder / "x.lock"
    if made != "folder open to others":
        path.touch()
        path.chmod(0o644 if made == "file open to others" else 0o600)
        if made == "file of another user":
            os.chown(path, 65534, 65534)
    with pytest.raises(LabkitError, match="is not uid 0's alone.*Remove it"):
        with rootlock.held(path, 1.0, "a test lock"):
            pass


def test_a_held_lock_is_refused_at_its_deadline_naming_its_holder(tmp_path):
    path = tmp_path / "locks" / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from labkit.hub import rootlock\nwith rootlock.held(Path(sys.argv[1]), 5, 'x'):\n"
                               "    print('held', flush=True); time.sleep(30)", str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(LabkitError, match=f"held by pid {holder.pid} for 0.5 s"):
            with rootlock.held(path, 0.5, "A test lock"):
                pass
        assert time.monotonic() - started < 3.0
    finally:
        holder.kill()
        holder.wait(10)
    with rootlock.held(path, 5.0, "A test lock"):  # free once its holder is gone
        pass


#: Run in the hub's venv while another process holds the accounts lock ``argv[1]``: eight attendees' spawns
#: (LabSpawner.start) wait for it; how long does the hub's default thread pool, which every poll and stop uses, take to
#: run a call meanwhile, and what came of the spawns once the lock's deadline (2 s here) passed? Prints JSON, then
#: exits at once: a spawn still waiting (the code before the fix) must never go on to make its Unix user.
SPAWNS_ON_A_HELD_LOCK = r"""
import asyncio, json, os, sys, time
from pathlib import Path
from types import SimpleNamespace
from labkit.hub import spawner, users

users.ACCOUNTS_LOCK, users.ACCOUNTS_WAIT_S = Path(sys.argv[1]), 2.0


async def main():
    starts = [asyncio.ensure_future(spawner.LabSpawner(user=SimpleNamespace(name=f"tz-wait{i}")).start())
              for i in range(8)]
    await asyncio.sleep(0.5)  # every spawn waits for the lock by now
    started = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.to_thread(lambda: None), 5)
        free_s = time.monotonic() - started
    except asyncio.TimeoutError:
        free_s = None
    done, _ = await asyncio.wait(starts, timeout=10)
    print(json.dumps({"default_pool_s": free_s, "waiting": 8 - len(done), "spawns": sorted(
        {f"{type(t.exception()).__name__}: {t.exception()}"[:90] for t in done})}), flush=True)
    os._exit(0)  # not asyncio.run's end, which waits for every thread of the default pool


asyncio.run(main())
"""


def test_spawns_waiting_for_a_held_accounts_lock_leave_the_hub_s_threads_free_and_end_at_its_deadline(hub_python,
                                                                                                       tmp_path):
    folder = tmp_path / "locks"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from labkit.hub import rootlock\nwith rootlock.held(Path(sys.argv[1]), 5, 'x'):\n"
                               "    print('held', flush=True); time.sleep(60)", str(folder / "accounts.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        done = subprocess.run([str(hub_python), "-c", SPAWNS_ON_A_HELD_LOCK, str(folder / "accounts.lock")],
                              capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:  # only once the spawns' process is gone: none of them may take the lock and make a user
        holder.kill()
        holder.wait(10)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["default_pool_s"] is not None and found["default_pool_s"] < 1.0, found
    assert found["waiting"] == 0 and found["spawns"] == [
        f"LabkitError: The lab's accounts lock ({folder / 'accounts.lock'}) has been held by pid {holder.pid}"[:90]
    ], found


# --- the live view's probe of an attendee's broker ------------------------------------------------------------------

class FakeBroker:
    """A TCP server on 127.0.0.1 answering the first request of each connection as ``answer(conn)`` says: what an
    attendee's process listening on their broker's port can do to the live view's probe. Stops within a second."""

    def __init__(self, answer) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.answer, self.stopped = answer, threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)  # the request
                self.answer(conn, self.stopped)

    def __enter__(self) -> "FakeBroker":
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.server.close()


def announce_2_gib(conn: socket.socket, stopped: threading.Event) -> None:
    conn.sendall(struct.pack(">i", 2**31 - 1) + b"\0" * 65536)
    stopped.wait(10)  # the connection held open, as a trickler would


def trickle(conn: socket.socket, stopped: threading.Event) -> None:
    conn.sendall(struct.pack(">i", 1000))
    for _ in range(50):  # a byte every 0.2 s: each read is answered well within a per-read deadline
        if stopped.wait(0.2):
            return
        conn.sendall(b"\0")


def test_a_fake_broker_announcing_2_gib_is_refused_before_any_of_it_is_read():
    me = psutil.Process()
    before = me.memory_info().rss
    with FakeBroker(announce_2_gib) as fake:
        started = time.monotonic()
        with pytest.raises(wire.WireError, match=r"announces 2147483647 bytes.*not a Kafka broker's answer"):
            wire.call(f"127.0.0.1:{fake.port}", wire.API_VERSIONS_KEY, 3, b"", timeout_s=2.0)
        assert time.monotonic() - started < 1.0
        assert not observed.answers_kafka(fake.port, timeout_s=2.0)  # the live view's probe: down, not stuck
    assert (me.memory_info().rss - before) / 2**20 < 32


def test_a_fake_broker_trickling_its_answer_is_cut_at_the_call_s_one_deadline():
    with FakeBroker(trickle) as fake:
        started, outcome = time.monotonic(), []

        def probe() -> None:  # in a thread: the call before the fix read on for the trickle's 10 s
            try:
                wire.call(f"127.0.0.1:{fake.port}", wire.API_VERSIONS_KEY, 3, b"", timeout_s=1.0)
            except Exception as exc:  # noqa: BLE001 (what it raised is the assertion)
                outcome.append((exc, time.monotonic() - started))

        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        thread.join(15)
    (exc, took), = outcome
    assert isinstance(exc, BrokerUnreachableError) and "No whole answer" in str(exc) and "of 1000 bytes" in str(exc)
    assert took < 2.5, f"{took:.1f} s for a call of 1 s"


# --- sign-in, through a real tornado server with JupyterHub's xheaders ----------------------------------------------

#: Run in the hub's venv: LabAuthenticator behind a real tornado HTTPServer (``xheaders=True``, as JupyterHub makes
#: its own), each attempt a real HTTP request to it; prints ``{attempt: what came of it}`` as JSON. ``argv[1]``: a
#: folder for the passwords file.
ATTEMPTS = r"""
import asyncio, io, json, logging, os, sys, urllib.parse
import psutil
from tornado import httpclient, httpserver, netutil, web
from labkit.hub import auth

CODE, ADMIN_PASSWORD = "the-workshop-code", "i" * 40
authenticator = auth.LabAuthenticator(workshop_code=CODE, admin_password=ADMIN_PASSWORD, instructor="inst",
                                      dbm_path=os.path.join(sys.argv[1], "passwords.dbm"))
log = io.StringIO()
authenticator.log = logging.getLogger("attempts")
authenticator.log.addHandler(logging.StreamHandler(log))
authenticator.log.propagate = False


class Login(web.RequestHandler):
    async def post(self):
        self.custom_login_error = ""
        data = {k: self.get_body_argument(k, "") for k in ("username", "password", "workshop_code")}
        try:
            result = await authenticator.authenticate(self, data)
        except Exception as exc:
            self.set_status(500)
            return self.finish({"raised": repr(exc)[:200]})
        self.finish({"result": result, "said": self.custom_login_error})


async def main():
    sockets = netutil.bind_sockets(0, "127.0.0.1")
    port = sockets[0].getsockname()[1]
    server = httpserver.HTTPServer(web.Application([(r"/hub/login", Login)]), xheaders=True)
    server.add_sockets(sockets)
    client = httpclient.AsyncHTTPClient()

    async def sign_in(name, password, code="", via="203.0.113.7", headers=None, source="127.0.0.1"):
        # through the hub's proxy (configurable-http-proxy appends the address it saw to X-Forwarded-For), unless
        # via is None: then straight to the hub's port, from the address ``source``
        sent = dict(headers or {})
        if via is not None:
            sent["X-Forwarded-For"] = ", ".join(filter(None, [sent.get("X-Forwarded-For"), via]))
        body = urllib.parse.urlencode({"username": name, "password": password, "workshop_code": code})
        answer = await client.fetch(f"http://127.0.0.1:{port}/hub/login", method="POST", body=body, headers=sent,
                                    network_interface=source, raise_error=False)
        out = json.loads(answer.body)
        return {"status": answer.code, **out}

    found = {}
    # 4: five wrong passwords under the instructor's name, then the right one, from the same address and another
    for _ in range(5):
        await sign_in("inst", "wrong-password", via="198.51.100.1")
    found["admin_same_address"] = await sign_in("inst", ADMIN_PASSWORD, via="198.51.100.1")
    found["admin_other_address"] = await sign_in("inst", ADMIN_PASSWORD, via="198.51.100.2")
    # ... and under an attendee's name that has a password
    found["attendee_first"] = await sign_in("tz-ada", "ada-password", CODE, via="198.51.100.3")
    for _ in range(6):
        await sign_in("tz-ada", "not-adas-password", via="198.51.100.4")
    found["attendee_right"] = await sign_in("tz-ada", "ada-password", via="198.51.100.4")
    # 8: 35 failed sign-ins from one address, each with a new forged X-Real-IP (and a forged X-Forwarded-For entry
    # before the proxy's), each under a new name: which were refused for the address?
    found["forged_headers"] = [
        "Too many" in (await sign_in(f"tz-new{i}", "a-password", "wrong-code", via="192.0.2.9",
                                     headers={"X-Real-IP": f"10.9.0.{i}", "X-Forwarded-For": f"10.8.0.{i}"}))["said"]
        for i in range(35)]
    # ... and straight to the hub's port (as a lab can reach it), from 127.0.0.2, forging both
    found["forged_direct"] = [
        "Too many" in (await sign_in(f"tz-dir{i}", "a-password", "wrong-code", via=None, source="127.0.0.2",
                                     headers={"X-Real-IP": f"10.7.0.{i}", "X-Forwarded-For": f"10.6.0.{i}"}))["said"]
        for i in range(35)]
    # a room behind one address (the venue's NAT): one attendee fails on purpose under another's name, and under new
    # names with wrong codes; the rest of the room, and that name from elsewhere, still sign in (issue 63)
    room, elsewhere = "198.51.100.30", "198.51.100.31"
    found["room_bea_first"] = await sign_in("tz-bea", "bea-password", CODE, via=room)
    found["room_wrong_ada"] = ["Too many" in (await sign_in("tz-ada", f"guess-{i}", via=room))["said"]
                               for i in range(35)]
    found["room_ada_right_here"] = await sign_in("tz-ada", "ada-password", via=room)
    found["room_ada_right_elsewhere"] = await sign_in("tz-ada", "ada-password", via=elsewhere)
    found["room_bea_right"] = await sign_in("tz-bea", "bea-password", via=room)
    found["room_newcomer"] = await sign_in("tz-cy", "cy-password", CODE, via=room)
    found["room_wrong_codes"] = ["Too many" in (await sign_in(f"tz-x{i}", "a-password", "wrong-code", via=room))["said"]
                                 for i in range(35)]
    found["room_bea_after_codes"] = await sign_in("tz-bea", "bea-password", via=room)
    for i in range(35):
        await sign_in("inst", f"guess-{i}", via=room)
    found["room_admin"] = await sign_in("inst", ADMIN_PASSWORD, via=room)
    # 10: megabyte names: the hub's memory and log
    me = psutil.Process()
    before, logged = me.memory_info().rss, len(log.getvalue())
    for i in range(30):
        said = (await sign_in(chr(97 + i % 26) * (2**20), "a-password", "wrong-code", via=f"198.51.100.{50 + i}"))
    found["long_names"] = {"grew_mib": (me.memory_info().rss - before) / 2**20, "logged": len(log.getvalue()) - logged,
                           "said": said["said"][:300], "said_chars": len(said["said"])}
    # ... and the table of addresses: one throttled address, then more addresses than the table keeps
    auth.MAX_ADDRESSES = 8
    for _ in range(30):
        await sign_in("tz-lru", "a-password", "wrong-code", via="198.51.100.200")
    throttled = "Too many" in (await sign_in("tz-lru", "a-password", "wrong-code", via="198.51.100.200"))["said"]
    for i in range(8):
        await sign_in("tz-lru", "a-password", "wrong-code", via=f"198.51.100.{210 + i}")
    found["table"] = {"throttled": throttled, "after_8_others": (await sign_in("tz-lru", "a-password", "wrong-code",
                                                                                  via="198.51.100.200"))["said"]}
    # a newcomer without the workshop code, then with a wrong one (issue 65: both were told 'needs the code')
    found["no_code"] = await sign_in("tz-cara", "a-password-of-mine", via="198.51.100.7")
    found["wrong_code"] = await sign_in("tz-cara", "a-password-of-mine", "not-the-code", via="198.51.100.7")
    # 14: a 73-byte password, as a first one and under a name that has one
    found["long_password_first"] = await sign_in("tz-bob", "b" * 73, CODE, via="198.51.100.5")
    found["long_password_taken"] = await sign_in("tz-ada", "b" * 73, via="198.51.100.6")
    print(json.dumps(found))


asyncio.run(main())
"""


@pytest.fixture(scope="module")
def attempts(hub_python, tmp_path_factory) -> dict:
    """What came of each sign-in attempt of :data:`ATTEMPTS`, run by the hub's venv with the checkout's labkit."""
    done = subprocess.run([str(hub_python), "-c", ATTEMPTS, str(tmp_path_factory.mktemp("passwords"))],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_wrong_passwords_under_a_name_never_refuse_its_right_password(attempts):
    assert attempts["admin_same_address"]["result"] == {"name": "inst", "admin": False}
    assert attempts["admin_other_address"]["result"] == {"name": "inst", "admin": False}
    assert attempts["attendee_first"]["result"] == {"name": "tz-ada", "admin": False}
    assert attempts["attendee_right"]["result"] == {"name": "tz-ada", "admin": False}


def test_one_attendee_failing_from_the_room_s_address_keeps_out_one_name_there_never_the_room(attempts):
    """A room signs in from one address: 35 wrong passwords under tz-ada from it refuse the 31st on for tz-ada from
    there (the guesses stop), while tz-ada from elsewhere, tz-bea and a newcomer from the same address, and the
    instructor after 35 wrong passwords, all sign in; 35 wrong workshop codes refuse first sign-ins only."""
    assert attempts["room_bea_first"]["result"] == {"name": "tz-bea", "admin": False}
    assert attempts["room_wrong_ada"] == [False] * 30 + [True] * 5
    assert "Too many failed sign-ins as tz-ada" in attempts["room_ada_right_here"]["said"]
    assert attempts["room_ada_right_elsewhere"]["result"] == {"name": "tz-ada", "admin": False}
    assert attempts["room_bea_right"]["result"] == {"name": "tz-bea", "admin": False}
    assert attempts["room_newcomer"]["result"] == {"name": "tz-cy", "admin": False}
    assert attempts["room_wrong_codes"] == [False] * 30 + [True] * 5
    assert attempts["room_bea_after_codes"]["result"] == {"name": "tz-bea", "admin": False}
    assert attempts["room_admin"]["result"] == {"name": "inst", "admin": False}


def test_forged_x_real_ip_and_x_forwarded_for_do_not_escape_the_address_throttle(attempts):
    for how in ("forged_headers", "forged_direct"):  # through the proxy; straight to the hub's port
        refused = attempts[how]
        assert refused == [False] * 30 + [True] * 5, (how, refused)


def test_megabyte_names_are_refused_without_memory_or_log_growth(attempts):
    found = attempts["long_names"]
    assert "cannot be an attendee's name" in found["said"] and found["said_chars"] < 400, found
    assert found["logged"] < 30 * 400, found  # 30 names of 1 MiB: a line each, the name cut short
    assert found["grew_mib"] < 10, found


def test_the_failure_table_forgets_its_least_recently_failed_address_past_its_bound(attempts):
    assert attempts["table"]["throttled"]
    assert "Too many" not in attempts["table"]["after_8_others"], attempts["table"]


def test_a_password_over_72_bytes_is_refused_with_its_reason_not_an_http_500(attempts):
    for how in ("long_password_first", "long_password_taken"):
        assert attempts[how]["status"] == 200 and attempts[how]["result"] is None, attempts[how]
        assert "at most 72 bytes" in attempts[how]["said"], attempts[how]


def test_a_newcomer_is_told_apart_a_missing_workshop_code_from_a_wrong_one(attempts):
    assert attempts["no_code"]["result"] is None and "needs the workshop code" in attempts["no_code"]["said"]
    assert attempts["wrong_code"]["result"] is None, attempts["wrong_code"]
    assert attempts["wrong_code"]["said"].startswith("That is not the workshop code"), attempts["wrong_code"]


# --- the instructor's reset of a forgotten password (issue 63 #6) ---------------------------------------------------

#: Run in the hub's venv as root: LabAuthenticator behind a real tornado HTTPServer, the hub's state folder
#: ``argv[1]``, attendee ``argv[2]``. The owner signs in first and gets their Unix user (users.create, as the
#: spawner makes it then); the instructor's *Delete User* drops their password (FirstUseAuthenticator.delete_user, what the admin page calls);
#: then an attacker with the workshop code, the instructor's CLI reset, and the owner with the one-time code. Prints
#: ``{attempt: result or the form's message}`` as JSON.
RESET_ATTEMPTS = r"""
import asyncio, json, os, subprocess, sys, types, urllib.parse
from tornado import httpclient, httpserver, netutil, web
from labkit.hub import auth, users

CODE, STATE, NAME = "the-workshop-code", sys.argv[1], sys.argv[2]
authenticator = auth.LabAuthenticator(workshop_code=CODE, admin_password="i" * 40, instructor="inst",
                                      dbm_path=os.path.join(STATE, "passwords.dbm"))


class Login(web.RequestHandler):
    async def post(self):
        self.custom_login_error = ""
        data = {k: self.get_body_argument(k, "") for k in ("username", "password", "workshop_code")}
        result = await authenticator.authenticate(self, data)
        self.finish({"result": result, "said": self.custom_login_error})


async def main():
    sockets = netutil.bind_sockets(0, "127.0.0.1")
    server = httpserver.HTTPServer(web.Application([(r"/hub/login", Login)]), xheaders=True)
    server.add_sockets(sockets)
    client, url = httpclient.AsyncHTTPClient(), f"http://127.0.0.1:{sockets[0].getsockname()[1]}/hub/login"

    async def sign_in(password, code="", via="198.51.100.9"):
        body = urllib.parse.urlencode({"username": NAME, "password": password, "workshop_code": code})
        answer = await client.fetch(url, method="POST", body=body, headers={"X-Forwarded-For": via})
        out = json.loads(answer.body)
        return out["result"] or out["said"]

    found = {"owner_first": await sign_in("owners-password", CODE)}
    users.create(NAME)  # the owner's lab: their Unix user and home
    authenticator.delete_user(types.SimpleNamespace(name=NAME))  # the admin page's Delete User
    found["taker_after_delete"] = await sign_in("takers-password", CODE, via="198.51.100.66")
    reset = subprocess.run([sys.executable, "-m", "labkit.hub", "reset-password", NAME, "--state", STATE],
                           capture_output=True, text=True, timeout=120)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    one_time = reset.stdout.split(f"One-time code for {NAME}: ", 1)[1].split()[0]
    found["taker_workshop_code"] = await sign_in("takers-password", CODE, via="198.51.100.66")
    found["taker_wrong_code"] = await sign_in("takers-password", "0" * 12, via="198.51.100.66")
    found["owner_old_password"] = await sign_in("owners-password")
    found["owner_one_time"] = await sign_in("owners-new-password", one_time)
    found["taker_same_code_again"] = await sign_in("takers-password", one_time, via="198.51.100.66")
    found["owner_new_password"] = await sign_in("owners-new-password")
    print(json.dumps(found))


asyncio.run(main())
"""


def test_a_deleted_attendee_s_name_is_not_taken_with_the_workshop_code_and_its_owner_returns_with_a_one_time_code(
        hub_python, tmp_path):
    name = f"tz-reset-{secrets.token_hex(3)}"  # its own: another run of this module at once has another
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    try:
        done = subprocess.run([str(hub_python), "-c", RESET_ATTEMPTS, str(state), name], capture_output=True,
                              text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        users.remove(name, tmp_path / "private")
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    owner = {"name": name, "admin": False}
    assert found["owner_first"] == owner, found
    assert "has a lab on this machine already" in found["taker_after_delete"], found  # the workshop code: refused
    for attempt in ("taker_workshop_code", "taker_wrong_code", "owner_old_password"):  # its one-time code only
        assert "was reset" in found[attempt], found
    assert found["owner_one_time"] == owner and found["owner_new_password"] == owner, found
    assert found["taker_same_code_again"] == f"The name {name} is taken: choose another.", found  # used up
