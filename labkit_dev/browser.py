"""Drive Debian's Chromium with Playwright; read what a page shows badly.

The lab's pages as a learner sees them, and what a page shows that a learner could not read.

One helper for every browser check of the lab (the control-panel test, the notebook pages test, ``docs/figures.py``,
and the workshop hub's and the book's tests): :func:`chromium` launches the browser, :class:`ConsoleErrors` gathers the
page's console errors, and :func:`figure_problems`, :func:`text_dumps` and :func:`wide_tables` read, from the page
itself, what is wrong with the figures and tables a page shows: a figure taller than the window, two annotations on top
of each other, a title or label cut at the figure's edge, a legend naming the same thing twice, a figure printed as a
text dump of its object, a table wider than its column.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import subprocess
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from labkit.doctor.checks import CHROMIUM

#: No sandbox (root in a container), no GPU, nothing that reaches the internet.
FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage")
#: A laptop's window, in CSS px: every figure must fit it.
LAPTOP = {"width": 1280, "height": 800}
#: How long a page's action (a navigation, a click, a screenshot) may take before it fails, in ms: Playwright's
#: default, 30 s, is overrun by a JupyterLab page on a machine twice as slow with the suite's other workers busy
#: (``make test SPEED=half`` met it on a page load and a screenshot).
PAGE_TIMEOUT_MS = 180_000


def missing() -> str | None:
    """Why no browser check can run here (the fix named), or None when Chromium is installed."""
    return None if os.path.exists(CHROMIUM) else f"needs Debian's chromium at {CHROMIUM}: apt-get install chromium"


@contextmanager
def chromium(viewport: dict[str, int] = LAPTOP) -> Iterator["object"]:
    """A new headless Chromium page of ``viewport`` (``{"width", "height"}`` in CSS px) in a context of its own (a
    profile of its own: no cookie, storage or cache from before), closed after with every other context made in the
    block (:func:`new_page`: its actions wait up to :data:`PAGE_TIMEOUT_MS`; ``new_page(page.context.browser)`` makes
    another, for another user). The process's one Chromium serves every call (:func:`_running_browser`).

    Raises:
        FileNotFoundError: Chromium is not installed (the message names the package).
    """
    if (why := missing()):
        raise FileNotFoundError(why)
    browser = _running_browser()
    before = list(browser.contexts)
    try:
        yield new_page(browser, viewport)
    finally:
        for context in [c for c in browser.contexts if c not in before]:
            context.close()


#: The process's Playwright and its Chromium, started by the first :func:`chromium` and kept for the next (stopped
#: when the process exits): a start costs Chromium and Playwright's driver about 1.3 CPU s, a new context about 0.1
#: (ten calls, each with a page: 13.6 CPU s started each time, 5.5-6.0 kept), and the browser tests make dozens.
_RUNNING: dict[str, object] = {}


def _running_browser():
    """The process's Chromium (Playwright's ``Browser``), launched with :data:`FLAGS` if none runs (the first call,
    or the last one's browser gone)."""
    from playwright.sync_api import sync_playwright

    browser = _RUNNING.get("browser")
    if browser is not None and browser.is_connected():
        return browser
    if "playwright" not in _RUNNING:
        _RUNNING["playwright"] = sync_playwright().start()
        atexit.register(_stop_browser)
    _RUNNING["browser"] = _RUNNING["playwright"].chromium.launch(executable_path=CHROMIUM, headless=True,
                                                                 args=list(FLAGS))
    return _RUNNING["browser"]


def _stop_browser() -> None:
    """Close the process's Chromium and stop Playwright's driver (at exit)."""
    browser, playwright = _RUNNING.pop("browser", None), _RUNNING.pop("playwright", None)
    if browser is not None and browser.is_connected():
        browser.close()
    if playwright is not None:
        playwright.stop()


def new_page(browser, viewport: dict[str, int] = LAPTOP):
    """A new page of ``browser`` (Playwright's ``Browser``) in a context of its own (its own cookies: another user),
    of ``viewport``, whose actions wait up to :data:`PAGE_TIMEOUT_MS`."""
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    _record_requests(page)
    return page


#: Each page's requests still unanswered and those that failed (:func:`network_report`), by page.
_REQUESTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _record_requests(page) -> None:
    """Keep, for :func:`network_report`, ``page``'s requests that have not finished (by Playwright's ``Request``) and
    those that failed (URL and Chromium's reason)."""
    pending, failed = {}, []
    _REQUESTS[page] = (pending, failed)
    page.on("request", lambda request: pending.__setitem__(id(request), request.url))
    page.on("requestfinished", lambda request: pending.pop(id(request), None))

    def fail(request) -> None:
        pending.pop(id(request), None)
        failed.append(f"{request.url} ({request.failure})")
    page.on("requestfailed", fail)


def network_report(page, most: int = 10) -> str:
    """What ``page`` (made by :func:`new_page`) still waits for and what failed to load: at most ``most`` URLs of each,
    the newest last; the words "no request pending or failed" when there is neither."""
    pending, failed = _REQUESTS.get(page, ({}, []))
    lines = [f"pending: {url}" for url in list(pending.values())[-most:]] + \
        [f"failed: {what}" for what in failed[-most:]]
    return "\n".join(lines) if lines else "no request pending or failed"


#: Where Jupyter keeps a user's state: a page check's JupyterLab gets empty ones (a first start, no saved layout).
JUPYTER_DIRS = ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR")


@contextmanager
def lab_server(home: Path, bootstrap: str | None = None, settings: dict[str, dict] | None = None,
               timeout_s: float = 180.0) -> Iterator[str]:
    """The lab's JupyterLab as ``make lab`` starts it (``python -m labkit up``, run from the repository), in its own
    ``LABKIT_HOME`` ``home`` with empty Jupyter state folders, stopped after (``labkit down``). The broker is
    ``bootstrap`` ("host:port"), else ``LABKIT_BOOTSTRAP``'s if set, else one the lab starts. ``settings`` are a user's
    JupyterLab settings (``{"<package>:<plugin>": {setting: value}}``, as JupyterLab's Settings Editor saves them).
    Yields the URL ``labkit up`` printed (its token included).

    Raises:
        RuntimeError: ``labkit up`` failed or took more than ``timeout_s`` seconds (its stderr quoted).
    """
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "LABKIT_HOME": str(home), **{name: str(home / name.lower()) for name in JUPYTER_DIRS},
           **({"LABKIT_BOOTSTRAP": bootstrap} if bootstrap else {})}
    for plugin, values in (settings or {}).items():
        package, name = plugin.split(":")
        path = home / "jupyterlab_settings_dir" / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    lab = lambda cmd: subprocess.run([sys.executable, "-m", "labkit", cmd], env=env, cwd=repo,  # noqa: E731
                                     capture_output=True, text=True, timeout=timeout_s)
    try:  # a failed or late `up` may have started some of the lab: `down` stops what it recorded, either way
        try:
            up = lab("up")
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"labkit up took more than {timeout_s:g} s: {(exc.stderr or b'')[-2000:]!r}") from exc
        if up.returncode != 0:
            raise RuntimeError(f"labkit up failed: {up.stderr[-2000:]}")
        yield json.loads((home / "lab" / "jupyter.json").read_text())["url"]
    finally:
        lab("down")


