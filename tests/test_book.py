"""The book (issue 40, ``labkit/book/``): notebook 00 and a small notebook with two live widgets (a control panel and a
live timeline of a real producer), run against the session broker (reached through ``LABKIT_BOOTSTRAP``, as another
cluster would be), built into a static site without a Sphinx warning, and opened in headless Chromium with the network
cut (every request that is not to the local server is aborted and recorded): the figure is a live plotly figure (its
SVG drawn, a hover label on a point), the provenance line names what the cluster reported, the glossary link
resolves, each live widget is followed by what it showed at the end of the run (the panel's final table, the timeline
drawn from the run's whole history), the console shows no error, the page names no path of this machine and holds no
error output. The builder's venv (``.venv-book``) is made on first use (about 60 s wall, 20 s CPU from PyPI).

Without a browser or a broker: a failed cell (a hand-made recorded run, ``--no-run``) stops the build, named, or with
``--allow-failures`` is published marked as failed; the real notebooks' claims cells collapsed and their test-only
cells' code left out; a notebook run by the book prints no kernel warning."""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from labkit.book import __main__ as book
from labkit.book import clean, execute, site
from labkit_dev import browser

#: The tests of the site built from live runs and opened in Chromium.
needs_browser = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "")

#: Where screenshots go when LABKIT_BOOK_SHOTS names a folder (for a person to look at; none by default).
SHOTS_ENV = "LABKIT_BOOK_SHOTS"


#: The small notebook's live timeline title, and the records its producer writes.
LIVE_TITLE, RECORDS = "book test: a producer, live", 5


def live_notebook(path: Path, history: str) -> None:
    """Write a notebook with a control panel and a live timeline (displayed in its first cell, both empty then) of a
    producer that the second cell runs to its end: the live widgets of notebooks 02, 04 and 06 in small. The history
    goes to ``history``, a folder relative to the notebook's (no path of this machine on the page)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Live widgets, recorded")] + [nbformat.v4.new_code_cell(c) for c in (
        f"import labkit\nexp = labkit.Experiment('book-live', labkit.connect(), folder={history!r})\n"
        f"writer = exp.participant('writer', 'producer', topic=exp.topic('live'), iterations={RECORDS}, "
        "interval_ms=100)\npanel = labkit.ControlPanel([writer])\n"
        f"live = labkit.LiveTimeline(exp.history, interval_s=0.5, title={LIVE_TITLE!r})\n"
        "display(panel.widget)\nlive.start()",
        "writer.start()\nassert labkit.wait_until(lambda: writer.status == 'finished', 60), writer.status\n"
        "live.stop()\npanel.refresh()\npanel.close()")]
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def built(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The book folder (``html/`` the site) of notebook 00 and :func:`live_notebook`, built from fresh runs against the
    session broker; ``main`` exits 0: no cell raised, no Sphinx warning."""
    home = tmp_path_factory.mktemp("book")
    live_notebook(home / "live_widgets.ipynb", "history")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABKIT_BOOTSTRAP", bootstrap)
        assert book.main(["00", str(home / "live_widgets.ipynb"), "--home", str(home)]) == 0, \
            (home / "sphinx-warnings.txt").read_text()
    assert "WARNING" not in (home / "sphinx-warnings.txt").read_text()
    return home


@pytest.fixture(scope="module")
def served(built: Path):
    """The site served on 127.0.0.1 (a random port) by http.server, as the README says to serve it."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # no line per request on stderr
            pass

    handler = functools.partial(Quiet, directory=str(built / "html"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@needs_browser
def test_pages_hold_no_local_path_and_no_error(built: Path) -> None:
    """No page names the building machine's paths, shows a traceback, or a progress bar."""
    for page in (built / "html").rglob("*.html"):
        text = page.read_text()
        for path in (str(site.REPO), str(Path.home()) + "/", "/tmp/"):
            assert path not in text, f"{page.name} names {path}"
        for noise in ("Traceback (most recent call last)", 'class="output traceback', 'class="output stderr', "it/s]"):
            assert noise not in text, f"{page.name} shows {noise!r}"
    assert (built / "html/notebooks/glossary.html").exists() and (built / "html/docs/instructor.html").exists()


