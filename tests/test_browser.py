"""End to end in a real browser: JupyterLab in headless Chromium (Debian's package, driven by
Playwright), notebook 02's control panel: Pause, Resume and Crash a real participant process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[1]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs Debian's chromium: `apt-get install chromium` (make test does, as root)")


@pytest.fixture
def jupyter(tmp_path, bootstrap):
    env = {**os.environ, "LABKIT_HOME": str(tmp_path), "LABKIT_BOOTSTRAP": bootstrap}
    lab = lambda cmd: subprocess.run([sys.executable, "-m", "labkit", cmd], env=env, cwd=REPO,  # noqa: E731
                                     capture_output=True, text=True, timeout=180)
    up = lab("up")
    assert up.returncode == 0, up.stderr
    try:
        yield json.loads((tmp_path / "lab" / "jupyter.json").read_text())["url"]
    finally:
        lab("down")


def test_control_panel_buttons_change_the_participant_status(jupyter, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url = jupyter.replace("00_tour.ipynb", "02_zombie_fencing.ipynb")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        try:
            page.goto(url)
            page.locator(".jp-Notebook .jp-Cell").first.click()
            expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_visible(timeout=60_000)
            for _ in range(4):  # title, imports + connect, prose, the playground and its panel
                page.keyboard.press("Shift+Enter")
            status = page.locator(".widget-html-content code").first
            expect(status).to_have_text("running", timeout=90_000)
            for button, expected in (("Pause", "paused"), ("Resume", "running"), ("Crash", "crashed")):
                page.get_by_role("button", name=button, exact=True).click()
                expect(status).to_have_text(expected, timeout=20_000)
            page.screenshot(path=str(tmp_path / "panel.png"))
        finally:
            browser.close()
