"""The Docker route made true (issue 39): with ``LABKIT_BOOTSTRAP`` naming a running cluster (here the session's real
broker, standing in for docker compose's), no ``java`` or ``javac`` on the kernel's PATH, no JAVA_HOME and an empty
``LABKIT_HOME`` (no jar cache), the notebooks the doctor lists as runnable with Docker alone run whole, as under
nbval: a cell that raises fails the test. They fetch nothing into the jar cache."""

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from labkit.doctor import needs

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: What a JDK puts on PATH that the lab could use.
JAVA_TOOLS = ("java", "javac")


def docker_alone() -> list[str]:
    """The notebooks that need nothing on this machine once the lab uses another cluster (no JVM, JDK or jars)."""
    local = (needs.JVM, needs.JAVAC, needs.KAFKA_JARS, needs.SPARK_JARS)
    return [nb.number for nb in needs.NOTEBOOKS if not any(nb.number in needs.users(k, True) for k in local)]


def path_without_java(folder: Path) -> str:
    """This PATH with every folder that holds ``java`` or ``javac`` replaced by a folder of links to all its other
    entries (``/usr/bin`` keeps its tools, loses its Java)."""
    kept = []
    for i, entry in enumerate(p for p in os.environ["PATH"].split(os.pathsep) if p):
        directory = Path(entry)
        if not any((directory / tool).exists() for tool in JAVA_TOOLS):
            kept.append(entry)
            continue
        mirror = folder / f"{i}-{directory.name}"
        mirror.mkdir(parents=True)
        for item in directory.iterdir():
            if item.name not in JAVA_TOOLS:
                (mirror / item.name).symlink_to(item)
        kept.append(str(mirror))
    return os.pathsep.join(kept)


def test_the_docker_alone_notebooks_are_00_and_07():
    assert docker_alone() == ["00", "07"]


@pytest.mark.parametrize("number", docker_alone())
def test_the_notebook_runs_with_docker_alone(number, broker, tmp_path):
    home = tmp_path / "labkit-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "LABKIT_SHARED_CACHE")}
    env |= {"PATH": path_without_java(tmp_path / "path"), "LABKIT_HOME": str(home),
            "LABKIT_BOOTSTRAP": broker.bootstrap_servers,
            "LABKIT_PROXIED": f"{broker.proxied_listener_port}:{broker.proxy_port}"}
    assert not any(shutil.which(tool, path=env["PATH"]) for tool in JAVA_TOOLS)
    (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute(env=env)  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    ran = [c for c in notebook.cells if c.cell_type == "code" and c.source.strip()]
    assert ran and all(c.execution_count for c in ran), f"{path.name}: not every code cell ran"
    printed = "".join(o.get("text", "") for c in ran for o in c.outputs)
    assert f"at {broker.bootstrap_servers} (LABKIT_BOOTSTRAP)" in printed and "All claims hold" in printed
    assert not list(home.glob("kafka-*")), "the notebook fetched Kafka's jars"
