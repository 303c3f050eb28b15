"""labkit's packages keep to their concerns: the engine (``labkit.crashlab``) imports no topic, lesson or model;
the Kafka helpers and the history import no engine. Read from the source (every import, also inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LABKIT = Path(__file__).parents[1] / "labkit"


def imports(package: str) -> dict[str, set[str]]:
    """Module file -> the labkit modules it imports."""
    found = {}
    files = [LABKIT / f"{package}.py"] if (LABKIT / f"{package}.py").exists() else (LABKIT / package).rglob("*.py")
    for path in files:
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        found[str(path.relative_to(LABKIT.parent))] = {n for n in names if n.startswith("labkit")}
    return found


@pytest.mark.parametrize("package, forbidden", [
    ("crashlab", ("labkit.share", "labkit.spark", "labkit.lessons", "labkit.models", "labkit.soak")),
    ("kafka", ("labkit.crashlab", "labkit.share", "labkit.spark", "labkit.lessons", "labkit.models")),
    ("history", ("labkit.crashlab", "labkit.kafka", "labkit.share", "labkit.spark", "labkit.lessons", "labkit.models")),
    ("models", ("labkit.crashlab", "labkit.share", "labkit.spark", "labkit.lessons")),
])
def test_a_package_imports_none_of_what_it_must_not(package, forbidden):
    wrong = {f: sorted(n for n in names if n.startswith(forbidden)) for f, names in imports(package).items()}
    assert not {f: n for f, n in wrong.items() if n}


def test_the_walk_sees_imports_inside_functions():
    assert "labkit.kafka.producers" in imports("crashlab")["labkit/crashlab/loop.py"]
