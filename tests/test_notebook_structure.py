"""Every notebook opens with its learning objectives, numbers its sections without gaps, ends with a "What you
saw" summary, and links to the notebooks before and after it (issue 12); the README lists each one."""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def markdown(nb: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"]


def links(text: str) -> list[str]:
    return re.findall(r"\]\((\d\d_[a-z_]+\.ipynb)\)", text.strip().splitlines()[-1])


def test_the_notebooks_are_numbered_from_00_without_gaps():
    assert [int(nb.name[:2]) for nb in NOTEBOOKS] == list(range(len(NOTEBOOKS))) and len(NOTEBOOKS) >= 9


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_objectives_sections_summary_and_links(nb):
    cells = markdown(nb)
    assert cells[0].startswith(f"# {nb.name[:2]} · ")
    assert "**You will learn to**" in cells[0] or "**You will see**" in cells[0], "no learning objectives"
    numbers = [int(n) for c in cells for n in re.findall(r"^## (\d+)\. ", c, re.M)]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) and numbers[0] in (0, 1), numbers
    assert cells[-1].startswith("## What you saw"), "the last text cell is not the summary"
    i = NOTEBOOKS.index(nb)
    expected = [p.name for p in NOTEBOOKS[max(i - 1, 0):i + 2] if p != nb]
    assert links(cells[0]) == links(cells[-1]) == expected


def test_the_readme_lists_every_notebook():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert all(f"`notebooks/{nb.name}`" in readme for nb in NOTEBOOKS)
