"""pyproject.toml declares every third-party package labkit imports (issue 48: without psutil, ipywidgets and anywidget
a `pip install .` gave a labkit that could not import labkit.lab.server), and requirements.txt pins each declared one.

The imports are read with ``ast`` from every module under labkit/ (at module level and inside functions alike) and
mapped to their distributions with ``importlib.metadata.packages_distributions()``. An import may be declared in an
optional group only when every module that makes it belongs to that group's way in (:data:`GROUPS`); every other one
must be in ``[project].dependencies``. The checker (:func:`undeclared`) is tested on hand-written packages first."""

from __future__ import annotations

import ast
import fnmatch
import functools
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from labkit.hub.install import HUB_PACKAGES

REPO = Path(__file__).resolve().parents[1]
#: pyproject.toml's optional groups -> the modules (paths from the repository, a folder ending in "/") whose imports
#: the group may hold: a way in the lab itself does not need.
GROUPS = {"hub": ("labkit/hub/",), "book": ("labkit/book/",), "browser": ("labkit_dev/",)}
#: Packages labkit needs but does not import, with the reason (they must be in ``[project].dependencies``).
RUN_NOT_IMPORTED = {
    "jupyterlab": "labkit/lab/server.py starts `python -m jupyter lab`",
    "ipykernel": "the notebooks' kernel in that JupyterLab",
    "anywidget": "plotly's FigureWidget (labkit/crashlab/timeline.py, labkit/share/timeline.py) is an anywidget",
}
#: Modules of the hub's venv only whose distribution is named otherwise (not installed here, so not looked up).
HUB_ONLY = {"firstuseauthenticator": "jupyterhub-firstuseauthenticator"}
#: ... and for an optional way in (group -> package -> reason).
GROUP_RUNS = {"hub": {"jupyterhub-idle-culler": "labkit/hub/config.py runs `python -m jupyterhub_idle_culler`"}}


