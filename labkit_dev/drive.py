"""Drive a real workshop hub as a room would, through headless Chromium.

Start it on free ports with its own state, sign attendees in through headless Chromium, open a notebook in their
JupyterLab, Run All, wait for it to finish, shut its kernel down, run cells in a kernel of theirs, read the instructor's
live view; then stop the hub and remove the Unix users it made. Shared by the hub's test (``tests/test_hub.py``) and
``bench/hub.py`` (which runs as a script, with only ``labkit`` importable, hence here and not under ``tests/``; like
:mod:`labkit_dev.browser`, it imports Playwright only when a page is driven).

Everything here needs root (the hub makes Unix users and an nftables table) and Debian's chromium
(:func:`labkit_dev.browser.missing`). Every wait has a deadline given by the caller; a page that does not get where it
should raises :class:`~labkit.core.errors.LabkitError` with what the page and the hub's log show.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import secrets
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from labkit.core.errors import LabkitError
from labkit.core.waiting import Deadline, wait_until
from labkit.hub import firewall, install, names, run, sandbox, users
from labkit.hub.config import CULL_IDLE_S

#: A code cell's prompt once it ran (``[3]``) or while it runs or waits in the queue (``[*]``).
RAN, PENDING = re.compile(r"\[\d+\]"), re.compile(r"\[\*\]")
#: What an error output shows (IPython's traceback header): JupyterLab draws an error and a stderr stream alike
#: (``application/vnd.jupyter.stderr``), and only an error fails a cell.
RAISED = re.compile(r"Traceback \(most recent call last\)")


def answers(url: str) -> bool:
    """Whether ``url`` answers an HTTP GET within 2 s (any status)."""
    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except OSError:
        return False


def user_exists(user: str) -> bool:
    """Whether the Unix user ``user`` exists."""
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def stop(proc: subprocess.Popen, timeout_s: float = 90) -> None:
    """SIGTERM the hub (it stops the proxy, the culler and every attendee's server), SIGKILL its session after
    ``timeout_s`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextmanager
def running_hub(folder: Path, count: int, *, cull_idle_s: int = CULL_IDLE_S, extra: dict | None = None,
                start_timeout_s: float = 180.0) -> Iterator[dict]:
    """A hub started by :func:`labkit.hub.run.start` (its set-up first) with its state and log in ``folder`` (a new,
    empty folder), answering on its URL. Yields ``{"url", "password", "admin", "admin_password", "pid", "names",
    "log", "prefix", "table", "state", "cache", "setup_s"}`` (``pid``: JupyterHub's): ``names`` are ``count`` attendee
    names unique to this run (``t<random>a``, ``b``...), ``setup_s`` the seconds from the call to the hub's first
    answer. After: the hub stopped (SIGTERM), its firewall table removed, and the Unix users of ``names`` that did not
    exist before removed, with their homes and processes; nothing else.

    Raises:
        LabkitError: as :func:`labkit.hub.run.start`; the hub did not answer within ``start_timeout_s`` seconds (the
            log's tail quoted); or, after, a Unix user or the firewall table outlived the hub.
    """
    tag = secrets.token_hex(3)
    made = [f"t{tag}{chr(ord('a') + i)}" for i in range(count)]
    fresh = [n for n in made if not user_exists(names.unix_name(n))]
    log = folder / "hub.log"
    password, admin_password = secrets.token_urlsafe(12), secrets.token_urlsafe(32)
    admin = f"i{tag}"  # the instructor's name: unique too (signing in never spawns a server for it)
    started = time.monotonic()
    proc, settings = run.start(password, admin_password, folder / "state", log, admin=admin, say=lambda line: None,
                               cull_idle_s=cull_idle_s, extra=extra)
    table = firewall.table_name(settings.state)
    left: list[str] = []
    try:
        api = f"{settings.url}hub/api"
        wait_until(lambda: answers(api) or proc.poll() is not None, start_timeout_s, 0.5)
        if not answers(api):
            raise LabkitError(f"The hub did not answer within {start_timeout_s:g} s:\n{log.read_text()[-3000:]}")
        yield {"url": settings.url, "password": password, "admin": admin, "admin_password": admin_password,
               "pid": proc.pid, "names": made, "log": log, "prefix": settings.prefix, "table": table,
               "state": settings.state,
               "cache": install.cache_dir(Path(settings.prefix)), "setup_s": time.monotonic() - started}
    finally:
        stop(proc)
        if firewall.exists(table):
            left.append(f"the hub's firewall table {table}")
        firewall.remove_table(table)
        left += [f"the network namespace of {n}" for n in fresh if user_exists(names.unix_name(n))
                 and sandbox.exists(pwd.getpwnam(names.unix_name(n)).pw_uid)]  # the hub's stop releases each
        for name in fresh:
            users.remove(name, sandbox.private_root(settings.state))
        left += [f"the Unix user {names.unix_name(n)}" for n in fresh if user_exists(names.unix_name(n))]
    if left:
        raise LabkitError(f"Left behind by the hub: {', '.join(left)}")


def sign_in(page, url: str, name: str, password: str, next_path: str = "", code: str = "") -> float:
    """Fill and submit the hub's sign-in form on ``page`` (Playwright): ``name``, ``password`` and, if given, the
    workshop ``code`` (a first sign-in under a name needs it, :mod:`labkit.hub.auth`); returns the time of the submit
    (``time.monotonic``, s)."""
    page.goto(f"{url}hub/login" + (f"?next={next_path}" if next_path else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    if code:
        page.fill("#workshop_code_input", code)
    submitted = time.monotonic()
    page.click("#login_submit")
    return submitted


def own_password(hub: dict, name: str) -> str:
    """The password a test or bench attendee ``name`` sets on their first sign-in to ``hub`` (:func:`running_hub`'s
    dict): derived from the workshop code and the name, never the code itself."""
    return hashlib.sha256(f"{hub['password']}:{name}".encode()).hexdigest()[:20]


def join(page, hub: dict, name: str, next_path: str = "") -> float:
    """:func:`sign_in` as attendee ``name`` of ``hub`` (:func:`running_hub`'s dict) does: their own password
    (:func:`own_password`) and the workshop code (needed the first time, ignored after)."""
    return sign_in(page, hub["url"], name, own_password(hub, name), next_path, code=hub["password"])


#: The attendee's lab is ready when their file browser lists notebook 00 (a CSS selector, Playwright's ``:has-text``).
FILE_BROWSER = ".jp-DirListing-itemText:has-text('00_tour.ipynb')"


def wait_for_lab(page, hub: dict, name: str, timeout_s: float) -> None:
    """Wait for ``name``'s JupyterLab file browser (listing ``00_tour.ipynb``) after :func:`sign_in`.

    Raises:
        LabkitError: not shown within ``timeout_s`` seconds, or shown at another URL (the page's text and the hub's
            log quoted).
    """
    try:
        page.wait_for_selector(FILE_BROWSER, timeout=timeout_s * 1000)
    except Exception:
        raise _not_ready(page, hub, name, f"did not show 00_tour.ipynb within {timeout_s:.0f} s") from None
    if not page.url.startswith(f"{hub['url']}user/{name}/lab"):
        raise LabkitError(f"{name}'s JupyterLab is at {page.url}, not under {hub['url']}user/{name}/lab")


#: JupyterLab's scripts, styles and fonts under an attendee's server: what a page loads to draw the lab (the hub's own
#: pages, sign-in and spawn progress, load theirs from ``/hub/static/``). A Playwright URL pattern.
LAB_ASSETS = "**/user/*/static/**"


def without_lab_drawn(page) -> None:
    """Have ``page`` (Playwright) load none of :data:`LAB_ASSETS`, for a sign-in that only needs the attendee's server
    (:func:`wait_for_server`): the hub's pages and the lab's own page load as ever, the lab is not drawn, and the page
    sends the server none of JupyterLab's polling. (Drawing JupyterLab costs Chromium about 3 CPU s a page, and an open
    lab polls its server; the tests that need the lab drawn wait with :func:`wait_for_lab`.)"""
    page.route(LAB_ASSETS, lambda route: route.abort())


def wait_for_server(page, hub: dict, name: str, timeout_s: float) -> None:
    """Wait, after :func:`join` on a page of :func:`without_lab_drawn`, until ``name``'s own JupyterLab server answers
    through the hub's proxy: the hub sent the page to their lab's URL (``/user/<name>/lab``, its sign-in to that server
    done: the page holds its cookie) and their server's contents API, asked with that cookie, lists ``00_tour.ipynb``.

    Raises:
        LabkitError: not so within ``timeout_s`` seconds (where the page is, its network and the hub's log of ``name``
            quoted), or the server answered without notebook 00 (its answer quoted).
    """
    lab = f"{hub['url']}user/{name}/"
    try:
        page.wait_for_url(f"{lab}lab**", timeout=timeout_s * 1000)
    except Exception:
        raise _not_ready(page, hub, name, f"was not reached within {timeout_s:.0f} s") from None
    answer = page.request.get(f"{lab}api/contents", timeout=timeout_s * 1000)
    try:
        listed = [item["name"] for item in answer.json().get("content", [])] if answer.ok else []
    except ValueError:  # not JSON: a page (e.g. a sign-in form) answered in the server's stead
        listed = []
    if "00_tour.ipynb" not in listed:
        raise LabkitError(f"{name}'s JupyterLab server answered {answer.status} without 00_tour.ipynb: "
                          f"{answer.text()[:500]}")


def _not_ready(page, hub: dict, name: str, what: str) -> LabkitError:
    """The error of a lab that :func:`wait_for_lab` or :func:`wait_for_server` waited for in vain: ``what`` it did,
    where the page is, what it shows, its requests pending or failed, and the hub's log lines naming ``name``."""
    from labkit_dev.browser import network_report

    return LabkitError(f"{name}'s JupyterLab {what} (at {page.url}); the page shows:\n{page.inner_text('body')[:1000]}"
                       f"\nits network:\n{network_report(page)}\nthe hub's log of {name} (their server's too):\n"
                       f"{log_of(hub, name)}")


def log_of(hub: dict, name: str, most: int = 40) -> str:
    """The last ``most`` lines of ``hub``'s log (:func:`running_hub`'s dict) that name attendee ``name``: the hub's own
    and their single-user server's (JupyterHub's local spawner hands it the hub's output), which the room's other
    attendees' lines would push out of a plain tail."""
    lines = [line for line in hub["log"].read_text(errors="replace").splitlines() if name in line]
    return "\n".join(lines[-most:]) or f"(no line names {name})"


def open_notebook(page, url: str, name: str, notebook: str, timeout_s: float = 180.0, reset: bool = False) -> None:
    """Open ``notebook`` (a file name in the attendee's working folder) in ``name``'s JupyterLab at its URL and wait
    for its kernel (:func:`wait_for_kernel`). ``reset``: JupyterLab's ``?reset`` (the saved layout dropped, so no
    earlier tab is restored, and no kernel started for it).

    Raises:
        LabkitError: as :func:`wait_for_kernel`.
    """
    _take_proposed_kernel(page)
    page.goto(f"{url}user/{name}/lab/tree/{notebook}" + ("?reset" if reset else ""))
    wait_for_kernel(page, f"{url}user/{name}/", notebook, timeout_s)


def open_from_file_browser(page, url: str, name: str, notebook: str, timeout_s: float = 180.0) -> None:
    """Open ``notebook`` as an attendee does in the JupyterLab ``page`` shows (after :func:`wait_for_lab`): a double
    click on its name in the file browser, the lab already loaded (no second load of JupyterLab's page), then wait
    for its kernel (:func:`wait_for_kernel`).

    Raises:
        LabkitError: as :func:`wait_for_kernel`.
    """
    _take_proposed_kernel(page)
    page.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text=notebook)).first.dblclick()
    wait_for_kernel(page, f"{url}user/{name}/", notebook, timeout_s)


def _take_proposed_kernel(page) -> None:
    """JupyterLab may ask for the kernel even when it could start one (when its list of kernel specs is not loaded
    yet): have ``page`` take the proposed one whenever it asks."""
    page.add_locator_handler(page.locator(".jp-Dialog", has_text="Select Kernel"),
                             lambda dialog: dialog.locator(".jp-Dialog-button.jp-mod-accept").click())


def wait_for_kernel(page, base: str, notebook: str, timeout_s: float) -> None:
    """Wait until the JupyterLab open on ``page`` (its server at ``base``, e.g. ``<hub>/user/<name>/``) has the kernel
    of ``notebook`` (its path from the server's root) started, connected and idle: the server lists the notebook's
    session (``GET api/sessions``, Jupyter Server's REST API: the session's path is the notebook's once JupyterLab has
    its kernel) with its kernel idle and connected, and the page's execution indicator says idle. The indicator alone
    proves nothing: JupyterLab shows it idle before it has asked for any kernel, and a Run All in that window started a
    kernel of its own, then JupyterLab's, which shut the first down with the cells it had taken (JupyterLab's
    ``SessionContext``; the lab's JupyterLab now refuses such a Run All, saying the kernel is initializing:
    ``enableKernelInitNotification``, :data:`labkit.lab.workspace.LAB_SETTINGS`).

    Raises:
        LabkitError: not within ``timeout_s`` seconds (the sessions the server listed quoted).
    """
    from playwright.sync_api import expect

    listed: list = []

    def ready() -> bool:
        answer = page.request.get(f"{base}api/sessions")
        listed[:] = answer.json() if answer.ok else [f"HTTP {answer.status}"]
        return any(isinstance(s, dict) and s.get("path") == notebook and (s.get("kernel") or {}).get("execution_state")
                   == "idle" and (s["kernel"].get("connections") or 0) >= 1 for s in listed)

    deadline = Deadline(timeout_s)
    if not wait_until(ready, timeout_s, 0.5):
        raise LabkitError(f"{notebook} had no idle kernel within {timeout_s:g} s; the server's sessions: {listed}")
    try:
        expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_visible(
            timeout=max(deadline.remaining_s(), 1.0) * 1000)
    except AssertionError:
        raise LabkitError(f"{notebook}'s kernel is idle on the server, but the page did not say so within "
                          f"{timeout_s:g} s") from None


def _menu(page, menu: str, item: str) -> None:
    """Click JupyterLab's menu bar ``menu`` then its item labelled ``item`` (a regular expression)."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{menu}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(item)).click()


#: What JupyterLab says of a run asked for while the notebook's kernel starts (``enableKernelInitNotification``).
INITIALIZING = re.compile("is still initializing")


def run_all(page, name: str, timeout_s: float = 60.0) -> None:
    """Run > Run All Cells in JupyterLab's menu, once (after :func:`open_notebook`), and wait for a cell to be taken.

    Raises:
        LabkitError: no cell started within ``timeout_s`` seconds, or JupyterLab refused the run because the kernel
            was still starting (a screenshot in ``/tmp/hub-run-all-<name>.png``).
    """
    from playwright.sync_api import expect

    taken = page.locator(".jp-CodeCell .jp-InputArea-prompt").filter(has_text=re.compile(r"\[(\*|\d+)\]"))
    _menu(page, "Run", "^Run All Cells$")
    try:
        expect(taken.first).to_be_visible(timeout=timeout_s * 1000)
        return
    except AssertionError:
        page.screenshot(path=f"/tmp/hub-run-all-{name}.png")
    refused = page.get_by_text(INITIALIZING).count()
    raise LabkitError(f"{name}'s Run All Cells started no cell within {timeout_s:g} s" +
                      (": JupyterLab said the kernel was still initializing" if refused else "") +
                      f" (screenshot /tmp/hub-run-all-{name}.png)")


#: Seconds a cell may stay queued (``[*]``) while the kernel says idle before its execute request counts as lost.
LOST_S = 45


def run_state(page) -> tuple[bool, bool, list[str]]:
    """``(pending, idle, prompts)`` of the notebook open on ``page``: whether a code cell is running or queued (a
    ``[*]`` prompt), whether its kernel says idle (JupyterLab's execution indicator), and every code cell's prompt
    text (its text content: also of the cells JupyterLab does not draw while they are out of view)."""
    texts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_text_contents()
    idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count() > 0
    return any(PENDING.search(t) for t in texts), idle, texts


def wait_for_run(page, name: str, timeout_s: float, interval_s: float = 2.0) -> str | None:
    """After :func:`run_all`: wait until no code cell of ``name``'s open notebook is running or queued (no ``[*]``
    prompt) and the kernel is idle, twice in a row ``interval_s`` apart. Reads every cell's prompt and error output
    from the page's DOM (their text content), so cells out of view count too: JupyterLab's default windowing
    (``contentVisibility`` in 4.6) keeps every cell in the DOM but skips drawing those out of view, whose rendered
    text (``innerText``) is then empty.
    Returns None if the last code cell ran and no cell raised, else why not: where the run stopped and the last error
    output shown (a cell that raised stops Run All: JupyterLab clears the queued cells' prompts; the last cell's
    failure stops nothing, and fails the run all the same).

    Raises:
        LabkitError: still running after ``timeout_s`` seconds; or the run was lost: cells queued while the kernel has
            said idle for :data:`LOST_S` seconds, or a run that ended short with no error shown (the execute requests
            went to a kernel that is gone: a defect, never asked again).
    """
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                          has_text=RAISED)
    deadline, quiet, stalled_since = Deadline(timeout_s), 0, None
    while True:
        if deadline.expired():
            raise LabkitError(f"{name}'s notebook still ran after {timeout_s:g} s")
        time.sleep(interval_s)
        pending, is_idle, texts = run_state(page)
        quiet = quiet + 1 if is_idle and not pending else 0
        stalled_since = (stalled_since or time.monotonic()) if pending and is_idle else None
        if stalled_since is not None and time.monotonic() - stalled_since > LOST_S:
            raise LabkitError(f"{name}'s queued cells were not run by an idle kernel for {LOST_S} s (lost execute "
                              "requests)")
        if quiet >= 2:
            break
    shown = errors.all_text_contents()
    if texts and RAN.search(texts[-1]) and not shown:
        return None
    ran = sum(bool(RAN.search(t)) for t in texts)
    if not shown:
        raise LabkitError(f"{name}'s Run All ended after {ran} of {len(texts)} code cells with no error shown (lost "
                          "execute requests)")
    where = (f"every code cell ran ({ran}), one raised" if texts and RAN.search(texts[-1]) else
             f"stopped after {ran} of {len(texts)} code cells")
    return f"{where}: " + shown[-1][-800:]


def shut_down_kernels(page) -> None:
    """Kernel > Shut Down All Kernels… in JupyterLab's menu, confirmed in its dialog ("Shut Down All")."""
    _menu(page, "Kernel", "^Shut Down All Kernels")
    page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()


#: Runs ``cells`` one after the other in the kernel of the page's Jupyter server (``base``: ``.../user/<name>/``)
#: that runs the notebook session of ``path`` (Jupyter Server gives an existing session of that path, else makes one
#: with a new kernel): the server's REST API (a session, with the page's XSRF cookie) then the kernel's websocket
#: (Jupyter's messaging protocol 5.3). A cell is its code, or ``[cellId, code]``: sent with that ``cellId`` in the
#: request's metadata, as JupyterLab sends a notebook cell's id (ipykernel gives it to IPython's ``run_cell``).
#: Returns each cell's status and output.
RUN_CELLS_JS = """async ({base, path, cells, timeoutMs}) => {
  const xsrf = decodeURIComponent((document.cookie.match(/(?:^|;\\s*)_xsrf=([^;]*)/) || [null, ''])[1]);
  const made = await fetch(base + 'api/sessions', {method: 'POST', body: JSON.stringify(
      {path, name: path, type: 'notebook', kernel: {name: 'python3'}}),
    headers: {'Content-Type': 'application/json', 'X-XSRFToken': xsrf}});
  if (!made.ok) return {error: 'api/sessions: HTTP ' + made.status + ' ' + await made.text()};
  const session = await made.json();
  const ws = new WebSocket(base.replace(/^http/, 'ws') + 'api/kernels/' + session.kernel.id + '/channels?session_id='
                           + session.id);
  await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = () => fail(new Error('websocket refused')); });
  const results = [];
  for (const cell of cells) {
    const [cellId, code] = Array.isArray(cell) ? cell : [null, cell];
    const id = crypto.randomUUID();
    const done = new Promise((resolve, fail) => {
      const out = []; let status = null, idle = false;
      setTimeout(() => fail(new Error('no reply within ' + timeoutMs + ' ms to ' + code)), timeoutMs);
      ws.onmessage = ev => {
        const msg = JSON.parse(ev.data);
        if (msg.parent_header.msg_id !== id) return;
        const t = msg.header.msg_type;
        if (t === 'stream') out.push(msg.content.text);
        else if (t === 'execute_result') out.push(msg.content.data['text/plain']);
        else if (t === 'error') out.push(msg.content.ename + ': ' + msg.content.evalue);
        else if (t === 'execute_reply') status = msg.content.status;
        else if (t === 'status' && msg.content.execution_state === 'idle') idle = true;
        if (status && idle) resolve({status, output: out.join('')});
      };
    });
    ws.send(JSON.stringify({header: {msg_id: id, msg_type: 'execute_request', username: '', session: session.id,
      date: new Date().toISOString(), version: '5.3'}, parent_header: {}, metadata: cellId ? {cellId} : {}, channel: 'shell',
      content: {code, silent: false, store_history: true, user_expressions: {}, allow_stdin: false,
                stop_on_error: false}}));
    results.push(await done);
  }
  ws.close();
  return {results};
}"""


def run_cells(page, url: str, name: str, cells: list[str | tuple[str, str]], path: str = "00_tour.ipynb",
              timeout_s: float = 240.0) -> list[dict]:
    """Run ``cells`` (code strings, or ``(cell id, code)`` pairs: the same id is the same notebook cell run again)
    one after the other in the kernel of ``name``'s notebook session of ``path`` (a new one if there is none), from
    ``page`` (signed in as ``name`` to the hub at ``url``, its JupyterLab open):
    :data:`RUN_CELLS_JS`. Returns each cell's ``{"status": "ok"|"error", "output"}``.

    Raises:
        LabkitError: the server refused the session, or a cell had no reply within ``timeout_s`` seconds.
    """
    base = f"{url}user/{name}/"
    try:
        out = page.evaluate(RUN_CELLS_JS, {"base": base, "path": path, "cells": cells, "timeoutMs": timeout_s * 1000})
    except Exception as error:  # Playwright's Error: the promise was rejected (no reply, websocket refused)
        raise LabkitError(f"{name}'s cells did not run: {error}") from None
    if "error" in out:
        raise LabkitError(f"{name}'s cells did not run: {out['error']}")
    return out["results"]


#: The live view's row of the attendee named ``name`` (a JavaScript expression; undefined while there is none).
_LIVE_ROW = ("[...document.querySelectorAll('#live tbody tr')]"
             ".find(r => r.querySelector('th.who')?.textContent === name)")
#: The live view's cell of notebook ``n`` in ``name``'s row (its marks, e.g. ``E✓C✓``), null while there is no row.
LIVE_MARKS_JS = f"""([name, n]) => {{
  const row = {_LIVE_ROW};
  return row ? row.querySelectorAll('td.nb')[n].textContent : null;
}}"""
#: The texts of the cells of ``name``'s row, null while there is no row.
LIVE_ROW_JS = f"""name => {{
  const row = {_LIVE_ROW};
  return row ? [...row.children].map(c => c.innerText) : null;
}}"""


def live_marks(page, name: str, notebook: int = 0) -> str | None:
    """The marks the instructor's live view, open on ``page``, shows for ``name`` and notebook ``notebook`` (its
    column: 0 for 00), e.g. ``E✓C✗``; None while it has no row for ``name``."""
    return page.evaluate(LIVE_MARKS_JS, [name, notebook])


def live_row(page, name: str) -> list[str] | None:
    """The texts of the cells of ``name``'s row in the live view open on ``page`` (who, signed in, server, broker,
    then each notebook's marks, then the last report); None while it has no row for ``name``."""
    return page.evaluate(LIVE_ROW_JS, name)


def wait_for_live_marks(page, name: str, pattern: str, notebook: int = 0, timeout_s: float = 120.0) -> None:
    """Wait until the live view open on ``page`` shows marks matching ``pattern`` (a JavaScript regular expression)
    for ``name`` and notebook ``notebook``, by itself (the page refreshes itself).

    Raises:
        LabkitError: not within ``timeout_s`` seconds (the marks shown and the page's text quoted).
    """
    try:
        page.wait_for_function(f"([name, n, pattern]) => new RegExp(pattern).test(({LIVE_MARKS_JS})([name, n]))",
                               arg=[name, notebook, pattern], timeout=timeout_s * 1000)
    except Exception:
        raise LabkitError(f"the live view did not show /{pattern}/ for {name} in notebook 0{notebook}: "
                          f"{live_marks(page, name, notebook)!r}\n{page.inner_text('body')[:2000]}") from None


#: The live view's predictions for a notebook, ``{choice key: count}`` (empty while it has no row for it).
LIVE_PREDICTIONS_JS = """n => Object.fromEntries([...document.querySelectorAll(
  `#predictions tr[data-notebook="${n}"] .choice`)].map(c => [c.dataset.choice, Number(c.querySelector('b').textContent)]))"""

