"""Look at the lab's figures as a learner does: execute notebooks, then screenshot every plotly figure they
drew in headless Chromium (Debian's package, driven by Playwright) at a laptop's width.

    .venv/bin/python docs/figures.py [notebooks/02_zombie_fencing.ipynb ...] [--out DIR] [--width 1280]

Writes ``DIR/<notebook>-<n>.png`` (default ``$LABKIT_HOME/figures``) and the executed notebooks beside them.
The notebooks find their broker as always (:func:`labkit.connect`: ``LABKIT_BOOTSTRAP``, the lab's, else their
own). Raises ``FileNotFoundError`` naming the fix if Chromium is missing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import nbformat
import plotly.io as pio
from nbclient import NotebookClient

from labkit.broker.runtime import labkit_home
from labkit_dev import browser

REPO = Path(__file__).resolve().parents[1]
PLOTLY = "application/vnd.plotly.v1+json"


def execute(path: Path, out: Path, timeout_s: int = 900) -> nbformat.NotebookNode:
    """Run ``path`` top to bottom in a fresh kernel (cwd: notebooks/); save the executed copy in ``out``."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, out / path.name)
    return nb


def screenshots(nb: nbformat.NotebookNode, stem: str, out: Path, width: int) -> list[Path]:
    """One PNG per plotly figure output of ``nb``, rendered at ``width`` px by Chromium."""
    figures = [o["data"][PLOTLY] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if PLOTLY in o.get("data", {})]
    pngs = []
    with browser.chromium({**browser.LAPTOP, "width": width}) as page:
        for n, fig in enumerate(figures, 1):
            html = out / f"{stem}-{n}.html"  # plotly.js inlined (no network): 5 MB, removed once drawn
            pio.write_html(pio.from_json(json.dumps(fig)), html, include_plotlyjs=True, default_width="100%")
            try:
                page.goto(html.as_uri())
                page.wait_for_selector(".main-svg", timeout=30_000)
                png = out / f"{stem}-{n}.png"
                page.screenshot(path=str(png), full_page=True)
                pngs.append(png)
            finally:
                html.unlink()
    return pngs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook")
    parser.add_argument("--out", type=Path, default=labkit_home() / "figures")
    parser.add_argument("--width", type=int, default=1280, help="browser width in px (a laptop: 1280)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.notebooks or sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        pngs = screenshots(execute(path.resolve(), args.out), path.stem, args.out, args.width)
        print(f"{path.name}: {len(pngs)} figures -> {args.out}")


if __name__ == "__main__":
    main()
