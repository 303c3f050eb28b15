""":func:`labkit.hub.drive.wait_for_run` in a real JupyterLab (the lab's, as ``make lab`` starts it) in headless
Chromium: a Run All that raised anywhere, in its last cell too, is a failed run; a clean one with a stderr stream is
not."""

import nbformat
import pytest

from labkit import browser
from labkit.hub import drive

pytestmark = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "")

NOTEBOOKS = {  # name: its code cells
    "raises_last.ipynb": ["print('part 1')", "assert 1 + 1 == 3, 'the claim did not hold'"],
    "raises_in_the_middle.ipynb": ["print('part 1')", "raise RuntimeError('the broker did not answer')",
                                   "print('All claims hold.')"],
    "clean_with_stderr.ipynb": ["import sys; print('a warning, not an error', file=sys.stderr)",
                                "print('All claims hold.')"],
}


def test_a_run_all_that_raised_anywhere_is_failed_and_a_clean_one_with_stderr_is_not(tmp_path, bootstrap):
    settings = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}  # every prompt drawn
    with browser.lab_server(tmp_path, bootstrap, settings=settings) as url:
        for name, cells in NOTEBOOKS.items():
            nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]),
                           tmp_path / "work" / name)
        said = {}
        with browser.chromium() as page:
            page.add_locator_handler(page.locator(".jp-Dialog", has_text="Select Kernel"),
                                     lambda dialog: dialog.locator(".jp-Dialog-button.jp-mod-accept").click())
            for name in NOTEBOOKS:
                page.goto(url.replace("00_tour.ipynb", name) + "&reset")  # this notebook alone, no tab restored
                page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=120_000)
                drive.run_all(page, name)
                said[name] = drive.wait_for_run(page, name, 300)
    assert said["raises_last.ipynb"].startswith("every code cell ran (2), one raised: "), said
    assert "AssertionError: the claim did not hold" in said["raises_last.ipynb"], said
    assert said["raises_in_the_middle.ipynb"].startswith("stopped after 2 of 3 code cells: "), said
    assert "RuntimeError: the broker did not answer" in said["raises_in_the_middle.ipynb"], said
    assert said["clean_with_stderr.ipynb"] is None, said