class ConsoleErrors:
    """The console errors and uncaught exceptions of ``page`` from now on, except those matching one of ``allowed``
    (``{name: regex}``: each entry says why it is harmless)."""

    def __init__(self, page, allowed: dict[str, str]) -> None:
        self.allowed = {name: re.compile(rx) for name, rx in allowed.items()}
        self.seen: list[str] = []
        page.on("console", lambda msg: msg.type == "error" and self._add(msg.text))
        page.on("pageerror", lambda exc: self._add(f"uncaught: {exc}"))

    def _add(self, text: str) -> None:
        if not any(rx.search(text) for rx in self.allowed.values()):
            self.seen.append(text)


#: Reads every drawn plotly figure inside ``root`` (the element the function gets): its box, its title's, its
#: annotations' (action labels, ×n counts) and its legend's names, all in page px.
_FIGURES_JS = """root => [...root.querySelectorAll('.js-plotly-plot')].map(plot => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const title = plot.querySelector('.gtitle');
  return {
    box: box(plot),
    title: title ? {text: title.textContent, box: box(title)} : null,
    annotations: [...plot.querySelectorAll('.infolayer .annotation')].map(a => ({text: a.textContent, box: box(a)})),
    legend: [...plot.querySelectorAll('.legend .legendtext')].map(t => t.textContent),
  };
})"""


