"""The instructor reading an attendee's notebook cannot be made to act as the instructor (issue 63), on a real hub
through headless Chromium.

The attacker is an attendee in their own lab: a notebook of theirs carries, in an output, script that calls the hub's
API with the browser's own credentials (the xsrf token read from ``/hub/home``, fetched on the same origin): make the
attendee an admin, and mint the reader a token. The attendee signs the notebook with their own notebook secret
(``nbformat.sign.NotebookNotary``, as them, in their lab), so their JupyterLab calls it trusted and runs its script.
What counts is what the hub holds afterwards (its database: admins, tokens), not the script's own claim.

* The run-sheet's way (:mod:`labkit.hub.notebook_view`): the instructor holds no ``access:servers``
  (:data:`labkit.hub.config.INSTRUCTOR_SCOPES`), so *Access Server* is refused, and reads the notebook in the live view,
  read as the attendee and served script-free; a notebook that is a symbolic link to the hub's cookie secret shows
  nothing of it.
* A lured visit: the attendee's own server (their ``~/.jupyter/jupyter_config.py``, which ``jupyterhub-singleuser``
  runs) serves the same script at ``/user/<name>/lure`` without any sign-in, and the instructor opens that link. Same
  origin as the hub (no subdomains), so the script acts with the instructor's cookie: it can no longer make an admin
  or mint a token (JupyterHub: no admin exists to grant it; the ``user`` role has no ``tokens``), but what the
  instructor's role allows it does, for as long as the page is open; the test prints what (docs/hub-decisions.md:
  subdomains close it).

Without a hub: the configuration gives the instructor no ``access:servers`` nor ``tokens`` and makes nobody admin
(any machine), and the live view's reading of an attendee's files, as ``nobody``, refuses a link to root's file, a
FIFO, an oversized file and a name with a folder (root only).

The hub's tests: root only, with Debian's chromium (:func:`tests.hubtools.skip_unless_hub_can_run`). One hub for the
module (25 CPU s for the whole module, measured: the hub, two sign-ins and one restart of the attendee's lab).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from labkit.core.waiting import wait_until
from labkit.hub import names
from labkit_dev import drive
from tests.hubtools import HUB_START_S, as_attendee, join_to_server, skip_unless_hub_can_run

#: The token note the attacker's script asks for: found in the hub's database if the script got through.
STOLEN = "made-by-an-attendee-s-script"
#: What the attacker's script does with the reader's credentials, run in their browser on the page's origin: read the
#: xsrf token JupyterHub puts in its own pages (``window.jhdata`` of ``/hub/home``, fetched: JupyterHub 6 forbids
#: framing its pages, ``frame-ancestors 'none'``, so a frame's is out of reach), learn who reads
#: (``GET /hub/api/user``), ask to make the attendee ``ATTACKER`` an admin, mint that reader a token, make a hub user
#: ``ATTACKERz`` (what an instructor may do); the statuses (or the error) go in the page's ``<html data-attack>`` and
#: its console.
SCRIPT = """<script>(async () => {
  const say = text => { document.documentElement.dataset.attack = text; console.log(`attack: ${text}`); };
  try {
  const home = await (await fetch('/hub/home')).text();
  const xsrf = home.match(/xsrf_token: "([^"]+)"/)[1];
  const headers = {'X-XSRFToken': xsrf, 'Content-Type': 'application/json'};
  const me = await (await fetch('/hub/api/user', {headers})).json();
  const admin = await fetch('/hub/api/users/ATTACKER', {method: 'PATCH', headers, body: '{"admin": true}'});
  const token = await fetch(`/hub/api/users/${me.name}/tokens`, {method: 'POST', headers, body: '{"note": "STOLEN"}'});
  const made = await fetch('/hub/api/users/ATTACKERz', {method: 'POST', headers});
  say(`by ${me.name}: admin ${admin.status} token ${token.status} user ${made.status}`);
  } catch (error) { say(`error: ${error}`); }
})()</script>"""
#: Run as the attendee in their lab: write ``argv[1]`` (a notebook in their working folder) whose one output holds
#: ``argv[2]`` as HTML, and sign it with their own notebook secret (their JupyterLab then trusts it).
WRITE_SIGNED = """
import sys
import nbformat
from nbformat.sign import NotebookNotary
nb = nbformat.v4.new_notebook()
nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
cell = nbformat.v4.new_code_cell("show_my_results()")
cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": sys.argv[2], "text/plain": "my results"})]
nb.cells = [nbformat.v4.new_markdown_cell("# My results, please have a look"), cell]
NotebookNotary().sign(nb)
nbformat.write(nb, sys.argv[1])
print(NotebookNotary().check_signature(nb))
"""
#: The attendee's ``~/.jupyter/jupyter_config.py``, which their server (``jupyterhub-singleuser``, jupyter_core's
#: ``JupyterApp.load_config_file``) runs at its start: it serves ``PAGE`` at ``<base_url>lure`` to anyone, first of its
#: handlers (before Jupyter Server's catch-all 404).
LURE_CONFIG = """
import jupyter_server.serverapp as serverapp
from tornado import web
PAGE = PAGE_TEXT
class Lure(web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/html")
        self.finish(PAGE)
made = serverapp.ServerWebApplication.init_handlers
def init_handlers(self, default_services, settings):
    return [(settings["base_url"].rstrip("/") + "/lure", Lure)] + made(self, default_services, settings)
serverapp.ServerWebApplication.init_handlers = init_handlers
"""
NOTEBOOK = "my_results.ipynb"


# --- no hub --------------------------------------------------------------------------------------------------------

def test_the_instructor_holds_no_access_to_labs_nor_tokens_and_nobody_is_the_hub_s_admin():
    from traitlets.config import Config

    from labkit.hub.config import HubSettings, configure

    c = Config()
    configure(c, HubSettings(ip="127.0.0.1", port=1, hub_port=2, proxy_api_port=3, prefix="/opt/x", state="/s",
                             proxy="/p", admin="teacher").__dict__)
    roles = {role["name"]: role for role in c.JupyterHub.load_roles}
    assert c.Authenticator.admin_users == set() and c.LabAuthenticator.instructor == "teacher"
    assert roles["admin"] == {"name": "admin", "users": [], "services": []}  # exactly nobody, demoted at start
    assert roles["instructor"]["users"] == ["teacher"] and "admin-ui" in roles["instructor"]["scopes"]
    given = roles["instructor"]["scopes"] + roles["user"]["scopes"]
    assert not [s for s in given if s.split("!")[0] in ("access:servers", "tokens", "shares", "users:shares")
                and s != "access:servers!user"], given  # their own lab only; no token made, no server shared
    assert "self" not in roles["user"]["scopes"]


# --- the live view's reading, as root, of files an attendee controls ------------------------------------------------

@pytest.fixture
def nobody_home():
    """A home of ``nobody``'s (uid 65534) with ``labkit/work`` in a folder open to others (in /var/tmp), and its
    passwd entry; removed after. Root only."""
    from labkit.hub import notebook_view

    if os.geteuid() != 0:
        pytest.skip("the live view reads an attendee's files as them (setpriv): run it as root")
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))
    folder.chmod(0o755)
    entry = pwd.struct_passwd(("nobody", "x", 65534, 65534, "", str(folder / "home"), "/bin/sh"))
    work = notebook_view.work_folder(entry)
    work.mkdir(parents=True)
    for path in (work, work.parent, work.parent.parent):
        os.chown(path, 65534, 65534)
    try:
        yield entry
    finally:
        shutil.rmtree(folder)


def test_the_live_view_reads_an_attendee_s_notebook_as_them_bounded_and_shows_it_script_free(nobody_home,
                                                                                               monkeypatch):
    from labkit.hub import notebook_view

    work = notebook_view.work_folder(nobody_home)
    secret = Path(tempfile.mkdtemp(dir="/var/tmp")) / "root-only.ipynb"  # root's, 0600: what a link would reach
    try:
        secret.write_text('{"cells": [], "root": "secret"}')
        secret.chmod(0o600)
        mine = {"cells": [{"cell_type": "code", "source": "x", "execution_count": 1, "outputs": [
            {"output_type": "display_data",
             "data": {"text/html": "<script>alert(1)</script>", "text/plain": "<ok>"}}]}]}
        (work / "mine.ipynb").write_text(json.dumps(mine))
        (work / "link.ipynb").symlink_to(secret)
        os.mkfifo(work / "fifo.ipynb")
        (work / "big.ipynb").write_text(" " * 2048)
        for path in work.iterdir():
            os.chown(path, 65534, 65534, follow_symlinks=False)
        assert notebook_view.notebooks(nobody_home) == ["big.ipynb", "mine.ipynb"]  # regular files only
        page = notebook_view.page_html("ada", "mine.ipynb", notebook_view.read(nobody_home, "mine.ipynb"))
        assert "&lt;ok&gt;" in page and "<script" not in page and "not shown here: text/html" in page
        with pytest.raises(notebook_view.NotShown, match="Permission denied"):
            notebook_view.read(nobody_home, "link.ipynb")
        monkeypatch.setattr(notebook_view, "READ_TIMEOUT_S", 1.0)
        with pytest.raises(notebook_view.NotShown, match="not read within 1 s"):
            notebook_view.read(nobody_home, "fifo.ipynb")
        monkeypatch.setattr(notebook_view, "MAX_BYTES", 1024)
        with pytest.raises(notebook_view.NotShown, match="larger than"):
            notebook_view.read(nobody_home, "big.ipynb")
        for name in ("../mine.ipynb", ".hidden.ipynb", "mine.txt"):
            with pytest.raises(notebook_view.NotShown, match="not a notebook's name"):
                notebook_view.read(nobody_home, name)
    finally:
        shutil.rmtree(secret.parent)


# --- a real hub -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A running hub (:func:`labkit_dev.drive.running_hub`) with two names of this run."""
    skip_unless_hub_can_run()
    with drive.running_hub(tmp_path_factory.mktemp("hub"), 2, start_timeout_s=HUB_START_S) as running:
        yield running


def hub_holds(hub: dict) -> dict:
    """What the hub's database holds: ``{"admins": [names], "tokens": [(owner, note)], "users": [names]}`` (read
    only, sqlite)."""
    db = sqlite3.connect(f"file:{Path(hub['state']) / 'jupyterhub.sqlite'}?mode=ro", uri=True, timeout=10)
    try:
        admins = sorted(name for (name,) in db.execute("SELECT name FROM users WHERE admin"))
        users = sorted(name for (name,) in db.execute("SELECT name FROM users"))
        tokens = sorted(db.execute("SELECT users.name, api_tokens.note FROM api_tokens JOIN users "
                                   "ON api_tokens.user_id = users.id WHERE api_tokens.note IS NOT NULL"))
    finally:
        db.close()
    return {"admins": admins, "tokens": [tuple(t) for t in tokens], "users": users}


def _attack_page(attacker: str) -> str:
    return SCRIPT.replace("ATTACKER", attacker).replace("STOLEN", STOLEN)


def _attack_said(page, timeout_s: float) -> str | None:
    """What the attacker's script said on ``page`` (:data:`SCRIPT`), waiting up to ``timeout_s`` seconds; None if
    nothing."""
    deadline = time.monotonic() + timeout_s
    while (said := page.evaluate("document.documentElement.dataset.attack")) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    return said


def _attendee_api(page, hub: dict, method: str, path: str) -> int:
    """Call the hub's API ``path`` (after ``hub/api/``) with ``page``'s own cookie and the hub's xsrf token (its
    ``_xsrf`` cookie of path ``/hub/``: their JupyterLab sets one of its own), as the hub's pages do; the HTTP
    status."""
    xsrf = next(c["value"] for c in page.context.cookies() if c["name"] == "_xsrf" and c["path"] == "/hub/")
    return page.request.fetch(f"{hub['url']}hub/api/{path}", method=method, headers={"X-XSRFToken": xsrf}).status


def test_the_instructor_reading_an_attendee_s_notebook_as_the_run_sheet_says_gives_its_script_nothing(hub):
    from labkit_dev.browser import chromium, new_page

    attacker = hub["names"][0]
    with chromium() as page:
        join_to_server(page, hub, attacker)
        entry = pwd.getpwnam(names.unix_name(attacker))
        work = Path(entry.pw_dir, "labkit", "work")
        signed = as_attendee(entry, hub, WRITE_SIGNED, str(work / NOTEBOOK), _attack_page(attacker)).stdout
        assert signed.strip() == "True", signed  # their JupyterLab would trust it: its script would run there
        secret = Path(hub["state"], "jupyterhub_cookie_secret")
        as_attendee(entry, hub, f"import os; os.symlink({str(secret)!r}, {str(work / 'secret.ipynb')!r})")
        before = hub_holds(hub)

        instructor = new_page(page.context.browser)
        drive.sign_in(instructor, hub["url"], hub["admin"], hub["admin_password"], next_path="/hub/admin")
        instructor.wait_for_load_state()
        # Access Server (the admin page's link to /user/<name>/), at the notebook: refused
        instructor.goto(f"{hub['url']}user/{attacker}/lab/tree/{NOTEBOOK}")
        authorize = instructor.locator("button[type=submit]", has_text="Authorize")
        if authorize.count():
            authorize.click()
        instructor.locator(".jp-OutputArea-output").or_(instructor.get_by_text("do not have permission")).first \
            .wait_for(state="attached", timeout=180_000)
        said = _attack_said(instructor, 30)
        after = hub_holds(hub)
        served = instructor.request.get(f"{hub['url']}user/{attacker}/api/contents/{NOTEBOOK}")
        trusted = [c["metadata"].get("trusted") for c in served.json()["content"]["cells"]] if served.ok else None
        print(f"Access Server: the script said {said!r}; their server, asked for the notebook: {served.status}, cells "
              f"trusted {trusted}; the hub before {json.dumps(before)}, after {json.dumps(after)}; the page says "
              f"{instructor.inner_text('body')[:200]!r}")
        assert attacker not in after["admins"] and not any(note == STOLEN for _, note in after["tokens"]), after
        assert after["admins"] == [], after  # nobody is JupyterHub's admin, the instructor neither
        assert "You do not have permission to access" in instructor.inner_text("body")

        # the live view's notebooks: the page's link, then the notebook's, read as the attendee, no script run
        instructor.goto(f"{hub['url']}services/liveview/")
        listing = instructor.locator("p.notebooks").get_by_role("link", name=attacker, exact=True) \
            .get_attribute("href", timeout=60_000)
        answer = instructor.goto(f"{hub['url']}services/liveview/{listing}")
        assert answer.status == 200 and "sandbox" in answer.headers["content-security-policy"]
        assert NOTEBOOK in instructor.inner_text("body")
        started = time.monotonic()
        shown = instructor.goto(f"{hub['url']}services/liveview/{listing}/{NOTEBOOK}")
        assert shown.status == 200 and shown.headers["content-security-policy"].startswith("sandbox;")
        body = instructor.inner_text("body")
        print(f"the live view's page of {NOTEBOOK}: {time.monotonic() - started:.1f} s")
        assert "My results, please have a look" in body and "my results" in body and "not shown here: text/html" in body
        assert _attack_said(instructor, 10) is None
        # a notebook that is a link to a secret of the hub's: read as the attendee, refused
        linked = instructor.goto(f"{hub['url']}services/liveview/{listing}/secret.ipynb")
        assert linked.status == 404 and "Permission denied" in instructor.inner_text("body")
        assert secret.read_text().strip()[:16] not in instructor.content()
        last = hub_holds(hub)  # (the live view's sign-in made the instructor an OAuth token, with no note)
        assert last["admins"] == [] and not any(note == STOLEN for _, note in last["tokens"]), last


def test_a_lured_visit_to_an_attendee_served_page_makes_no_admin_and_mints_no_token(hub):
    from labkit_dev.browser import chromium, new_page

    attacker = hub["names"][0]
    with chromium() as page:
        join_to_server(page, hub, attacker)
        entry = pwd.getpwnam(names.unix_name(attacker))
        config = LURE_CONFIG.replace("PAGE_TEXT", repr(_attack_page(attacker)))
        as_attendee(entry, hub, "import os, sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); "
                    "open(sys.argv[1], 'w').write(sys.argv[2])",
                    str(Path(entry.pw_dir, ".jupyter", "jupyter_config.py")), config)
        # their server stopped and started again from their own browser (the hub's control panel does the same)
        assert _attendee_api(page, hub, "DELETE", f"users/{attacker}/server") in (202, 204)
        assert wait_until(lambda: _attendee_api(page, hub, "POST", f"users/{attacker}/server") in (201, 202), 120, 2.0)
        # served by their server itself, not the hub's page for a server still starting (which answers 200 too)
        assert wait_until(lambda: "document.documentElement.dataset.attack" in page.request.get(
            f"{hub['url']}user/{attacker}/lure").text(), 300, 2.0)
        before = hub_holds(hub)

        instructor = new_page(page.context.browser)
        drive.sign_in(instructor, hub["url"], hub["admin"], hub["admin_password"])
        instructor.wait_for_url("**/services/liveview/**")
        instructor.goto(f"{hub['url']}user/{attacker}/lure")  # a link the attendee sent: no sign-in asked
        said = _attack_said(instructor, 60)
        after = hub_holds(hub)
        print(f"lured visit: the script said {said!r} at {instructor.url}; the hub before {json.dumps(before)}, after "
              f"{json.dumps(after)}; the page: {instructor.content()[:300]!r}")
        assert said.startswith(f"by {hub['admin']}:"), said  # the script ran, as the instructor (one origin)
        assert after["admins"] == [] and not any(note == STOLEN for _, note in after["tokens"]), after
