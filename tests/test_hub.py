"""The workshop hub (labkit/hub/, issue 38 phase 1): a real JupyterHub on this machine, two attendees signed in through
headless Chromium, each with their own Unix user, home 0700 and JupyterLab showing their copies of the notebooks.

The hub test needs root (it makes Unix users and runs JupyterHub as root) and Debian's chromium; without either it is
skipped, saying why. It does the hub's set-up itself (:func:`labkit.hub.install.install_shared`: once per machine, a
few minutes the first time, about a second after), runs its hub on free ports with its own state folder, and signs in
names unique to the run (``t<random>a``/``b``), so parallel workers and second runs never meet. Its teardown stops the
hub (and with it the attendees' servers) and removes the Unix users, homes and processes of the names it made, and
nothing else. No notebook runs: no kernel starts (JupyterLab opens on the launcher).

The checks that need neither root nor a hub (names, passwords, port, lock, configuration) run everywhere.
"""

from __future__ import annotations

import os
import pwd
import secrets
import signal
import socket
import stat
import subprocess
import time
import urllib.request

import pytest

from labkit.errors import LabkitError
from labkit.hub import install, names, run, users
from labkit.hub.config import HubSettings, configure

HUB_START_S = 180  # a cold hub on a loaded 2-core machine took 20 s; the set-up before it is not counted here
LAB_START_S = 240  # sign-in to the file browser: about 80 s for one attendee on a machine with a load of 26


# --- no root needed -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, refused", [
    ("ada", None), ("team-3", None), ("7up", None), ("a" * names.MAX_NAME, None),
    ("a" * (names.MAX_NAME + 1), "cannot be an attendee's name"), ("bad name", "cannot be an attendee's name"),
    ("-x", "cannot be an attendee's name"), ("émile", "cannot be an attendee's name"), ("", "cannot be"),
    ("root", "is an account of this machine"), ("daemon", "is an account of this machine"),
])
def test_names(name, refused):
    why = names.why_refused(name)
    assert (why is None) if refused is None else (refused in why), why


def test_a_lab_user_name_made_by_someone_else_is_refused(monkeypatch):
    other = pwd.struct_passwd(("lab-bob", "x", 4000, 4000, "Bob, by hand", "/home/lab-bob", "/bin/sh"))
    ours = pwd.struct_passwd(("lab-bob", "x", 4000, 4000, f"{names.COMMENT} bob", "/home/lab-bob", "/bin/bash"))
    for entry, refused in ((other, True), (ours, False)):
        monkeypatch.setattr(names.pwd, "getpwnam", lambda n, e=entry: e if n == "lab-bob" else (_ for _ in ()).throw(
            KeyError(n)))
        assert bool(names.why_refused("bob")) is refused


@pytest.mark.parametrize("password, admin, message", [
    (None, "a" * 32, "LABKIT_HUB_PASSWORD"), ("short", "a" * 32, "at least 8"),
    ("attendees", None, "LABKIT_HUB_ADMIN_PASSWORD"), ("attendees", "a" * 31, "at least 32"),
    ("a" * 32, "a" * 32, "must differ"),
])
def test_passwords_are_required(password, admin, message):
    with pytest.raises(LabkitError, match=message):
        run.check_passwords(password, admin)


def test_a_port_in_use_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(LabkitError, match="in use.*--port"):
            run.check_port("127.0.0.1", s.getsockname()[1])


def test_a_second_hub_on_the_same_state_is_refused(tmp_path):
    fd = run.lock_state(tmp_path / "state")
    try:
        assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
        with pytest.raises(LabkitError, match=f"already runs.*pid {os.getpid()}"):
            run.lock_state(tmp_path / "state")
    finally:
        os.close(fd)
    os.close(run.lock_state(tmp_path / "state"))  # free again once the first holder is gone


def test_not_root_is_refused(monkeypatch):
    monkeypatch.setattr(run.os, "geteuid", lambda: 1000)
    with pytest.raises(LabkitError, match="sudo make hub"):
        run.prepare()
    with pytest.raises(LabkitError, match="sudo make hub"):
        install.install_shared()


