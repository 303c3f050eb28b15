"""What an attendee's single-user server runs first, as the attendee: ``python -m labkit.hub.singleuser [ARGS]``.

The hub's spawner (:class:`labkit.hub.spawner.LabSpawner`, JupyterHub's ``LocalProcessSpawner``) starts this module
as the attendee's Unix user, in their home, with ``LABKIT_HOME`` set to ``~/labkit``. It makes or refreshes their
working copies of the notebooks (:func:`labkit.workspace.make_copies`, in ``$LABKIT_HOME/work``) and the Jupyter
server configuration ``make lab`` uses (:func:`labkit.workspace.write_server_config`: the copies as the root folder,
idle kernels culled, widget views stripped before saves), starts the attendee's **lab broker** (:func:`start_broker`),
then replaces itself with ``jupyterhub-singleuser`` of the same venv, given that configuration (``--config``) and the
hub's arguments (``ARGS``, e.g. ``--port``).

The broker is started as ``labkit up`` (``make lab``) starts it, by :mod:`labkit.lab`'s own function: a daemon in a
session of its own (it outlives this process's ``exec``), its state file in ``$LABKIT_HOME/lab/broker.json``, which
is how :func:`labkit.connect` in every kernel of the attendee finds it, so no kernel starts a broker of its own. Its
ports come from the attendee's block (``LABKIT_PORT_RANGE``) and its jars from the shared cache
(``LABKIT_SHARED_CACHE``), both set by the spawner. It ends when the hub stops the server
(:meth:`labkit.hub.spawner.LabSpawner.stop` ends every process of the attendee).

If the broker does not start (no Java, a port block full, a start slower than :data:`BROKER_START_S`), the attendee
still gets JupyterLab, with a clear message: the file :data:`FAILED_NOTE` at the top of their file browser says what
failed and what to do, and the hub's log has the same lines. Chosen over failing the spawn because JupyterHub 6 reports
a server that exits before answering only as "failed to start" after its ``http_timeout`` (the reason stays in the
hub's log, which the attendee cannot read), while the lab itself still works without the lab broker:
:func:`labkit.connect` then starts a broker per kernel (about 455 MiB each, so the instructor should look: the note
asks the attendee to call them, and to stop and start their server, which tries again).

Running as the attendee, never as root, is the point: a root process writing into a home the attendee controls could
be pointed at any file of the machine through a symbolic link. JupyterLab's own settings (``overrides.json``) live in
the shared venv, written once by the set-up (:mod:`labkit.hub.install`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from labkit import lab
from labkit.broker.runtime import labkit_home
from labkit.errors import LabkitError
from labkit.workspace import make_copies, work_dir, write_server_config

#: Seconds to wait for the attendee's broker: its own readiness deadline (:data:`labkit.lab.BROKER_READY_S`: twenty
#: first sign-ins at once on two cores overran 60 s for most) and the daemon's start.
BROKER_START_S = lab.BROKER_READY_S + 30
#: The note put in the attendee's file browser when their broker did not start (removed once one does).
FAILED_NOTE = "00_LAB_BROKER_DID_NOT_START.txt"


def prepare(home: Path | None = None) -> Path:
    """Make the working copies and the server configuration for ``home`` (default ``$LABKIT_HOME``), folders mode
    0700, and return the configuration file's path.

    Raises:
        OSError: the home cannot be written.
    """
    home = home or labkit_home()
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    for note in make_copies(work_dir(home)):
        print(f"labkit: {note}", file=sys.stderr)
    return write_server_config(home)


def start_broker(home: Path | None = None, timeout_s: float = BROKER_START_S) -> str | None:
    """Start the attendee's lab broker (or find the one running) as ``labkit up`` does (:mod:`labkit.lab`), and return
    its bootstrap address; on failure write :data:`FAILED_NOTE` in their working folder, print the reason and return
    ``None`` (the module docstring says why JupyterLab starts anyway)."""
    note = work_dir(home or labkit_home()) / FAILED_NOTE
    try:
        address = lab.start_broker(timeout_s)  # labkit up's own start
    except (LabkitError, OSError) as exc:
        note.write_text(f"Your lab's Kafka broker did not start, so each notebook you run starts a broker of its "
                        "own (slower, and it uses more memory).\nTell the instructor; then File > Hub Control "
                        f"Panel > Stop My Server, and Start My Server to try again.\n\nWhat failed:\n{exc}\n")
        print(f"labkit: the lab broker did not start: {exc}", file=sys.stderr)
        return None
    note.unlink(missing_ok=True)
    print(f"labkit: the lab broker runs at {address}", file=sys.stderr)
    return address


def main(argv: list[str]) -> None:
    """Prepare (:func:`prepare`), start the broker (:func:`start_broker`), then exec
    ``jupyterhub-singleuser --config=<file> ARGS`` (``argv``)."""
    os.umask(0o077)  # the attendee's files are theirs alone
    config = prepare()
    start_broker()
    command = str(Path(sys.executable).with_name("jupyterhub-singleuser"))
    os.execv(command, [command, f"--config={config}", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
