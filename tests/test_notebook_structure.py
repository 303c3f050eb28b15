"""Every notebook opens with its learning objectives, numbers its sections without gaps, ends with a "What you
saw" summary, and links to the notebooks before and after it (issue 12); the README lists each one. A notebook
imports labkit from one place, ``import labkit`` and its lessons' modules, and its claims cells are collapsed,
define no function and end with one verdict line (issue 22)."""

import ast
import json
import re
from pathlib import Path

import pytest

import labkit

REPO = Path(__file__).parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LESSONS = {p.stem for p in (REPO / "labkit" / "lessons").glob("[a-z]*.py")}


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


def code_cells(nb: Path) -> list[tuple[dict, ast.Module]]:
    """Each code cell of ``nb`` with its parsed source."""
    cells = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
    return [(c, ast.parse("".join(c["source"]))) for c in cells]


def is_claims_cell(cell: dict, tree: ast.Module) -> bool:
    """A claims cell asserts the lesson's claims: it prints that they hold, or it asserts more than one thing."""
    asserts = sum(isinstance(node, ast.Assert) for node in ast.walk(tree))
    return "claims hold" in "".join(cell["source"]) or asserts >= 2


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_labkit_is_imported_from_one_place(nb):
    """``import labkit`` and ``from labkit.lessons import <lesson> [as x]``, nothing deeper; every ``labkit.<name>``
    the notebook uses is public (``labkit.__all__``)."""
    for _, tree in code_cells(nb):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "labkit":
                        assert (alias.name, alias.asname) == ("labkit", None), f"{nb.name}: import {alias.name}"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "labkit":
                names = [alias.name for alias in node.names]
                assert node.module == "labkit.lessons" and set(names) <= LESSONS, \
                    f"{nb.name}: from {node.module} import {', '.join(names)} (use labkit.<name>, or the lesson's module)"
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "labkit":
                assert node.attr in labkit.__all__, f"{nb.name}: labkit.{node.attr} is not a public name"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_claims_cells_are_collapsed_define_nothing_and_end_with_a_verdict(nb):
    claims = [(cell, tree) for cell, tree in code_cells(nb) if is_claims_cell(cell, tree)]
    assert claims, f"{nb.name} has no claims cell"
    for cell, tree in claims:
        first = "".join(cell["source"]).splitlines()[0]
        assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, f"{nb.name}: {first!r} is not collapsed"
        defined = [node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                             ast.ClassDef))]
        assert not defined, f"{nb.name}: the claims cell {first!r} defines {defined}: move them to its lesson module"
        last = tree.body[-1]
        assert (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                and getattr(last.value.func, "id", None) == "print" and "hold" in ast.unparse(last.value)), \
            f"{nb.name}: the claims cell {first!r} does not end with its verdict line"
        prints = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"]
        assert len(prints) == 1, f"{nb.name}: the claims cell {first!r} prints more than its verdict"


GLOSSARY = REPO / "notebooks" / "glossary.md"
#: Terms issue 24 asks to be defined where first used, each also in the glossary.
GLOSSARY_TERMS = ("high watermark", "WriteTxnMarkers", "producer epoch", "member epoch", "generation", "KIP-848",
                  "KIP-1251", "assignment epoch", "control record", "last stable offset", "transactional.id",
                  "SPSO / SPEO", "acquisition lock", "delivery count", "micro-batch", "checkpoint", "PREPARE_COMMIT")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_an_opening_question_answered_at_the_end_and_the_glossary_linked(nb):
    """The learner answers one question before running anything; the summary answers it (issue 24)."""
    cells = markdown(nb)
    opening = re.search(r"\*\*Before you run anything:\*\*(.+?)(\n\n|$)", cells[0], re.S)
    question = " ".join(opening.group(1).split()) if opening else ""
    assert "?" in question and "Write your answer down" in question, \
        f"{nb.name}: no opening question in its first cell"
    assert "**The opening question, answered:**" in cells[-1], f"{nb.name}: the summary does not answer it"
    assert "](glossary.md)" in cells[0], f"{nb.name}: the first cell does not link the glossary"


def test_the_glossary_defines_every_term_the_notebooks_introduce():
    rows = [line for line in GLOSSARY.read_text().splitlines() if line.startswith("| ")]
    defined = {row.split("|")[1].strip().strip("`").split(" **(")[0] for row in rows}
    missing = [t for t in GLOSSARY_TERMS if not any(t in term for term in defined)]
    assert not missing, f"notebooks/glossary.md lacks {missing}"
    assert all(row.count("|") >= 3 and row.split("|")[2].strip() for row in rows), "a glossary row without a definition"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_ends_in_a_collection_of_figures(nb):
    """A cell's last expression that is a list, tuple or comprehension of figures is shown as a text dump
    (``[Figure({'data': ...``), not as figures: each figure is displayed on its own (issue 37, item 1)."""
    for cell, tree in code_cells(nb):
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr) and isinstance(last.value, (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)):
            calls = [ast.unparse(n.func) for n in ast.walk(last.value) if isinstance(n, ast.Call)]
            assert not any("figure" in name for name in calls), (nb.name, cell.get("id"), ast.unparse(last))
