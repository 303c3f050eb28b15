"""The instructor's live view: a JupyterHub service (hub-managed, run as root like the hub) showing one row per attendee
while the workshop runs: signed in, server up, broker up, and per notebook the latest exercise verdict and claims-cell
outcome. ``python -m labkit.hub.liveview``, started by the hub (:mod:`labkit.hub.config`).

Routes, under ``JUPYTERHUB_SERVICE_PREFIX`` (``/services/liveview/``, reached through the hub's proxy):

* ``""``: the page (HTML). ``api/table``: the table alone, which the page fetches every :data:`REFRESH_S` seconds.
  Both need JupyterHub OAuth (``jupyterhub.services.auth.HubOAuthenticated``) with the scope JupyterHub gives the
  service (``JUPYTERHUB_OAUTH_ACCESS_SCOPES``: ``access:services!service=liveview``), which only the hub's ``admin``
  role holds: an attendee is refused at the hub's authorize step (403 "You do not have permission to access
  Service liveview").
* ``api/report`` (POST): a kernel's report (:mod:`labkit.hub.report`), authenticated by the attendee's own
  ``JUPYTERHUB_API_TOKEN`` in its ``Authorization`` header, which the hub resolves to its owner
  (``HubAuth.user_for_token``: the hub's ``GET /hub/api/user``, any valid token may identify itself). The report is
  filed under that user; its body may not name one (:func:`labkit.hub.verdicts.parse_report`). Answers 204, 401 (no
  token), 403 (a token the hub does not know, or a service's), 400 (a bad body).
* ``oauth_callback``: JupyterHub's ``HubOAuthCallbackHandler``.

What a row shows is observed: the hub's own user and server models (the hub API, with this service's token: scopes
``list:users``, ``read:users``, ``read:servers``) and the attendee's broker (:func:`labkit.hub.observed.broker_status`,
probed as root); the verdicts come from the attendees' kernels, stored in SQLite in the hub's state folder
(:class:`labkit.hub.verdicts.Store`, ``$LABKIT_HUB_STATE/liveview.sqlite``). Admins get no row.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import os
import pwd
import string
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import httpclient, ioloop, web

from labkit.hub.names import is_lab_user, unix_name
from labkit.hub.observed import broker_status, listeners
from labkit.hub.report import CLAIMS_LINE
from labkit.hub.verdicts import FILE_NAME, NOTEBOOKS, BadReport, Store, parse_report
from labkit.workspace import SOURCES

#: The environment variable naming the hub's state folder (the SQLite store's folder), set by the hub's config.
STATE_ENV = "LABKIT_HUB_STATE"
#: How often the page fetches the table, in seconds.
REFRESH_S = 5
#: How long one table is reused (seconds): two instructors' pages share a probe round.
CACHE_S = 2.0
#: Deadline of the hub API call and of each broker probe, in seconds.
HUB_API_TIMEOUT_S, PROBE_TIMEOUT_S = 10.0, 1.0


def notebook_titles(sources: Path = SOURCES) -> dict[str, tuple[str, bool]]:
    """``{"00": ("tour", has a claims cell)}`` for the notebooks in ``sources``, from their file names and sources."""
    titles = {}
    for path in sorted(sources.glob("[0-9][0-9]_*.ipynb")):
        words = path.stem[3:].replace("_", " ")
        titles[path.stem[:2]] = (words, CLAIMS_LINE in path.read_text(errors="replace"))
    return titles


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s ago" if seconds < 90 else f"{seconds / 60:.0f} min ago" if seconds < 5400 else \
        f"{seconds / 3600:.0f} h ago"


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _epoch(iso: str | None) -> float | None:
    """Seconds since the epoch of the hub's ISO 8601 time (``"2026-11-26T06:40:00.123Z"``), or ``None``."""
    if not iso:
        return None
    when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _badge(css: str, text: str, title: str) -> str:
    return f'<span class="b {css}" title="{html.escape(title)}">{text}</span>'


#: What a notebook's cell shows per kind: (kind, letter, word when ok, word when not).
KINDS = (("exercise", "E", "right", "not yet"), ("claims", "C", "held", "failed"))
#: How each broker status is shown: (CSS class, word).
BROKER_CSS = {"up": ("ok", "up"), "down": ("no", "down"), "none": ("wait", "not started")}