def test_no_npm_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    with pytest.raises(LabkitError, match="apt-get install npm"):
        install.install_proxy(tmp_path / "hub", say=lambda line: None)


def test_configuration(monkeypatch):
    from traitlets.config import Config

    monkeypatch.setenv("LABKIT_HUB_PASSWORD", "attendees")
    c = Config()
    configure(c, HubSettings(ip="127.0.0.1", port=1, hub_port=2, proxy_api_port=3, prefix="/opt/x", state="/s",
                             proxy="/p", cull_idle_s=600).__dict__)
    assert c.Spawner.cmd == ["/opt/x/venv/bin/python", "-m", "labkit.hub.singleuser"]
    assert c.Spawner.env_keep == ["LANG", "LC_ALL"] and c.Spawner.environment["PATH"].startswith("/opt/x/venv/bin:")
    assert c.SharedPasswordAuthenticator.user_password == "attendees"
    assert "--timeout=600" in c.JupyterHub.services[0]["command"]
    assert c.JupyterHub.db_url == "sqlite:////s/jupyterhub.sqlite" and c.ConfigurableHTTPProxy.command == ["/p"]


def test_the_shared_venv_leaves_out_the_test_tools_and_pyspark():
    pins = {p.split("==")[0].lower() for p in install.pinned_packages()}
    assert {"jupyterlab", "jupyterhub", "jupyterhub-idle-culler", "confluent-kafka"} <= pins
    assert not pins & {"pytest", "playwright", "pyspark"}