@needs_browser
def test_live_widgets_recorded(built: Path) -> None:
    """Each live widget of the small notebook is followed on its page by what it showed at the end of the run, then
    the note: the panel as a table (the producer finished, its counters), the live timeline as a static plotly figure
    whose data is the timeline of the run's whole history (its JSON-lines file, read here), not the empty first frame
    the saved widget holds."""
    import plotly.io as pio

    from labkit.crashlab.timeline import timeline_figure
    from labkit.core.history import History

    cell = next(c for c in json.loads((built / "pages/live_widgets.ipynb").read_text())["cells"]
                if "LiveTimeline" in "".join(c["source"]))
    shown = [o["data"].get("text/html") or o["data"].get("text/markdown") for o in cell["outputs"]
             if o["output_type"] == "display_data"]
    assert clean.WIDGET not in json.dumps(cell["outputs"])
    table, note1, figure, note2 = shown[-4:]
    assert table.startswith('<table class="labkit-recording">') and "finished" in table and f"sent {RECORDS}" in table
    assert note1 == note2 == clean.RECORDING_NOTE and 'id="labkit-figure-1"' in figure

    recorded = json.loads((built / "executed/live_widgets.ipynb").read_text())["metadata"]["labkit_book"]["recordings"]
    (figure_json,) = [p["figure"] for parts in recorded.values() for p in parts if "figure" in p]
    (history,) = (built / "history").glob("book-live-*.jsonl")
    expected = json.loads(pio.to_json(timeline_figure(History(history).events(), title=LIVE_TITLE)))
    assert figure_json["data"], "the recorded figure is the empty first frame"
    assert figure_json["data"] == expected["data"]
    rows = figure_json["layout"]["yaxis"]["categoryarray"]
    assert len(rows) == RECORDS and rows == expected["layout"]["yaxis"]["categoryarray"], rows


@needs_browser
def test_provenance_names_what_the_cluster_reports(built: Path, bootstrap: str) -> None:
    """With LABKIT_BOOTSTRAP (the session broker, as another cluster would be), the provenance names the
    metadata.version the broker answered in ApiVersions, of the session broker's release line, and not the embedded
    release's number."""
    from labkit.book import provenance
    from labkit.broker.settings import kafka_version
    from labkit.kafka.api_versions import broker_features

    versions = json.loads((built / "executed/00_tour.versions.json").read_text())
    line = "".join(json.loads((built / "pages/00_tour.ipynb").read_text())["cells"][1]["source"])
    release = ".".join(kafka_version().split(".")[:2])
    assert versions["metadata_version"].startswith(f"{release}-IV") and not versions["embedded"], versions
    level = broker_features(bootstrap)[provenance.METADATA_VERSION]["finalized"]
    assert provenance.level_names((level,), kafka_version())[level] == versions["metadata_version"]
    assert f"a Kafka {release} cluster (its broker reports metadata.version {versions['metadata_version']}" in line
    assert f"Apache Kafka {kafka_version()}" not in line


@needs_browser
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
        assert "metadata.version" in page.locator(".admonition", has_text="A recorded run").first.inner_text()
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
        # The live widgets' page: the recorded timeline drawn by the page's plotly.js, the panel's table, the note.
        page.goto(f"{served}/notebooks/live_widgets.html", wait_until="load")
        page.locator("#labkit-figure-1 .main-svg").first.wait_for(timeout=15_000)
        rows = page.locator("#labkit-figure-1 .yaxislayer-above .ytick text").evaluate_all(
            "texts => texts.map(t => t.textContent)")
        assert f"writer-{RECORDS} by writer @{RECORDS - 1}" in rows, rows  # the run's last record, drawn
        assert "finished" in page.locator("table.labkit-recording").inner_text()
        assert page.get_by_text("A recording: above is what this live widget").count() == 2
    assert not blocked, f"the page asked the network for {blocked}"
    assert not errors.seen, errors.seen


