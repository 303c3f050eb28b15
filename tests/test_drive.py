"""Driving JupyterLab as the hub's tests and bench do (:mod:`labkit_dev.drive`), in a real JupyterLab (the lab's, as
``make lab`` starts it, its settings included) in headless Chromium: a Run All that raised anywhere, in its last cell
too (out of view at the end of a long notebook), is a failed run, and a clean one with a stderr stream is not; a Run All pressed before JupyterLab has asked for
the notebook's kernel starts no kernel of its own (the lab's JupyterLab says the kernel is initializing), so each
opened notebook has one kernel."""

import json
import re
import time
import urllib.parse

import nbformat
import pytest

from labkit_dev import browser
from labkit_dev import drive

pytestmark = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "")

NOTEBOOKS = {  # name: its code cells
    "raises_last.ipynb": ["print('part 1')", "assert 1 + 1 == 3, 'the claim did not hold'"],
    # its first cell waits until the kernel holds every request of the Run All: ipykernel 7 aborts only the requests
    # queued when a cell raises, and on a loaded machine the last one can arrive after that and run (it did once)
    "raises_in_the_middle.ipynb": ["import time; time.sleep(3); print('part 1')",
                                   "raise RuntimeError('the broker did not answer')", "print('All claims hold.')"],
    "clean_with_stderr.ipynb": ["import sys; print('a warning, not an error', file=sys.stderr)",
                                "print('All claims hold.')"],
    "opened_once.ipynb": ["print('part 1')", "print('All claims hold.')"],  # the second test's: no kernel before
    # a notebook longer than the window: its last cells are out of view when the run ends
    "raises_far_below.ipynb": [f"print('part {n}')" for n in range(40)] + ["assert 1 + 1 == 3, 'a claim far below'"],
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, bootstrap):
    """The lab's JupyterLab, its settings JupyterLab's defaults and the lab's (as an attendee's), with
    :data:`NOTEBOOKS` in its working folder; yields ``(base URL, token, home)``."""
    home = tmp_path_factory.mktemp("lab")
    with browser.lab_server(home, bootstrap) as url:
        for name, cells in NOTEBOOKS.items():
            nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]),
                           home / "work" / name)
        parts = urllib.parse.urlsplit(url)
        yield f"{parts.scheme}://{parts.netloc}", urllib.parse.parse_qs(parts.query)["token"][0], home


def _open(page, lab, name: str) -> None:
    base, token, _ = lab
    page.goto(f"{base}/lab/tree/{name}?token={token}&reset")  # this notebook alone, no earlier tab restored


def test_a_run_all_that_raised_anywhere_is_failed_and_a_clean_one_with_stderr_is_not(lab):
    said = {}
    with browser.chromium() as page:
        for name in ("raises_last.ipynb", "raises_in_the_middle.ipynb", "clean_with_stderr.ipynb",
                     "raises_far_below.ipynb"):
            _open(page, lab, name)
            drive.wait_for_kernel(page, f"{lab[0]}/", name, 180)
            drive.run_all(page, name)
            said[name] = drive.wait_for_run(page, name, 300)
    assert said["raises_last.ipynb"].startswith("every code cell ran (2), one raised: "), said
    assert "AssertionError: the claim did not hold" in said["raises_last.ipynb"], said
    assert said["raises_in_the_middle.ipynb"].startswith("stopped after 2 of 3 code cells: "), said
    assert "RuntimeError: the broker did not answer" in said["raises_in_the_middle.ipynb"], said
    assert said["clean_with_stderr.ipynb"] is None, said
    # read from cells JupyterLab does not draw while they are out of view (its default windowing)
    assert said["raises_far_below.ipynb"].startswith("every code cell ran (41), one raised: "), said
    assert "AssertionError: a claim far below" in said["raises_far_below.ipynb"], said


def test_a_run_all_before_the_kernel_is_asked_for_starts_no_second_kernel_and_says_it_is_initializing(lab):
    """JupyterLab reads the server's sessions before it asks for a notebook's kernel (once it has read the notebook: a
    notebook's session starts when its content is loaded, and is not waited for to show it); the test holds every such
    read (``GET api/sessions``, in the browser) from the moment the page asks for the notebook's content until
    JupyterLab asks for a kernel, so that a Run All lands in that window, as it did on a loaded hub. (Holding only from
    when the notebook showed missed the window on a fast machine: the read had been answered by then.) Without the lab's
    ``enableKernelInitNotification`` the Run All started a kernel itself and JupyterLab another, shutting the first down
    with the cell it had run (two kernels started, one shut down, one cell run). With it, JupyterLab refuses the run and
    says why, then starts the notebook's one kernel, and a Run All then runs every cell."""
    base, _, home = lab
    name = "opened_once.ipynb"
    log = home / "lab" / "jupyter.log"
    before = log.read_text().count("Kernel started")
    held, posts, content = [], [], []

    def route(request_route) -> None:
        method = request_route.request.method
        if method == "GET" and holding and content and not posts:
            held.append(request_route)
            return
        if method == "POST":
            posts.append(time.monotonic())
        request_route.continue_()

    holding = True
    with browser.chromium() as page:
        page.on("request", lambda request: content.append(request.url) if f"api/contents/{name}" in request.url
                else None)
        page.route("**/api/sessions**", route)
        _open(page, lab, name)
        page.wait_for_selector(".jp-Notebook", timeout=120_000)
        assert _pump_until(page, lambda: held, 60), \
            "JupyterLab read no session list after it read the notebook: the window this test needs never came"
        assert not posts, "JupyterLab asked for the kernel before the test held its read: no window to test"
        drive._menu(page, "Run", "^Run All Cells$")
        page.get_by_text(drive.INITIALIZING).first.wait_for()
        page.wait_for_timeout(3000)  # what a Run All would start, it starts at once: give it time to show
        assert not posts, "the Run All asked for a kernel of its own"
        prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        assert not any(re.search(r"\[(\*|\d+)\]", p) for p in prompts), prompts  # nothing ran, nothing queued
        holding = False
        for request_route in held:
            request_route.continue_()
        drive.wait_for_kernel(page, f"{base}/", name, 180)
        drive.run_all(page, name)
        assert drive.wait_for_run(page, name, 300) is None
        started = log.read_text().count("Kernel started") - before
        sessions = json.loads(page.request.get(f"{base}/api/sessions").text())
    assert len(posts) == 1 and started == 1, (posts, started)
    assert [s["path"] for s in sessions].count(name) == 1, sessions


def _pump_until(page, predicate, timeout_s: float) -> bool:
    """Whether ``predicate()`` came true within ``timeout_s`` seconds, the page's events handled meanwhile (a sync
    Playwright route handler runs only while a Playwright call waits)."""
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    return bool(predicate())