def test_the_prefix_must_be_open_to_attendees(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(LabkitError, match="not open to other users"):
        install.shared_prefix(closed / "labkit")


# --- a real hub, as root --------------------------------------------------------------------------------------------

def _skip_unless_hub_can_run() -> None:
    from labkit.browser import missing

    if os.geteuid() != 0:
        pytest.skip("the hub test makes Unix users and runs JupyterHub as root: run it as root (sudo make test)")
    if (why := missing()):
        pytest.skip(f"the hub test signs in through a browser: it {why}")


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A running hub: ``{"url", "password", "names", "log"}``. The names are this run's; those whose Unix user did
    not exist before are removed after, with their homes and processes."""
    _skip_unless_hub_can_run()
    tag = secrets.token_hex(3)
    made = [f"t{tag}{x}" for x in "ab"]
    assert all(names.why_refused(n) is None for n in made)
    fresh = [n for n in made if not _exists(names.unix_name(n))]
    state = tmp_path_factory.mktemp("hub") / "state"
    log = state.parent / "hub.log"
    password, admin_password = secrets.token_urlsafe(12), secrets.token_urlsafe(32)
    t0 = time.monotonic()
    admin = f"i{tag}"  # the instructor's name: unique too (signing in never spawns a server for it here)
    proc, settings = run.start(password, admin_password, state, log, admin=admin, say=lambda line: None)
    try:
        deadline = time.monotonic() + HUB_START_S
        while not _answers(f"{settings.url}hub/api") and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        if not _answers(f"{settings.url}hub/api"):
            pytest.fail(f"the hub did not answer within {HUB_START_S} s:\n{log.read_text()[-3000:]}")
        print(f"set-up and hub start: {time.monotonic() - t0:.1f} s")
        yield {"url": settings.url, "password": password, "names": made, "log": log, "prefix": settings.prefix,
               "admin": admin, "admin_password": admin_password}
    finally:
        _stop(proc)
        for name in fresh:
            users.remove(name)
        left = [n for n in fresh if _exists(names.unix_name(n))]
        assert not left, f"Unix users left behind: {left}"


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def _stop(proc: subprocess.Popen, timeout_s: float = 90) -> None:
    """SIGTERM the hub (it stops the proxy, the culler and every attendee's server), SIGKILL after ``timeout_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _sign_in(page, url: str, name: str, password: str, next_path: str = "") -> float:
    """Fill and submit the hub's sign-in form; returns the time of the submit (``time.monotonic``)."""
    page.goto(f"{url}hub/login" + (f"?next={next_path}" if next_path else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    submitted = time.monotonic()
    page.click("#login_submit")
    return submitted


def test_two_attendees_each_get_their_own_lab(hub):
    from labkit.browser import chromium

    a, b = hub["names"]
    with chromium() as page_a:
        page_b = page_a.context.browser.new_page()  # a second context: its own cookies, its attendee
        submitted = {name: _sign_in(page, hub["url"], name, hub["password"])
                     for page, name in ((page_a, a), (page_b, b))}
        for page, name in ((page_a, a), (page_b, b)):
            try:
                page.wait_for_selector(".jp-DirListing-itemText:has-text('00_tour.ipynb')", timeout=LAB_START_S * 1000)
            except Exception:
                pytest.fail(f"{name}'s JupyterLab did not show 00_tour.ipynb (at {page.url}):\n"
                            f"{page.inner_text('body')[:1000]}\n{hub['log'].read_text()[-3000:]}")
            assert page.url.startswith(f"{hub['url']}user/{name}/lab"), page.url
            print(f"{name}: sign-in to the file browser {time.monotonic() - submitted[name]:.1f} s")
            # the lab's JupyterLab settings reach the attendee's JupyterLab (no "Jupyter news" prompt)
            settings = page.request.get(f"{hub['url']}user/{name}/lab/api/settings/"
                                        "@jupyterlab/apputils-extension:notification").json()
            assert settings["schema"]["properties"]["fetchNews"]["default"] == "false", settings

        # signing in as root, or as a name no Unix user can have, is refused on the sign-in form, saying why
        page_c = page_a.context.browser.new_page()
        for name, why in (("root", "is an account of this machine"), ("Bad Name!", "cannot be an attendee's name")):
            _sign_in(page_c, hub["url"], name, hub["password"])
            page_c.wait_for_load_state()
            assert why in page_c.inner_text("body"), page_c.inner_text("body")[:1000]
            assert "/hub/login" in page_c.url
        assert not _exists("lab-root")
        # the instructor's name takes the instructor's password only; with it, the admin page lists both attendees
        _sign_in(page_c, hub["url"], hub["admin"], hub["password"])
        page_c.wait_for_load_state()
        assert "Invalid username or password" in page_c.inner_text("body")
        _sign_in(page_c, hub["url"], hub["admin"], hub["admin_password"], next_path="/hub/admin")
        for name in (a, b):
            page_c.wait_for_selector(f"text={name}", timeout=60_000)

    entries = {name: pwd.getpwnam(names.unix_name(name)) for name in (a, b)}
    for name, entry in entries.items():
        assert names.is_lab_user(entry) and entry.pw_uid != 0
        home = os.stat(entry.pw_dir)
        assert (stat.S_IMODE(home.st_mode), home.st_uid) == (0o700, entry.pw_uid)
        assert users.processes_of(entry.pw_uid), f"no process of {entry.pw_name}: its JupyterLab runs as someone else"
        copy = os.path.join(entry.pw_dir, "labkit", "work", "00_tour.ipynb")
        assert os.stat(copy).st_uid == entry.pw_uid

    # attendee A's process cannot read B's home nor signal B's JupyterLab: real PermissionErrors, in a Python run as A
    b_home = entries[b].pw_dir
    b_server = users.processes_of(entries[b].pw_uid)[0]
    probe = ("import os, signal, sys\n"
             "for what in (lambda: os.listdir(sys.argv[1]), lambda: open(sys.argv[2]).read(),\n"
             "             lambda: os.kill(int(sys.argv[3]), signal.SIGTERM)):\n"
             "    try:\n        what()\n        print('done')\n    except PermissionError:\n        print('denied')\n")
    as_a = subprocess.run([os.path.join(hub["prefix"], "venv", "bin", "python"), "-c", probe, b_home,
                           os.path.join(b_home, "labkit", "work", "00_tour.ipynb"), str(b_server)],
                          user=entries[a].pw_uid, group=entries[a].pw_gid, extra_groups=[], cwd="/",
                          capture_output=True, text=True, timeout=60)
    assert as_a.stdout.split() == ["denied", "denied", "denied"], as_a.stdout + as_a.stderr
    assert b_server in users.processes_of(entries[b].pw_uid)