def test_clean_page_of_a_made_up_run() -> None:
    """The cleaning on a made-up run: stderr and progress bars dropped; a plotly figure drawn from the page's
    plotly.js; a panel without a recording noted as a live widget; an unanswered exercise's "Your answer first" replaced by a
    line saying the exercise is the reader's; the collapsed (claims) cell's input hidden; a test-only cell's code left
    out, its output kept under the note, while a cell that also defines something for the learner stays shown; the
    repository's path scrubbed; the provenance note right under the title, the title cell's other text after it."""
    from labkit.learn.exercise import unanswered

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
        {"cell_type": "markdown", "metadata": {}, "source": "# 99 · Title\n\nWhat it is about."},
        code("x", [{"output_type": "stream", "name": "stdout", "text": f"wrote {site.REPO}/notebooks/x\n"},
                   {"output_type": "stream", "name": "stderr", "text": "50%|#####     | 5/10 [00:01<00:01, 4.2it/s]"},
                   widget("bar"), {"output_type": "display_data", "metadata": {}, "data": {clean.PLOTLY: fig}}]),
        code("panel", [widget("panel")]),
        code("check(answer)", [{"output_type": "execute_result", "metadata": {}, "execution_count": 1,
                                "data": {"text/markdown": unanswered(..., "a dict")._repr_markdown_(),
                                         "text/plain": repr(unanswered(..., "a dict"))}}]),
        {"cell_type": "markdown", "metadata": {}, "source": "## 6. Check the lesson against the broker"},
        {**code("assert True", [{"output_type": "stream", "name": "stdout", "text": "All claims hold.\n"}]),
         "metadata": {"jupyter": {"source_hidden": True}}},
        code("# CI only\nif labkit.under_test():\n    panel.press('p', 'crash')\nelif x:\n    pass\n"
             "if labkit.under_test() or done:\n    print('crashed')",
             [{"output_type": "stream", "name": "stdout", "text": "crashed\n"}]),
        code("def stop():\n    panel.close()\nif labkit.under_test():\n    stop()", []),
    ]}
    cells = clean.page(nb, "PROV")["cells"]
    assert cells[0]["source"] == "# 99 · Title" and "PROV" in cells[1]["source"]
    assert cells[2]["source"] == "What it is about."
    cells = cells[:2] + cells[3:]  # the title's cell split in two around the note: the rest as made
    first = cells[2]["outputs"]
    assert [o["output_type"] for o in first] == ["stream", "display_data"], first
    assert first[0]["text"] == "wrote labkit/notebooks/x\n"
    assert 'id="labkit-figure-1"' in first[1]["data"]["text/html"] and "<script src" not in first[1]["data"]["text/html"]
    panel = cells[3]["outputs"]
    assert [o["data"] for o in panel] == [{"text/markdown": clean.UNRECORDED_NOTE}]
    assert [o["data"] for o in cells[4]["outputs"]] == [{"text/markdown": clean.EXERCISE_NOTE}]
    assert "hide-input" in cells[6]["metadata"]["tags"] and "hide-input" not in cells[3]["metadata"].get("tags", [])
    assert cells[7]["metadata"]["tags"] == ["remove-input"]
    assert [o.get("data", {}).get("text/markdown") or o.get("text") for o in cells[7]["outputs"]] == \
        [clean.TEST_ONLY_NOTE, "crashed\n"]
    assert not cells[8]["metadata"].get("tags") and not cells[8]["outputs"]
    assert "widgets" not in nb["metadata"]


def test_landing_links_stay_in_the_book() -> None:
    """The landing page (the README's overview) links only what the book holds: a path of a page becomes a link, a
    link to a file the book lacks or to a section after the overview becomes its text; web links and the page's own
    sections stay links."""
    readme = ("A [section cut off](#use-your-own-cluster), [`docs/x.md`](docs/x.md), [others](docs/y.md), "
              "[the glossary](notebooks/glossary.md), `notebooks/00_tour.ipynb`, [web](https://kafka.apache.org).\n"
              "## Kept here\nSee [it](#kept-here).\n")
    text = site._linked(readme, {"notebooks/glossary.md", "notebooks/00_tour.ipynb"})
    assert text == ("A section cut off (a section of the repository's README.md), `docs/x.md` (in the repository), "
                    "others (`docs/y.md`, in the repository), [the glossary](notebooks/glossary.md), "
                    "[`notebooks/00_tour.ipynb`](notebooks/00_tour.ipynb), [web](https://kafka.apache.org).\n"
                    "## Kept here\nSee [it](#kept-here).\n"), text