def _mark_cell(marks: dict, notebook: str, has_claims: bool) -> str:
    parts = []
    for kind, letter, right, wrong in KINDS:
        mark = marks.get((notebook, kind))
        if kind == "claims" and not has_claims:
            parts.append(_badge("na", "–", "this notebook has no claims cell"))
        elif mark is None:
            parts.append(_badge("none", f"{letter}·", f"{kind}: not run yet"))
        else:
            parts.append(_badge("ok" if mark.ok else "no", f"{letter}{'✓' if mark.ok else '✗'}",
                                f"{kind}: {right if mark.ok else wrong} at {_clock(mark.at)} ({mark.reports} run(s))"))
    return f'<td class="nb">{"".join(parts)}</td>'


def _room_cell(marks: list[dict], notebook: str, has_claims: bool) -> str:
    """How many of the attendees (``marks``: each one's) got ``notebook``'s exercise right and its claims held."""
    parts = [_badge("sum", f"{letter}{sum(m[(notebook, kind)].ok for m in marks if (notebook, kind) in m)}",
                    f"{kind}: {right} for this many of the {len(marks)} attendees")
             for kind, letter, right, _ in KINDS if kind == "exercise" or has_claims]
    return f'<td class="nb">{"".join(parts)}</td>'


def _server_cell(user: dict) -> str:
    server = (user.get("servers") or {}).get("")
    if not server:
        return '<td class="no">stopped</td>'
    if server.get("ready"):
        return '<td class="ok">up</td>'
    return f'<td class="wait">{"stopping" if server.get("pending") == "stop" else "starting"}</td>'


def _row(user: dict, broker: str, marks: dict, titles: dict, now: float) -> str:
    seen = _epoch(user.get("last_activity"))
    signed = f'<td class="ok">yes<small>active {_ago(now - seen)}</small></td>' if seen else \
        '<td class="wait">not yet</td>'
    css, word = BROKER_CSS[broker]
    last = max((m.at for m in marks.values()), default=None)
    reported = f"{_clock(last)}<small>{_ago(now - last)}</small>" if last else "none"
    cells = "".join(_mark_cell(marks, n, titles[n][1]) for n in NOTEBOOKS)
    return (f'<tr><th class="who">{html.escape(user["name"])}</th>{signed}{_server_cell(user)}'
            f'<td class="{css}">{word}</td>{cells}<td class="last">{reported}</td></tr>')


def table_html(users: list[dict], brokers: dict[str, str], marks: dict, titles: dict, now: float) -> str:
    """The live view's table (an HTML fragment): a summary line, one row per attendee of ``users`` (the hub's user
    models, admins left out) and a last row counting the room's marks per notebook. ``brokers``:
    ``{name: broker_status}``; ``marks``: as :meth:`Store.marks` returns them; ``titles``: as
    :func:`notebook_titles`; ``now``: seconds since the epoch."""
    titles = {n: titles.get(n, ("", True)) for n in NOTEBOOKS}
    attendees = sorted((u for u in users if not u.get("admin")), key=lambda u: u["name"])
    theirs = [marks.get(u["name"], {}) for u in attendees]
    rows = "".join(_row(u, brokers.get(u["name"], "none"), m, titles, now) for u, m in zip(attendees, theirs))
    if attendees:
        rows += (f'<tr class="room"><th colspan="4">Right / held, of {len(attendees)}</th>'
                 + "".join(_room_cell(theirs, n, titles[n][1]) for n in NOTEBOOKS) + "<td></td></tr>")
    else:
        rows = f'<tr><td colspan="{len(NOTEBOOKS) + 5}" class="empty">No attendee has signed in yet.</td></tr>'
    servers_up = sum(bool(((u.get("servers") or {}).get("") or {}).get("ready")) for u in attendees)
    brokers_up = sum(brokers.get(u["name"]) == "up" for u in attendees)
    head = "".join(f'<th class="nb">{n}<small>{html.escape(titles[n][0])}</small></th>' for n in NOTEBOOKS)
    return (f'<p class="sum"><b>{len(attendees)}</b> attendee(s) · <b>{servers_up}</b> server(s) up · '
            f'<b>{brokers_up}</b> broker(s) up · updated {_clock(now)} {time.strftime("%Z")}</p>'
            f'<table><thead><tr><th>Attendee</th><th>Signed in</th><th>Server</th><th>Broker</th>{head}'
            f'<th>Last report</th></tr></thead><tbody>{rows}</tbody></table>')


