"""Each of :data:`PAGES`' notebooks as a learner sees it after running it: one more test item after the notebook's last
cell (``notebooks/NN_name.ipynb::page at 1280x800``), in the same worker, once nbval has run every cell.

The item puts the notebook, with the outputs nbval's run just gave (so nothing is executed a second time), into the
lab's JupyterLab the way a learner's save does (the server's contents API, as ``make lab`` serves it), opens it in
Chromium at 1280x800 (:mod:`labkit_dev.browser`), saves it, and fails on what a learner could not read:

* a figure printed as a text dump of its object;
* a figure taller than the window; two annotations on top of each other; a title or label cut off; a legend entry
  named twice (each read from the page: :func:`labkit_dev.browser.figure_problems`);
* a table wider than its output area, its right-hand columns hidden until one scrolls sideways
  (:func:`labkit_dev.browser.wide_tables`);
* a console error not on :data:`ALLOWED_CONSOLE_ERRORS`;
* a file of the repository's ``notebooks/`` changed by opening, running or saving the notebook.

Screenshots of every figure go to ``$LABKIT_HOME/pages/<notebook>/`` for a person to look at.
"""

from __future__ import annotations

import copy
import hashlib
import json
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from labkit_dev import browser

REPO = Path(__file__).resolve().parents[1]
PLOTLY = "application/vnd.plotly.v1+json"
#: The notebooks whose page is checked (the ones with the most figures, the widest tables and the playgrounds).
PAGES = ("02_zombie_fencing", "04_spark_pipeline", "05_unassigned_partition", "06_share_groups",
         "07_share_transactions", "09_replication")
#: JupyterLab draws every cell, not only those near the view (its ``windowingMode``, a speed setting that changes no
#: layout), so that the check reads every figure in one pass.
SETTINGS = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}
#: Console errors that say nothing about the lab, each with why.
ALLOWED_CONSOLE_ERRORS = {
    # JupyterLab asks for translations and a favicon it does not ship with the pinned version
    "missing translation bundle": r"Failed to load resource: the server responded with a status of 404",
}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """After the last cell of each notebook of :data:`PAGES`, its page item (skipped, with the reason, on a machine
    without Chromium)."""
    for stem in PAGES:
        cells = [i for i, item in enumerate(items) if item.nodeid.split("::")[0] == f"notebooks/{stem}.ipynb"]
        if cells:
            last = items[cells[-1]]
            items.insert(cells[-1] + 1, NotebookPage.from_parent(last.parent, name=f"page at {browser.LAPTOP['width']}"
                                                                                   f"x{browser.LAPTOP['height']}"))


class NotebookPage(pytest.Item):
    """The page of the notebook this item's parent (nbval's notebook collector) ran."""

    def executed(self) -> dict:
        """The notebook as its nbval run left it: each code cell with the outputs it gave."""
        nb = copy.deepcopy(self.parent.nb)
        ran = {item.cell_num: item for item in self.session.items
               if item.parent is self.parent and hasattr(item, "cell_num")}
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        for n, cell in enumerate(code):
            outputs = getattr(ran.get(n), "test_outputs", None) or []
            cell.outputs = [o for o in outputs if o.get("output_type") in ("stream", "display_data", "execute_result", "error")]
            cell.execution_count = n + 1 if n in ran else None
            for o in cell.outputs:
                if o.output_type == "execute_result":
                    o.execution_count = cell.execution_count
        return nb

    def runtest(self) -> None:
        if browser.missing():
            pytest.skip(f"the page check opens the notebook in Chromium: it {browser.missing()}")
        name = Path(self.parent.path).name
        home = Path(self.config._tmp_path_factory.mktemp("page"))  # noqa: SLF001 (pytest's own tmp_path_factory)
        shots = home / "pages" / Path(name).stem
        shots.mkdir(parents=True)
        tracked = _hashes(REPO / "notebooks")
        nb = self.executed()
        nbformat.write(nbformat.from_dict(nb), shots / name)  # what was opened, beside its screenshots
        with browser.lab_server(home, settings=SETTINGS) as url:
            problems = page_problems(url, name, nb, shots)
        changed = sorted(p for p, h in _hashes(REPO / "notebooks").items() if tracked.get(p) != h)
        if changed:
            problems.append(f"{name}: opening, running and saving it changed the repository's {changed}")
        assert not problems, "\n".join(problems) + f"\n(screenshots in {shots})"

    def reportinfo(self):
        return self.parent.path, None, self.name


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.ipynb"))}


def _save(base: str, token: str, name: str, nb: dict) -> None:
    """Save ``nb`` as ``name`` through the Jupyter server's contents API, as JupyterLab saves a learner's notebook (the
    server's pre-save hook included)."""
    body = json.dumps({"type": "notebook", "format": "json", "content": nbformat.from_dict(nb)}).encode()
    request = urllib.request.Request(f"{base}/api/contents/{urllib.parse.quote(name)}?token={token}", data=body,
                                     method="PUT", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status in (200, 201), answer.read()[:500]


def page_problems(url: str, name: str, nb: dict, shots: Path) -> list[str]:
    """Save ``nb`` as ``name`` in the JupyterLab at ``url`` (``labkit up``'s, token included), open it in Chromium at
    1280x800, walk its cells top to bottom as a reader does, save it,
    and return what a learner could not read (the module's list). A screenshot of each figure's cell, and of the page
    as it was left, go to ``shots``."""
    from playwright.sync_api import expect

    parts = urllib.parse.urlsplit(url)
    base, token = f"{parts.scheme}://{parts.netloc}", urllib.parse.parse_qs(parts.query)["token"][0]
    _save(base, token, name, nb)
    figures = sum(PLOTLY in o.get("data", {}) for cell in nb.cells for o in cell.get("outputs", []))
    problems, drawn = [], 0
    with browser.chromium() as page:
        errors = browser.ConsoleErrors(page, ALLOWED_CONSOLE_ERRORS)
        page.add_locator_handler(page.locator(".jp-Dialog", has_text="Select Kernel"),
                                 lambda dialog: dialog.get_by_role("button", name="Select", exact=True).click())
        try:
            page.goto(f"{base}/lab/tree/{urllib.parse.quote(name)}?token={token}")
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
            cells = page.locator(".jp-Notebook .jp-Cell")
            expect(cells).to_have_count(len(nb.cells), timeout=90_000)
            for i in range(len(nb.cells)):
                cell = cells.nth(i)
                cell.scroll_into_view_if_needed()
                where, handle = f"{name} cell {i}", cell.element_handle()
                plots = cell.locator(".js-plotly-plot")
                if plots.count():
                    drawn += plots.count()
                    cell.locator(".js-plotly-plot .main-svg").first.wait_for()
                    problems += browser.figure_problems(handle, where=where)
                    cell.screenshot(path=str(shots / f"cell-{i:02d}.png"))
                problems += browser.text_dumps(handle, where=where) + browser.wide_tables(handle, where=where)
            page.keyboard.press("Control+s")
            expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=browser.PAGE_TIMEOUT_MS)  # saved
        finally:
            page.screenshot(path=str(shots / "page.png"))
    if drawn != figures:
        problems.append(f"{name}: the page drew {drawn} of the notebook's {figures} figures")
    return problems + [f"{name}: console error: {e}" for e in errors.seen]