#: The hand-made recorded run's claims cell: its index, id and error.
FAILED_CELL, FAILED_ID, FAILED_ERROR = 2, "claims-cell", ("AssertionError", "claim 2: 3 records, expected 4")


def failed_run(home: Path) -> Path:
    """Write a notebook and, as the book records runs, its run (``executed/``, with its versions) whose claims cell
    (cell :data:`FAILED_CELL`, collapsed as every notebook's is) raised :data:`FAILED_ERROR`, with a traceback naming
    the repository's path (ANSI colours, as IPython writes it). Returns the notebook's path."""
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}})
    nb.cells = [nbformat.v4.new_markdown_cell("# A failed run", id="title"),
                nbformat.v4.new_code_cell("records = 3\nprint(records)", id="work", outputs=[
                    nbformat.v4.new_output("stream", name="stdout", text="3\n")]),
                nbformat.v4.new_code_cell("assert records == 4, 'claim 2: ...'\nprint('All claims hold.')",
                                          id=FAILED_ID, metadata={"jupyter": {"source_hidden": True}})]
    source = home / "failed_run.ipynb"
    nbformat.write(nb, source)
    nb.cells[FAILED_CELL].outputs = [nbformat.v4.new_output(
        "error", ename=FAILED_ERROR[0], evalue=FAILED_ERROR[1],
        traceback=["\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
                   f"\x1b[0;31m{FAILED_ERROR[0]}\x1b[0m  Traceback (most recent call last)",
                   f"File \x1b[0;32m{site.REPO}/notebooks/failed_run.ipynb:1\x1b[0m",
                   f"\x1b[0;31m{FAILED_ERROR[0]}\x1b[0m: {FAILED_ERROR[1]}"])]
    (home / "executed").mkdir()
    nbformat.write(nb, home / "executed" / source.name)
    (home / "executed" / "failed_run.versions.json").write_text(json.dumps({
        "metadata_version": "4.4-IV2", "metadata_version_max": "4.4-IV2", "embedded": "yes", "kafka_clients": "4.4.0",
        "confluent_kafka": "2.14.0", "librdkafka": "2.14.0", "spark": "4.2.0", "date": "2026-01-01"}))
    return source


def test_a_failed_cell_stops_the_book_naming_notebook_cell_and_error(tmp_path: Path, capsys) -> None:
    """A recorded run whose claims cell raised: the build exits 1 before any page or site is made (the builder is
    never called: here a program that would fail), printing the notebook, the cell's index and id, and its error."""
    source = failed_run(tmp_path)
    assert book.main([str(source), "--home", str(tmp_path), "--no-run", "--builder", "/bin/false"]) == 1
    printed = capsys.readouterr().out
    assert (f"failed_run.ipynb: cell {FAILED_CELL} (id {FAILED_ID}) raised {FAILED_ERROR[0]}: {FAILED_ERROR[1]}"
            in printed), printed
    assert "book not built" in printed and "--allow-failures" in printed, printed
    assert not (tmp_path / "pages").exists() and not (tmp_path / "html").exists()


