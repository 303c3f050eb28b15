"""The instructor's live view: a JupyterHub service (hub-managed, run as root like the hub) showing one row per attendee
while the workshop runs: signed in, server up, broker up, the lab's memory against its limit, each kernel busy (since
when; "stuck?" past :data:`labkit.hub.page.STUCK_S`), idle or stopped by a cell that raised, and per notebook the latest
exercise check's mark (unanswered, wrong, right, or error: the check raised, the lab's failure), claims mark (held:
every assertion cell of the kernel's latest run held and the claims line ran; failed; error:
:class:`labkit.learn.claims.Run`) and a participant seen stalled; below, the predictions locked in before each
notebook's run, in the learners' words. ``python -m labkit.hub.liveview``, started by the hub
(:mod:`labkit.hub.config`).

Routes, under ``JUPYTERHUB_SERVICE_PREFIX`` (``/services/liveview/``, reached through the hub's proxy):

* ``""``: the page (HTML). ``api/table``: the table alone, which the page fetches every :data:`REFRESH_S` seconds.
  Both need JupyterHub OAuth (``jupyterhub.services.auth.HubOAuthenticated``) with the scope JupyterHub gives the
  service (``JUPYTERHUB_OAUTH_ACCESS_SCOPES``: ``access:services!service=liveview``), which only the instructor's
  role holds (:data:`labkit.hub.config.INSTRUCTOR_ROLE`): an attendee is refused at the hub's authorize step (403
  "You do not have permission to access Service liveview").
* ``api/report`` (POST): a kernel's report (:mod:`labkit.hub.report`), authenticated by the attendee's own
  ``JUPYTERHUB_API_TOKEN`` in its ``Authorization`` header, which the hub resolves to its owner
  (``HubAuth.user_for_token``: the hub's ``GET /hub/api/user``, any valid token may identify itself). The report is
  filed under that user; its body may not name one (:func:`labkit.hub.verdicts.parse_report`). Answers 204, 401 (no
  token), 403 (a token the hub does not know, or a service's), 400 (a bad body).
* ``notebooks/<name>``: attendee ``<name>``'s notebooks, and ``notebooks/<name>/<file>`` one of them, read-only and
  script-free (:mod:`labkit.hub.notebook_view`: read as the attendee, served with ``Content-Security-Policy:
  sandbox``): how the instructor reads an attendee's notebook, holding no access to their JupyterLab. OAuth as the page;
  404 with the reason for a name that is no attendee's lab or a notebook not shown.
* ``oauth_callback``: JupyterHub's ``HubOAuthCallbackHandler``.

What a row shows is observed: the hub's own user and server models (the hub API, with this service's token: scopes
``list:users``, ``read:users``, ``read:roles:users``, ``read:servers``), the attendee's broker
(:func:`labkit.hub.observed.broker_status`, probed as root) and their lab's memory group
(:func:`labkit.hub.sandbox.memory_of`: the kernel's accounting of its usage against its limit, and
:func:`labkit.hub.sandbox.oom_kills`); their kernels' states (busy, idle, a cell that raised) and the verdicts come
from the attendees' kernels (:mod:`labkit.hub.report`), stored in SQLite in the hub's state folder
(:class:`labkit.hub.verdicts.Store`, ``$LABKIT_HUB_STATE/liveview.sqlite``). A kernel's state counts only if it came
since the attendee's server started (the server model's ``started``): a stopped server has no kernel. The instructor
gets no row. The page and its table are :mod:`labkit.hub.page`'s.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import os
import pwd
import time
from pathlib import Path
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import httpclient, ioloop, web

from labkit.hub import notebook_view
from labkit.hub.config import is_instructor
from labkit.hub.names import is_lab_user, unix_name
from labkit.hub.observed import broker_status
from labkit.hub.page import notebook_titles, page_html, table_html
from labkit.hub.sandbox import cgroups, memory_of, netns, oom_kills
from labkit.hub.verdicts import FILE_NAME, BadReport, Store, parse_report

#: The environment variable naming the hub's state folder (the SQLite store's folder), set by the hub's config.
STATE_ENV = "LABKIT_HUB_STATE"
#: How often the page fetches the table, in seconds.
REFRESH_S = 5
#: How long one table is reused (seconds): two instructors' pages share a probe round.
CACHE_S = 2.0
#: Deadline of the hub API call and of each broker probe, in seconds.
HUB_API_TIMEOUT_S, PROBE_TIMEOUT_S = 10.0, 1.0


class LiveView:
    """The table's sources: the ``store``, the hub API (``api_url``, this service's ``token``), ``titles``."""

    def __init__(self, store: Store, api_url: str, token: str, titles: dict) -> None:
        self.store, self.api_url, self.token, self.titles = store, api_url, token, titles
        self._cached: tuple[float, str] | None = None
        self._lock = asyncio.Lock()

    async def users(self) -> list[dict]:
        """The hub's user models (``GET /hub/api/users``, up to 200: JupyterHub's largest page).

        Raises:
            tornado.httpclient.HTTPClientError: the hub refused; OSError: it did not answer in time.
        """
        response = await httpclient.AsyncHTTPClient().fetch(
            url_path_join(self.api_url, "users?limit=200"), headers={"Authorization": f"token {self.token}"},
            request_timeout=HUB_API_TIMEOUT_S)
        return json.loads(response.body)

    async def table(self) -> str:
        """The table (:func:`table_html`), made afresh at most every :data:`CACHE_S` seconds."""
        async with self._lock:
            if self._cached and time.monotonic() - self._cached[0] < CACHE_S:
                return self._cached[1]
            users = [u for u in await self.users() if not is_instructor(u)]
            names = [u["name"] for u in users]
            seen = await asyncio.gather(*(asyncio.to_thread(_observe, name) for name in names))
            fragment = table_html(users, {n: broker for n, (broker, _) in zip(names, seen)}, self.store.marks(),
                                  self.titles, time.time(), {n: memory for n, (_, memory) in zip(names, seen)})
            self._cached = (time.monotonic(), fragment)
            return fragment


def _observe(name: str) -> tuple[str, tuple[int, int, int] | None]:
    """Hub user ``name``'s broker status and ``(usage, limit, OOM kills)`` of their memory group (None: no group)."""
    try:
        entry = pwd.getpwnam(unix_name(name))
    except KeyError:
        return "none", None
    if not is_lab_user(entry):
        return "none", None
    memory = memory_of(cgroups(entry.pw_uid)[0])
    usage = None if memory is None else (*memory, oom_kills(entry.pw_uid))
    return broker_status(entry.pw_dir, entry.pw_uid, netns(entry.pw_uid), PROBE_TIMEOUT_S), usage