PAGE = string.Template("""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Live view · labkit workshop</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 20px 24px; color: #1f2328; }
h1 { font-size: 22px; margin: 0 0 4px; } .sum { margin: 4px 0 14px; color: #444; } .legend { color: #555; margin: 0; }
#stale { color: #cf222e; font-weight: 600; } #stale:empty { display: none; }
table { border-collapse: collapse; }
th, td { padding: 6px; border-bottom: 1px solid #d0d7de; text-align: left; white-space: nowrap;
  vertical-align: middle; }
thead th { background: #f6f8fa; font-weight: 600; position: sticky; top: 0; }
small { display: block; font-size: 11px; color: #666; font-weight: 400; }
th.nb, td.nb { text-align: center; } th.nb small { max-width: 80px; margin: 0 auto; white-space: normal; }
th.who { font-weight: 600; } td.ok { color: #1a7f37; } td.no { color: #cf222e; } td.wait { color: #9a6700; }
tr.room th, tr.room td { background: #f6f8fa; border-bottom: none; } tr.room th { text-align: right; }
.b { display: inline-block; min-width: 20px; margin: 0 1px; padding: 1px 3px; border-radius: 4px; font-size: 12px;
  font-weight: 600; text-align: center; }
.b.ok { background: #dafbe1; color: #1a7f37; } .b.no { background: #ffebe9; color: #cf222e; }
.b.none { background: #f6f8fa; color: #8c959f; } .b.na { color: #8c959f; } .b.sum { background: #fff; }
.empty { color: #666; padding: 16px; }
</style></head><body>
<h1>Live view · labkit workshop</h1>
<p class="legend">Per notebook: <span class="b ok">E✓</span> exercise right, <span class="b no">E✗</span> not yet;
<span class="b ok">C✓</span> claims cell held, <span class="b no">C✗</span> failed; <span class="b none">E·</span>
not run; <span class="b na">–</span> no claims cell. Hover a mark for its time. Refreshes every $refresh s.</p>
<p id="stale"></p><div id="live">$table</div>
<script>
async function refresh() {
  const stale = document.getElementById('stale');
  try {
    const r = await fetch('api/table', {credentials: 'same-origin', cache: 'no-store', redirect: 'manual',
                                        headers: {'X-XSRFToken': $xsrf}});
    if (!r.ok) throw new Error(r.type === 'opaqueredirect' ? 'signed out: reload the page' : 'HTTP ' + r.status);
    document.getElementById('live').innerHTML = await r.text();
    stale.textContent = '';
  } catch (e) {
    stale.textContent = 'Not refreshed (' + e.message + '): this is the state at the time shown.';
  }
}
setInterval(refresh, $refresh * 1000);
</script></body></html>""")


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
            users = [u for u in await self.users() if not u.get("admin")]
            owners = await asyncio.to_thread(listeners)
            statuses = await asyncio.gather(*(asyncio.to_thread(_broker_of, u["name"], owners) for u in users))
            fragment = table_html(users, dict(zip([u["name"] for u in users], statuses)), self.store.marks(),
                                  self.titles, time.time())
            self._cached = (time.monotonic(), fragment)
            return fragment


def _broker_of(name: str, owners: dict[int, int]) -> str:
    try:
        entry = pwd.getpwnam(unix_name(name))
    except KeyError:
        return "none"
    return broker_status(entry.pw_dir, entry.pw_uid, owners, PROBE_TIMEOUT_S) if is_lab_user(entry) else "none"


class _Admin(HubOAuthenticated, web.RequestHandler):
    def initialize(self, view: LiveView) -> None:
        self.view = view


class PageHandler(_Admin):
    """The page: the table now, and the script refreshing it."""

    @web.authenticated
    async def get(self) -> None:
        self.write(PAGE.substitute(table=await self.view.table(), refresh=REFRESH_S,
                                   xsrf=json.dumps(self.xsrf_token.decode())))


class TableHandler(_Admin):
    """The table alone (HTML), for the page's refresh: a cookie-authenticated ``fetch``, so HubOAuth accepts its
    cookie only with the page's XSRF token (``X-XSRFToken``, JupyterHub 4.1+'s check)."""

    @web.authenticated
    async def get(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.write(await self.view.table())


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
            notebook, kind, ok = parse_report(self.request.body)
        except BadReport as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.store.record(model["name"], notebook, kind, ok)
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