def test_allow_failures_publishes_the_failed_cell_marked_as_failed(tmp_path: Path, capsys) -> None:
    """The same run with ``--allow-failures``: the site is built (no Sphinx warning), the exit status is still 1, and
    the page shows the failed claims cell as failed: framed (``tag_labkit-failed``), its code not collapsed, the note
    naming the error, the traceback itself (ANSI codes stripped, the repository's path scrubbed); the cell before it as
    it ran. Sphinx runs in the builder's venv (``.venv-book``, made if missing)."""
    source = failed_run(tmp_path)
    assert book.main([str(source), "--home", str(tmp_path), "--no-run", "--allow-failures"]) == 1
    assert "1 failed cell(s) shown on their pages as failed" in capsys.readouterr().out
    assert "WARNING" not in (tmp_path / "sphinx-warnings.txt").read_text()
    html = (tmp_path / "html/notebooks/failed_run.html").read_text()
    worked, failed = BeautifulSoup(html, "html.parser").select("article div.cell")
    assert worked.select_one(".cell_input").get_text().strip() == "records = 3\nprint(records)"
    assert worked.select_one(".cell_output").get_text().strip() == "3"
    assert failed["class"] == ["cell", "tag_labkit-failed", "docutils", "container"], failed["class"]
    assert failed.select_one(".cell_input").get_text().strip().startswith("assert records == 4")  # not collapsed
    note, traceback = failed.select_one(".cell_output").find_all(recursive=False)
    error = f"{FAILED_ERROR[0]}: {FAILED_ERROR[1]}"
    assert note.get_text().startswith(f"✗ This cell failed in the book’s run ({error})"), note.get_text()
    assert "traceback" in traceback["class"] and "\x1b" not in traceback.get_text()
    assert traceback.get_text().strip().splitlines()[1:] == [f"{FAILED_ERROR[0]}  Traceback (most recent call last)",
                                                             "File labkit/notebooks/failed_run.ipynb:1", error]
    assert str(site.REPO) not in html


def test_claims_collapsed_and_test_only_code_left_out_in_every_notebook() -> None:
    """Each real notebook's page (its JSON, not run): every cell the notebook collapses (``jupyter.source_hidden``:
    its claims and assertion cells, notebook 04's six among them) is collapsed on the page (``hide-input``); every
    test-only cell (the notebooks start one with "# CI only") has its code left out (``remove-input``): every notebook has
    one, its test run locking in a prediction (and 02, 04 and 06 pressing their playground's buttons); no other cell is
    hidden."""
    test_only: dict[str, int] = {}
    notebooks = sorted((site.REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in notebooks:
        nb = json.loads(path.read_text())
        hidden = [bool(c["metadata"].get("jupyter", {}).get("source_hidden")) for c in nb["cells"]]
        ci_only = ["".join(c["source"]).startswith("# CI only") for c in nb["cells"]]
        page = clean.page(nb, "PROV")["cells"][-len(hidden):]  # the provenance note and the title's split before
        for cell, collapsed, ci in zip(page, hidden, ci_only):
            tags = set(cell["metadata"].get("tags", [])) & {"hide-input", "remove-input", "remove-cell"}
            assert tags == ({"hide-input"} if collapsed else {"remove-input"} if ci else set()), \
                (path.name, cell.get("id"), tags)
        test_only[path.name[:2]] = sum(ci_only)
        if path.name.startswith("04"):
            assert sum(hidden) >= 6, "notebook 04's assertion cells"
    assert len(test_only) == len(notebooks) >= 10 and all(test_only.values()), test_only


def test_a_book_run_prints_no_kernel_warning(tmp_path: Path, capfd) -> None:
    """A notebook run as the book runs it (:func:`labkit.book.execute._run_one`: its kernel, then the recording cell)
    prints nothing on the terminal: no ipykernel warning (over TCP, "Kernel is running over TCP without encryption
    ... eavesdropping" at every kernel start), and its output is the run's."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('ran in the kernel')")]
    nbformat.write(nb, tmp_path / "quiet.ipynb")
    capfd.readouterr()
    _, errors = execute._run_one(str(tmp_path / "quiet.ipynb"), str(tmp_path / "executed/quiet.ipynb"), "digest", {})
    out, err = capfd.readouterr()
    assert errors == 0 and not err.strip() and not out.strip(), (out, err)
    ran = nbformat.read(tmp_path / "executed/quiet.ipynb", as_version=4)
    assert ran.cells[0].outputs[0].text == "ran in the kernel\n"
