"""End to end in a real browser: JupyterLab in headless Chromium (Debian's package, driven by
Playwright) at a laptop's 1280x800, notebook 02's control panel: Pause, Resume and Crash a real participant process,
its buttons' labels whole.

The lab's JupyterLab runs as on a machine that never ran Jupyter (empty config, data, settings and workspace
folders: no saved layout, no user setting) and the page is in a new browser context (no cookie, storage or cache
from before); the test runs notebook 02 from its top, one code cell at a time (selected by a click on its prompt,
then Shift+Enter), each to its end, down to the cell tagged ``control-panel``."""

import re
import urllib.parse
from pathlib import Path

import nbformat
import pytest

from labkit_dev import browser
from labkit_dev import drive

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "02_zombie_fencing.ipynb"
PANEL_TAG = "control-panel"

pytestmark = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "")


@pytest.fixture
def jupyter(tmp_path, bootstrap):
    with browser.lab_server(tmp_path, bootstrap) as url:
        yield url


def panel_cell(cells: list) -> int:
    """Index of the cell of ``cells`` (notebook 02's) tagged :data:`PANEL_TAG`: the playground and its control panel."""
    tagged = [i for i, cell in enumerate(cells) if PANEL_TAG in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{NOTEBOOK.name} must have one cell tagged {PANEL_TAG!r}, not {len(tagged)}"
    return tagged[0]


def test_control_panel_buttons_change_the_participant_status(jupyter, tmp_path):
    from playwright.sync_api import expect

    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    panel_at = panel_cell(cells)
    url = jupyter.replace("00_tour.ipynb", NOTEBOOK.name)
    with browser.chromium() as page:
        try:
            page.goto(url)
            # JupyterLab sometimes asks for the kernel even when it has started it: take the one it proposes
            page.add_locator_handler(page.locator(".jp-Dialog", has_text="Select Kernel"),
                                     lambda dialog: dialog.get_by_role("button", name="Select", exact=True).click())
            idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
            parts = urllib.parse.urlsplit(url)
            drive.wait_for_kernel(page, f"{parts.scheme}://{parts.netloc}/", NOTEBOOK.name, 90)  # started and connected
            shown = page.locator(".jp-Notebook .jp-Cell")
            expect(shown.nth(panel_at)).to_contain_text("ControlPanel(", timeout=browser.PAGE_TIMEOUT_MS)
            for i, cell in enumerate(cells[:panel_at + 1]):  # each code cell selected, run to its end, then the next
                if cell.cell_type != "code":
                    continue
                prompt = shown.nth(i).locator(".jp-InputArea-prompt")
                prompt.click()  # selects the cell (command mode): the key below cannot land on another one
                expect(shown.nth(i)).to_have_class(re.compile(r"\bjp-mod-active\b"))
                page.keyboard.press("Shift+Enter")  # once: the kernel is connected, nothing drops the run
                expect(prompt).to_have_text(re.compile(r"\[\d+\]"), timeout=90_000)
                expect(idle).to_be_visible(timeout=90_000)
            status = shown.nth(panel_at).locator(".widget-html-content code").first
            expect(status).to_have_text("running", timeout=90_000)
            for button, expected in (("Pause", "paused"), ("Resume", "running"), ("Crash", "crashed")):
                shown.nth(panel_at).get_by_role("button", name=button, exact=True).click()
                expect(status).to_have_text(expected, timeout=20_000)
            # after a crash Resume and Restart must still be told apart: no label cut to "Res…" (file browser open)
            buttons = shown.nth(panel_at).locator("button")
            cut = [b.inner_text() for b in buttons.all() if b.evaluate("b => b.scrollWidth > b.clientWidth + 1")]
            assert buttons.count() >= 4 and not cut, f"button labels cut at 1280 px: {cut}"
        finally:
            page.screenshot(path=str(tmp_path / "panel.png"))  # what the page showed, also when a step failed
