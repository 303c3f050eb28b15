"""labkit's packages keep to their concerns: the engine (``labkit.crashlab``) imports no topic, lesson or model;
the Kafka helpers and the runtime plumbing (``labkit.core``) import no engine; nothing of ``labkit`` imports the tooling
(``labkit_dev``) or the tests; no module takes another module's private (``_``) name. Read from the source (every
import, also inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
LABKIT = REPO / "labkit"
#: labkit's layers above the runtime plumbing.
ABOVE_CORE = ("labkit.broker", "labkit.kafka", "labkit.crashlab", "labkit.share", "labkit.spark", "labkit.lessons",
              "labkit.models", "labkit.learn", "labkit.lab", "labkit.hub", "labkit.doctor", "labkit.book",
              "labkit.bundle", "labkit_dev")


def imports(package: str, root: Path = LABKIT) -> dict[str, set[str]]:
    """Module file -> the labkit modules it imports (``package``: a folder of ``root``, or "" for all of it)."""
    found = {}
    for path in (root / package).rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        found[str(path.relative_to(REPO))] = {n for n in names if n.startswith(("labkit", "tests"))}
    return found


@pytest.mark.parametrize("package, forbidden", [
    ("crashlab", ("labkit.share", "labkit.spark", "labkit.lessons", "labkit.models")),
    ("kafka", ("labkit.crashlab", "labkit.share", "labkit.spark", "labkit.lessons", "labkit.models")),
    ("core", ABOVE_CORE),
    ("models", ("labkit.crashlab", "labkit.share", "labkit.spark", "labkit.lessons")),
    ("", ("labkit_dev", "tests")),
])
def test_a_package_imports_none_of_what_it_must_not(package, forbidden):
    found = imports(package)
    assert found
    wrong = {f: sorted(n for n in names if n.startswith(forbidden)) for f, names in found.items()}
    assert not {f: n for f, n in wrong.items() if n}


def test_no_lesson_imports_another_lesson():
    """What two lessons share lives in a layer below them (a crash step of crashlab, labkit/share, labkit/kafka)."""
    found = imports("lessons")
    assert len(found) > 10
    wrong = {f: sorted(n for n in names if n.startswith("labkit.lessons.")
                       and n.split(".")[2] != Path(f).stem) for f, names in found.items()}
    assert not {f: n for f, n in wrong.items() if n}


def test_the_walk_sees_imports_inside_functions():
    assert "labkit.kafka.producers" in imports("crashlab")["labkit/crashlab/loop.py"]


def private_uses(path: Path, module: str) -> list[str]:
    """The private names (``_x``, not ``__x__``) that the module at ``path`` (dotted name ``module``) takes from
    another labkit module: ``from labkit.m import _x``, or ``m._x`` where ``m`` names an imported labkit module."""
    tree = ast.parse(path.read_text())
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("labkit"):
            for a in node.names:
                if a.name.startswith("_") and node.module != module:
                    found.append(f"{node.module}.{a.name}")
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname and a.name.startswith("labkit")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != module):
            found.append(f"{aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_the_private_name_check_finds_both_forms(tmp_path):
    (tmp_path / "m.py").write_text("from labkit.lab import server\nfrom labkit.core.waiting import _poll, wait_for\n"
                                   "import labkit.broker.runtime as runtime\n\ndef f():\n"
                                   "    return server._read(1), runtime._java_major(), server.spawn_broker, wait_for\n")
    assert private_uses(tmp_path / "m.py", "labkit.m") == [
        "labkit.broker.runtime._java_major", "labkit.core.waiting._poll", "labkit.lab.server._read"]
    (tmp_path / "clean.py").write_text("from labkit.core.waiting import wait_for\nfrom labkit.lab import server\n"
                                       "x = server.__name__, wait_for\n")
    assert private_uses(tmp_path / "clean.py", "labkit.clean") == []


def test_no_module_takes_another_modules_private_name():
    found = {}
    for root in (LABKIT, REPO / "labkit_dev"):
        for path in root.rglob("*.py"):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[str(path.relative_to(REPO))] = private_uses(path, module)
    assert {f: uses for f, uses in found.items() if uses} == {}


def room_of(module: str) -> str:
    """The room (a package folder of labkit, or labkit_dev) a dotted module name lives in; a top-level module of labkit
    (``labkit``, ``labkit.__main__``) is a room of its own."""
    parts = module.split(".")
    if parts[0] == "labkit_dev":
        return "labkit_dev"
    return f"labkit.{parts[1]}" if len(parts) > 1 and (LABKIT / parts[1]).is_dir() else module


def rooms_both_ways(found: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The pairs of rooms that import each other (a circle between two rooms: one of the arrows runs back up), from
    :func:`imports`' map of module file -> the modules it imports."""
    arrows = {(room_of(".".join(Path(f).with_suffix("").parts)), room_of(n)) for f, names in found.items()
              for n in names if n.startswith("labkit")}
    arrows = {(a, b) for a, b in arrows if a != b and b != "labkit"}  # the notebooks' names: imported lazily
    return sorted((a, b) for a, b in arrows if (b, a) in arrows and a < b)


def test_the_room_check_finds_two_rooms_importing_each_other():
    found = {"labkit/lab/x.py": {"labkit.spark.session"}, "labkit/spark/y.py": {"labkit.lab.server"},
             "labkit/core/z.py": {"labkit.core.waiting"}, "labkit/kafka/w.py": {"labkit.core.errors"}}
    assert rooms_both_ways(found) == [("labkit.lab", "labkit.spark")]


def test_no_two_rooms_import_each_other():
    assert rooms_both_ways(imports("") | imports("", REPO / "labkit_dev")) == []