def third_party_imports(root: Path) -> dict[str, set[str]]:
    """Top-level module name -> the files (paths relative to ``root``'s parent) that import it, for every import in
    ``root/**/*.py`` that is neither the standard library's, nor relative, nor of the package ``root`` itself."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - {root.name}:
                found.setdefault(top, set()).add(path.relative_to(root.parent).as_posix())
    return found


def distributions(module: str) -> list[str]:
    """The distributions (canonical names) that provide top-level ``module``; one of the module's own name when none
    installed here does (e.g. jupyterhub, installed in the hub's venv only)."""
    return [canonicalize_name(d) for d in _providers().get(module, [HUB_ONLY.get(module, module)])]


@functools.cache
def _providers() -> dict[str, list[str]]:
    return packages_distributions()


def declared(pyproject: dict) -> dict[str, set[str]]:
    """``{"": core dependencies, group: its optional dependencies}``, as canonical distribution names."""
    project = pyproject["project"]
    groups = {"": project.get("dependencies", []), **project.get("optional-dependencies", {})}
    return {group: {canonicalize_name(Requirement(r).name) for r in reqs} for group, reqs in groups.items()}


def undeclared(imports: dict[str, set[str]], pyproject: dict, groups: dict[str, tuple[str, ...]]) -> list[str]:
    """One line per import that ``pyproject`` does not declare where it should: in the core dependencies, or in the
    optional groups of ``groups`` that the importing files belong to (each file to one that declares it)."""
    decl = declared(pyproject)
    problems = []
    for module, files in sorted(imports.items()):
        for dist in distributions(module):
            if dist in decl[""]:
                continue
            outside = sorted(f for f in files if not any(f.startswith(paths) and dist in decl.get(g, set())
                                                         for g, paths in groups.items()))
            if outside:
                where = [g for g in decl if g and dist in decl[g]]
                problems.append(f"{dist} (import {module}: {', '.join(outside)}) is "
                                + (f"only in the optional groups {where}, whose ways in those modules are not"
                                   if where else "not declared"))
    return problems


def pins(path: Path) -> dict[str, str]:
    """requirements.txt's pins: canonical name -> the version after ``==``."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    reqs = [Requirement(line) for line in lines if line]
    return {canonicalize_name(r.name): str(r.specifier)[2:] for r in reqs if str(r.specifier).startswith("==")}


PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_checker_catches_undeclared_imports_and_passes_declared_ones(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "hub").mkdir(parents=True)
    (pkg / "core.py").write_text("import os\nimport psutil\nfrom . import hub\nfrom pkg import hub\n\n"
                                 "def late():\n    import pandas.api\n")
    (pkg / "hub" / "spawn.py").write_text("from tornado import web\n")
    imports = third_party_imports(pkg)
    assert imports == {"psutil": {"pkg/core.py"}, "pandas": {"pkg/core.py"}, "tornado": {"pkg/hub/spawn.py"}}
    groups = {"hub": ("pkg/hub/",)}
    clean = {"project": {"dependencies": ["psutil>=5", "pandas"], "optional-dependencies": {"hub": ["tornado"]}}}
    assert undeclared(imports, clean, groups) == []
    no_psutil = {"project": {"dependencies": ["pandas"], "optional-dependencies": {"hub": ["tornado"]}}}
    assert undeclared(imports, no_psutil, groups) == ["psutil (import psutil: pkg/core.py) is not declared"]
    late_import = {"project": {"dependencies": ["psutil"], "optional-dependencies": {"hub": ["tornado"]}}}
    assert [p.split(" ")[0] for p in undeclared(imports, late_import, groups)] == ["pandas"]  # a function's import
    # a core module's import declared only for an optional way in
    (pkg / "core.py").write_text("import tornado\n")
    assert undeclared(third_party_imports(pkg), clean, groups) == [
        "tornado (import tornado: pkg/core.py) is only in the optional groups ['hub'], whose ways in those modules "
        "are not"]


def test_every_import_of_labkit_is_declared_in_pyproject():
    imports = third_party_imports(REPO / "labkit")
    assert {"psutil", "ipywidgets"} <= set(imports)  # issue 48's: labkit.core.procs, labkit.lab.server; the control panels
    assert undeclared(imports, PYPROJECT, GROUPS) == []


def test_every_import_of_the_tooling_package_is_declared_in_pyproject():
    """labkit_dev (the browser drivers, the soak, the offline check) may import labkit and the browser group."""
    imports = third_party_imports(REPO / "labkit_dev")
    assert imports.pop("labkit") and "playwright" in imports
    assert undeclared(imports, PYPROJECT, GROUPS) == []


def test_what_labkit_runs_without_importing_it_is_declared():
    decl = declared(PYPROJECT)
    assert set(RUN_NOT_IMPORTED) <= decl[""]
    for group, runs in GROUP_RUNS.items():
        assert set(runs) <= decl[group] | decl[""], group


def test_every_declared_dependency_is_pinned_in_requirements_txt():
    """requirements.txt (what `make lab` installs) pins each declared package at a version pyproject.toml admits; the
    hub's group is pinned there or in labkit.hub.install.HUB_PACKAGES (the hub's venv gets both)."""
    pinned = pins(REPO / "requirements.txt")
    hub = {canonicalize_name(Requirement(p).name): Requirement(p).specifier for p in HUB_PACKAGES}
    project = PYPROJECT["project"]
    for group, reqs in {"": project["dependencies"], **project["optional-dependencies"]}.items():
        for req in map(Requirement, reqs):
            name = canonicalize_name(req.name)
            if group == "hub" and name in hub:
                assert str(hub[name]).startswith("==") and req.specifier.contains(str(hub[name])[2:]), name
                continue
            assert name in pinned, f"{req.name} ({group or 'dependencies'}) is not pinned in requirements.txt"
            assert req.specifier.contains(pinned[name]), f"requirements.txt's {req.name}=={pinned[name]} vs {req}"


def test_every_data_file_of_labkit_is_package_data():
    """The files besides modules under labkit/ are declared package data, so a wheel holds them (the doctor reads
    labkit/doctor/hub-memory.json)."""
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    files = [p for p in (REPO / "labkit").rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
             and "__pycache__" not in p.parts]
    assert REPO / "labkit" / "doctor" / "hub-memory.json" in files
    for path in files:  # a pattern of the file's package, or of a package above it (e.g. "templates/*.html")
        parts = path.relative_to(REPO).parts
        assert any(fnmatch.fnmatch("/".join(parts[n:]), pattern) for n in range(1, len(parts))
                   for pattern in data.get(".".join(parts[:n]), [])), path
