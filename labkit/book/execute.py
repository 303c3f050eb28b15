"""Runs the notebooks for the book: each in a fresh kernel of the lab's venv (nbclient), at most 2 at once (the
lab's machine has 2 cores), skipping one whose stamp (:mod:`labkit.book.stamp`) says its last run is current.

``LABKIT_CI=1`` is set for the kernels: a notebook's CI-only cells then press the playgrounds' buttons, so the recorded
outputs show the runs the text discusses and the claims cells check them (without it a claims cell would fail on a
playground nobody pressed). The broker: ``LABKIT_BOOTSTRAP`` if set, else one embedded broker started here and shared
by the notebooks (as the test suite does). After a notebook's last cell one more cell, run in the same kernel and
removed from the saved run, records what each live widget shows at the end (:mod:`labkit.book.recording`).

The kernel talks to the book over Unix sockets in a private temporary folder (jupyter_client's ``ipc`` transport),
not TCP ports on 127.0.0.1: no other user of the machine can reach it, and ipykernel has nothing to warn about (over
TCP it prints, at every start, that the connection is unencrypted and "susceptible to eavesdropping").
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from labkit.book import provenance, recording, stamp
from labkit.learn import testmode

#: At most this many notebooks at once (each is a kernel plus the JVMs it starts).
MAX_PARALLEL = 2
#: One cell's limit, in seconds (the suite's: make test's --nbval-cell-timeout).
CELL_TIMEOUT_S = 600
#: Seconds a kernel may take to start (nbclient's default, 60 s, is too short on a loaded machine).
KERNEL_START_S = 300


@dataclass
class Run:
    """One notebook's run: ``executed`` is its copy with outputs; ``cached`` when the stamp let it be reused;
    ``seconds`` its wall time (0 when cached); ``errors`` the number of cells that raised."""
    notebook: Path
    executed: Path
    cached: bool
    seconds: float
    errors: int


def _run_one(notebook: str, executed: str, labkit: str, versions: dict[str, str]) -> tuple[float, int]:
    """Execute ``notebook`` into ``executed`` (a worker process), then record what its live widgets show
    (:mod:`labkit.book.recording`, kept in the notebook's metadata ``labkit_book.recordings``); ``versions``
    (:func:`labkit.book.provenance.versions`) go beside it. Returns (wall seconds, cells that raised, the recording
    counted as one when it failed)."""
    import nbclient
    import nbformat
    from traitlets.config import Config

    start = time.monotonic()
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("pass", id=recording.CELL_ID))

    def recorder(cell, cell_index: int) -> None:  # nbclient's on_cell_start: the widgets the cells above displayed
        if cell.get("id") == recording.CELL_ID:
            cell.source = recording.source(recording.displayed(nb.cells[:cell_index]))

    with tempfile.TemporaryDirectory(prefix="labkit-kernel-") as sockets:  # mode 0700; a short path (sun_path)
        transport = Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(sockets, "kernel")}})
        client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, startup_timeout=KERNEL_START_S,
                                         kernel_name="python3", allow_errors=True, store_widget_state=True,
                                         on_cell_start=recorder, config=transport,
                                         resources={"metadata": {"path": str(Path(notebook).parent)}})
        client.execute()
    last = nb.cells.pop()
    errors = sum(1 for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error")
    try:
        nb.metadata["labkit_book"] = {"recordings": recording.read(last.get("outputs", []))}
    except RuntimeError as exc:
        print(f"{Path(notebook).name}: {exc}", file=sys.stderr)
        errors += 1
    Path(executed).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, executed)
    Path(executed).with_suffix(".versions.json").write_text(json.dumps(versions))
    if errors == 0:  # a run with a failed cell is not reused: the next build runs it again
        stamp.write(Path(notebook), Path(executed), labkit)
    return time.monotonic() - start, errors


def run_all(notebooks: list[Path], folder: Path, *, parallel: int = MAX_PARALLEL) -> list[Run]:
    """Execute each of ``notebooks`` into ``folder/<name>.ipynb`` unless its stamp is current; in order of the list,
    ``parallel`` at once (bounded by the machine's CPU count). Sets ``LABKIT_CI=1`` in this process's environment,
    which the kernels inherit.

    The provenance (:mod:`labkit.book.provenance`) is what the cluster reports, asked once before the runs.

    Raises:
        labkit.core.errors.BrokerUnreachableError: the cluster does not answer ApiVersions (:func:`provenance.cluster`).
        nbclient.exceptions.CellTimeoutError / DeadKernelError: a cell ran past :data:`CELL_TIMEOUT_S` or the kernel
            died (re-raised from the worker).
    """
    os.environ[testmode.ENV] = "1"
    labkit = stamp.labkit_digest()
    todo = [nb for nb in notebooks if not stamp.is_current(nb, folder / nb.name, labkit)]
    runs = {nb: Run(nb, folder / nb.name, True, 0.0, 0) for nb in notebooks if nb not in todo}
    if todo:
        broker = None
        if not os.environ.get("LABKIT_BOOTSTRAP"):
            from labkit.broker import EmbeddedBroker

            broker = EmbeddedBroker(proxy_listener=True).start()
            os.environ["LABKIT_BOOTSTRAP"] = broker.bootstrap_servers
            os.environ["LABKIT_PROXIED"] = f"{broker.proxied_listener_port}:{broker.proxy_port}"
        try:
            versions = provenance.versions(provenance.cluster(os.environ["LABKIT_BOOTSTRAP"]), broker is not None)
            workers = max(1, min(parallel, len(todo), len(os.sched_getaffinity(0))))
            # spawn, not fork: this process may hold the broker's threads (labkit.core.procs' spawner).
            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {nb: pool.submit(_run_one, str(nb), str(folder / nb.name), labkit, versions) for nb in todo}
                for nb, future in futures.items():
                    seconds, errors = future.result()
                    runs[nb] = Run(nb, folder / nb.name, False, seconds, errors)
        finally:
            if broker is not None:
                broker.close()
                os.environ.pop("LABKIT_BOOTSTRAP", None)
                os.environ.pop("LABKIT_PROXIED", None)
    return [runs[nb] for nb in notebooks]