class _Admin(HubOAuthenticated, web.RequestHandler):
    def initialize(self, view: LiveView) -> None:
        self.view = view


class PageHandler(_Admin):
    """The page: the table now, and the script refreshing it."""

    @web.authenticated
    async def get(self) -> None:
        self.write(page_html(await self.view.table(), REFRESH_S, self.xsrf_token.decode()))


class TableHandler(_Admin):
    """The table alone (HTML), for the page's refresh: a cookie-authenticated ``fetch``, so HubOAuth accepts its
    cookie only with the page's XSRF token (``X-XSRFToken``, JupyterHub 4.1+'s check)."""

    @web.authenticated
    async def get(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.write(await self.view.table())


class _Notebooks(_Admin):
    """What the notebook pages share: their answer, and the attendee's Unix user."""

    def send(self, status: int, page: str) -> None:
        """Answer ``page`` with ``status``, script-free (:data:`labkit.hub.notebook_view.CSP`) and not cached."""
        self.set_status(status)
        self.set_header("Content-Security-Policy", notebook_view.CSP)
        self.set_header("Cache-Control", "no-store")
        self.finish(page)

    def attendee(self, name: str) -> pwd.struct_passwd | None:
        """The Unix user of attendee ``name``'s lab, or None (answered 404) when the hub made none."""
        try:
            entry = pwd.getpwnam(unix_name(name))
        except KeyError:
            entry = None
        if entry is None or not is_lab_user(entry):
            self.send(404, f"<p>{html.escape(name)} has no lab on this machine.</p>")
            return None
        return entry


class NotebooksHandler(_Notebooks):
    """An attendee's notebooks, listed as them (:func:`labkit.hub.notebook_view.listing_html`)."""

    @web.authenticated
    async def get(self, name: str) -> None:
        if (entry := self.attendee(name)) is None:
            return
        try:
            found = await asyncio.to_thread(notebook_view.notebooks, entry)
        except notebook_view.NotShown as exc:
            self.send(404, f"<p>{html.escape(name)}'s notebooks are not shown: {html.escape(str(exc))}</p>")
            return
        self.send(200, notebook_view.listing_html(name, found))


class NotebookHandler(_Notebooks):
    """One notebook of an attendee, read as them, script-free (:func:`labkit.hub.notebook_view.page_html`)."""

    @web.authenticated
    async def get(self, name: str, file: str) -> None:
        if (entry := self.attendee(name)) is None:
            return
        try:
            notebook = await asyncio.to_thread(notebook_view.read, entry, file)
        except notebook_view.NotShown as exc:
            self.send(404, f"<p>{html.escape(file)} of {html.escape(name)} is not shown: {html.escape(str(exc))}</p>")
            return
        self.send(200, notebook_view.page_html(name, file, notebook))


class ReportHandler(web.RequestHandler):
    """A kernel's report, filed under its token's owner (module docstring)."""

    def initialize(self, hub_auth: HubOAuth, store: Store) -> None:
        self.hub_auth, self.store = hub_auth, store

    async def post(self) -> None:
        token = self.hub_auth.get_token(self, in_cookie=False)
        if not token:
            raise web.HTTPError(401, "a report needs the attendee's API token (Authorization: token ...)")
        model = await self.hub_auth.user_for_token(token, sync=False)
        if not model or model.get("kind", "user") != "user":
            raise web.HTTPError(403, "the hub knows no user with this token")
        try:
            notebook, kind, state = parse_report(self.request.body)
        except BadReport as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.store.record(model["name"], notebook, kind, state)
        self.set_status(204)

    def write_error(self, status_code: int, **kwargs) -> None:
        exc = kwargs.get("exc_info", (None, None))[1]
        self.finish({"status": status_code, "message": getattr(exc, "log_message", None) or self._reason})


def make_app(store: Store, prefix: str, api_url: str, token: str) -> web.Application:
    """The service's tornado application under ``prefix`` (``/services/liveview/``)."""
    hub_auth = HubOAuth.instance()
    view = LiveView(store, api_url, token, notebook_titles())
    return web.Application([
        (prefix, PageHandler, {"view": view}),
        (prefix.rstrip("/"), web.RedirectHandler, {"url": prefix}),
        (url_path_join(prefix, "api/table"), TableHandler, {"view": view}),
        (url_path_join(prefix, "api/report"), ReportHandler, {"hub_auth": hub_auth, "store": store}),
        (url_path_join(prefix, "notebooks/([^/]+)"), NotebooksHandler, {"view": view}),
        (url_path_join(prefix, "notebooks/([^/]+)/([^/]+)"), NotebookHandler, {"view": view}),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32))


def main() -> None:
    """Run the service on ``JUPYTERHUB_SERVICE_URL`` (JupyterHub sets it and the other ``JUPYTERHUB_*`` variables
    for a hub-managed service) with its store in ``$LABKIT_HUB_STATE``."""
    logging.basicConfig(level=logging.WARNING,  # into the hub's log: refusals and errors, not every request
                        format="[%(levelname).1s %(asctime)s liveview] %(message)s")
    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    store = Store(Path(os.environ[STATE_ENV]) / FILE_NAME)
    app = make_app(store, os.environ["JUPYTERHUB_SERVICE_PREFIX"], os.environ["JUPYTERHUB_API_URL"],
                   os.environ["JUPYTERHUB_API_TOKEN"])
    app.listen(url.port, url.hostname)
    try:
        ioloop.IOLoop.current().start()
    except KeyboardInterrupt:  # the hub stopping its services
        pass


if __name__ == "__main__":
    main()
