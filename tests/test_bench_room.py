"""bench/room.py keeps what a failed run left: the whole error and the page as it was."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))  # a bench script imports its neighbours, as when run
from room import keep_evidence  # noqa: E402


class _Page:
    def __init__(self, gone: bool = False) -> None:
        self.gone = gone

    def screenshot(self, path: str, full_page: bool) -> None:
        if self.gone:
            raise RuntimeError("Target page, context or browser has been closed")
        open(path, "wb").write(b"\x89PNG")


def test_a_failed_run_s_whole_error_and_screenshot_are_kept_and_named(tmp_path):
    call_log = "Call log:\n" + "\n".join(f"  - waiting for locator #{n}" for n in range(40))  # Playwright's, long
    said = keep_evidence(_Page(), "ann-02-check", TimeoutError(f"Timeout 30000ms exceeded.\n{call_log}"), tmp_path)
    assert (tmp_path / "ann-02-check.txt").read_text().endswith("#39\n")  # all of it, not 300 characters
    assert (tmp_path / "ann-02-check.png").read_bytes() == b"\x89PNG"
    assert said.startswith("TimeoutError: Timeout 30000ms exceeded.") and len(said.split(" (whole: ")[0]) == 300
    assert f"whole: {tmp_path / 'ann-02-check.txt'}; screenshot: {tmp_path / 'ann-02-check.png'}" in said


def test_a_page_that_is_gone_keeps_the_error_and_says_there_is_no_screenshot(tmp_path):
    said = keep_evidence(_Page(gone=True), "bob-00-shutdown", RuntimeError("kernel busy"), tmp_path)
    assert (tmp_path / "bob-00-shutdown.txt").read_text() == "RuntimeError: kernel busy\n"
    assert said.endswith("screenshot: none (RuntimeError))") and not (tmp_path / "bob-00-shutdown.png").exists()
