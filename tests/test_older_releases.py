"""The notebooks whose lessons depend on the Kafka release (00: the storage and transactions every later notebook
builds on; 05: KAFKA-20191 on stock Kafka; 09: leader elections and KIP-966's defaults, on a cluster of the
release's own), run whole on every other release labkit supports (4.3.2 next to the
default 4.4.0), each on a broker of that release: a cell that raises fails the test, as under nbval. One test item
per notebook, so the parallel suite runs them beside everything else instead of in a second pass."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from labkit.broker import EmbeddedBroker
from labkit.broker.settings import FEATURES_BY_VERSION, kafka_version

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: The notebooks checked on the other releases (README, "Kafka versions").
ON_OLDER_RELEASES = ("00_tour", "05_unassigned_partition", "09_replication")
OTHER_RELEASES = [v for v in FEATURES_BY_VERSION if v != kafka_version()]


@pytest.fixture(scope="module", params=OTHER_RELEASES)
def release_broker(request):
    """A broker of another release, with the PROXIED listener the notebooks' fault proxy needs."""
    with EmbeddedBroker(version=request.param, proxy_listener=True) as broker:
        yield broker


@pytest.mark.parametrize("name", ON_OLDER_RELEASES)
def test_notebook_runs_on_the_release(release_broker, name):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    env = {**os.environ, "LABKIT_KAFKA_VERSION": release_broker.version,
           "LABKIT_BOOTSTRAP": release_broker.bootstrap_servers,
           "LABKIT_PROXIED": f"{release_broker.proxied_listener_port}:{release_broker.proxy_port}"}
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute(env=env)  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    ran = [c for c in notebook.cells if c.cell_type == "code" and c.source.strip()]
    assert ran and all(c.execution_count for c in ran), f"{name}: not every code cell ran on Kafka {release_broker.version}"