def _overlap(a: list[float], b: list[float]) -> float:
    """The area (px²) two boxes ``[left, top, right, bottom]`` share."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _outside(inner: list[float], outer: list[float], slack: float = 1.0) -> bool:
    return (inner[0] < outer[0] - slack or inner[1] < outer[1] - slack or inner[2] > outer[2] + slack
            or inner[3] > outer[3] + slack)


def figure_problems(element, window_height: int = LAPTOP["height"], where: str = "") -> list[str]:
    """What is wrong with the plotly figures drawn inside ``element`` (a Playwright element handle, scrolled into view
    by the caller so that the figures are laid out), each problem a sentence naming the figure: taller than
    ``window_height`` px; two annotations sharing more than 4 px²; a title or annotation outside the figure's box
    (cut off); a legend entry named twice. ``where`` prefixes each sentence (e.g. "cell 24")."""
    problems = []
    for n, fig in enumerate(element.evaluate(_FIGURES_JS), 1):
        name = f"{where} figure {n}" + (f" ({fig['title']['text']!r})" if fig["title"] and fig["title"]["text"] else "")
        height = fig["box"][3] - fig["box"][1]
        if height > window_height:
            problems.append(f"{name} is {height:.0f} px tall, more than the {window_height} px window")
        labels = ([fig["title"]] if fig["title"] and fig["title"]["text"] else []) + fig["annotations"]
        for label in labels:
            if _outside(label["box"], fig["box"]):
                problems.append(f"{name}: {label['text']!r} is cut at the figure's edge")
        notes = fig["annotations"]
        for i, a in enumerate(notes):
            for b in notes[i + 1:]:
                if _overlap(a["box"], b["box"]) > 4:
                    problems.append(f"{name}: {a['text']!r} and {b['text']!r} are drawn on top of each other")
        doubled = sorted({t for t in fig["legend"] if fig["legend"].count(t) > 1})
        if doubled:
            problems.append(f"{name}: the legend names {doubled} more than once")
    return problems


#: A figure object printed as text (its repr) instead of drawn: ``Figure({`` or ``FigureWidget({``.
TEXT_DUMP = re.compile(r"\b(Figure|FigureWidget)\(\{")


def text_dumps(element, where: str = "") -> list[str]:
    """A sentence for each output inside ``element`` (a Playwright element handle) that prints a figure object as text
    (:data:`TEXT_DUMP`) instead of drawing it."""
    texts = element.evaluate("root => [...root.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText)")
    return [f"{where} prints a figure object as text: {t[:80]!r}…" for t in texts if TEXT_DUMP.search(t)]


#: Reads each table inside ``root`` (a DataFrame's HTML, a Markdown table): its header's texts, its right edge, the
#: right edge of what shows it (its nearest ancestor that scrolls or clips sideways, as JupyterLab's output area and
#: the book's cell output do; else the window) and the texts of the header cells past that edge, in page px.
_TABLES_JS = """root => [...root.querySelectorAll('table')].map(table => {
  let box = table.parentElement;
  const shows = e => ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(e).overflowX);
  while (box && !shows(box)) box = box.parentElement;
  const edge = box ? box.getBoundingClientRect().left + box.clientLeft + box.clientWidth
                   : document.documentElement.clientWidth;
  const heads = [...table.querySelectorAll('thead th')].filter(th => th.textContent.trim());
  return {right: table.getBoundingClientRect().right, width: table.getBoundingClientRect().width, edge: edge,
          room: box ? box.clientWidth : edge,
          hidden: heads.filter(th => th.getBoundingClientRect().right > edge + 1).map(th => th.textContent.trim())};
})"""


def wide_tables(element, where: str = "") -> list[str]:
    """A sentence for each table inside ``element`` (a Playwright element handle) that ends more than 1 px right of
    the box showing it (its nearest ancestor that scrolls or clips sideways, e.g. JupyterLab's output area; else the
    window), naming the header cells past that edge: a reader sees those columns only by scrolling sideways.
    ``where`` prefixes each sentence (e.g. "cell 22")."""
    return [f"{where} a table {t['width']:.0f} px wide in a {t['room']:.0f} px column hides its columns "
            f"{t['hidden']} past the column's right edge" for t in element.evaluate(_TABLES_JS)
            if t["right"] > t["edge"] + 1]
