"""What an attendee's single-user server runs first, as the attendee: ``python -m labkit.hub.singleuser [ARGS]``.

The hub's spawner (:class:`labkit.hub.spawner.LabSpawner`, JupyterHub's ``LocalProcessSpawner``) starts this module
as the attendee's Unix user, in their home, with ``LABKIT_HOME`` set to ``~/labkit``. It makes or refreshes their
working copies of the notebooks (:func:`labkit.workspace.make_copies`, in ``$LABKIT_HOME/work``) and the Jupyter
server configuration ``make lab`` uses (:func:`labkit.workspace.write_server_config`: the copies as the root folder,
idle kernels culled, widget views stripped before saves), then replaces itself with ``jupyterhub-singleuser`` of the
same venv, given that configuration (``--config``) and the hub's arguments (``ARGS``, e.g. ``--port``).

Running as the attendee, never as root, is the point: a root process writing into a home the attendee controls could
be pointed at any file of the machine through a symbolic link. JupyterLab's own settings (``overrides.json``) live in
the shared venv, written once by the set-up (:mod:`labkit.hub.install`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from labkit.broker.runtime import labkit_home
from labkit.workspace import make_copies, work_dir, write_server_config


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


def main(argv: list[str]) -> None:
    """Prepare (:func:`prepare`) then exec ``jupyterhub-singleuser --config=<file> ARGS`` (``argv``)."""
    os.umask(0o077)  # the attendee's files are theirs alone
    config = prepare()
    command = str(Path(sys.executable).with_name("jupyterhub-singleuser"))
    os.execv(command, [command, f"--config={config}", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
