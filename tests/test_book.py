"""The book (issue 40, ``labkit/book/``): notebook 00 alone run against the session broker, built into a static site,
and opened in headless Chromium with the network cut (every request that is not to the local server is aborted and
recorded): the figure is a live plotly figure (its SVG drawn, a hover label on a point), the provenance line is there,
the glossary link resolves, the console shows no error, the page names no path of this machine and holds no error
output. The builder's venv (``.venv-book``) is made on first use (about 60 s wall, 20 s CPU from PyPI)."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

from labkit import browser
from labkit.book import __main__ as book
from labkit.book import site

pytestmark = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "")

#: Where screenshots go when LABKIT_BOOK_SHOTS names a folder (for a person to look at; none by default).
SHOTS_ENV = "LABKIT_BOOK_SHOTS"


@pytest.fixture(scope="module")
def built(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of notebook 00, built from a fresh run against the session broker."""
    home = tmp_path_factory.mktemp("book")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABKIT_BOOTSTRAP", bootstrap)
        assert book.main(["00", "--home", str(home)]) == 0
    return home / "html"


@pytest.fixture(scope="module")
def served(built: Path):
    """The site served on 127.0.0.1 (a random port) by http.server, as the README says to serve it."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # no line per request on stderr
            pass

    handler = functools.partial(Quiet, directory=str(built))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_pages_hold_no_local_path_and_no_error(built: Path) -> None:
    """No page names the building machine's paths, shows a traceback, or a progress bar."""
    for page in built.rglob("*.html"):
        text = page.read_text()
        for path in (str(site.REPO), str(Path.home()) + "/", "/tmp/"):
            assert path not in text, f"{page.name} names {path}"
        for noise in ("Traceback (most recent call last)", 'class="output traceback', 'class="output stderr', "it/s]"):
            assert noise not in text, f"{page.name} shows {noise!r}"
    assert (built / "notebooks" / "glossary.html").exists() and (built / "docs" / "instructor.html").exists()


def test_page_offline_in_chromium(served: str) -> None:
    """Notebook 00's page in Chromium with every non-local request aborted: a live plotly figure (SVG, hover label),
    the provenance note, the claims' verdict, a glossary link that opens the glossary; no request blocked, no console
    error. Screenshots into ``$LABKIT_BOOK_SHOTS`` when set."""
    blocked: list[str] = []
    with browser.chromium() as page:
        def route(r):
            if r.request.url.startswith(served):
                return r.continue_()
            blocked.append(r.request.url)
            return r.abort()
        page.route("**/*", route)
        errors = browser.ConsoleErrors(page, {})
        page.goto(f"{served}/notebooks/00_tour.html", wait_until="load")
        figure = page.locator("#labkit-figure-1")
        figure.locator(".main-svg").first.wait_for(timeout=15_000)
        # Hover the first drawn point: plotly draws its hover label (live, not a picture).
        point = figure.locator(".scatterlayer .trace .points path").first
        box = point.bounding_box()
        assert box, "the figure's points are not drawn"
        figure.scroll_into_view_if_needed()
        box = point.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.locator(".hoverlayer .hovertext").first.wait_for(timeout=5_000)
        assert "Apache Kafka" in page.locator(".admonition", has_text="A recorded run").first.inner_text()
        assert "All claims hold" in page.content()
        if (shots := os.environ.get(SHOTS_ENV)):
            page.screenshot(path=f"{shots}/00_tour_hover.png")
            page.goto(f"{served}/notebooks/00_tour.html", wait_until="load")
            page.screenshot(path=f"{shots}/00_tour_full.png", full_page=True)
        link = page.locator("article a[href*='glossary']").first
        href = link.get_attribute("href")
        link.click()
        page.wait_for_load_state("load")
        assert page.url.split("#")[0].endswith("/notebooks/glossary.html"), (href, page.url)
        assert "Glossary" in page.title() or "glossary" in page.title().lower()
        assert page.locator("article h1").count() >= 1
    assert not blocked, f"the page asked the network for {blocked}"
    assert not errors.seen, errors.seen


def test_clean_page_of_a_made_up_run() -> None:
    """The cleaning on a made-up run: errors, stderr and progress bars dropped; a plotly figure drawn from the page's
    plotly.js; a panel noted as a recording; the claims cell's input hidden; the repository's path scrubbed; the
    provenance note after the title."""
    from labkit.book import clean

    fig = {"data": [{"type": "scatter", "x": [0, 1], "y": [1, 2]}], "layout": {"title": {"text": "t"}}}
    widget = lambda mid: {"output_type": "display_data", "metadata": {},  # noqa: E731
                          "data": {clean.WIDGET: {"model_id": mid}, "text/plain": "VBox()"}}
    code = lambda source, outputs: {"cell_type": "code", "metadata": {}, "source": source,  # noqa: E731
                                    "outputs": outputs, "execution_count": 1}
    state = {"panel": {"state": {"_model_name": "VBoxModel", "children": ["IPY_MODEL_fig", "IPY_MODEL_button"]}},
             "fig": {"state": {"_model_name": "AnyModel", "_widget_data": fig["data"],
                               "_widget_layout": fig["layout"]}},
             "button": {"state": {"_model_name": "ButtonModel"}},
             "bar": {"state": {"_model_name": "HBoxModel", "children": ["IPY_MODEL_progress"]}},
             "progress": {"state": {"_model_name": "FloatProgressModel"}}}
    nb = {"metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": state}}}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# 99 · Title"},
        code("x", [{"output_type": "stream", "name": "stdout", "text": f"wrote {site.REPO}/notebooks/x\n"},
                   {"output_type": "stream", "name": "stderr", "text": "50%|#####     | 5/10 [00:01<00:01, 4.2it/s]"},
                   {"output_type": "error", "ename": "E", "evalue": "", "traceback": []},
                   widget("bar"), {"output_type": "display_data", "metadata": {}, "data": {clean.PLOTLY: fig}}]),
        code("panel", [widget("panel")]),
        {"cell_type": "markdown", "metadata": {}, "source": "## 6. Check the lesson against the broker"},
        code("assert True", [{"output_type": "stream", "name": "stdout", "text": "All claims hold.\n"}]),
    ]}
    cells = clean.page(nb, "PROV")["cells"]
    assert cells[0]["source"] == "# 99 · Title" and "PROV" in cells[1]["source"]
    first = cells[2]["outputs"]
    assert [o["output_type"] for o in first] == ["stream", "display_data"], first
    assert first[0]["text"] == "wrote labkit/notebooks/x\n"
    assert 'id="labkit-figure-1"' in first[1]["data"]["text/html"] and "<script src" not in first[1]["data"]["text/html"]
    panel = cells[3]["outputs"]
    assert len(panel) == 1 and "make lab" in panel[0]["data"]["text/markdown"]
    assert "hide-input" in cells[5]["metadata"]["tags"] and "hide-input" not in cells[3]["metadata"].get("tags", [])
    assert "widgets" not in nb["metadata"]
