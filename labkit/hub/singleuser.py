"""Prepare an attendee's lab, then exec ``jupyterhub-singleuser``: ``python -m labkit.hub.singleuser [ARGS]``.

Run by the hub's spawner (:class:`labkit.hub.spawner.LabSpawner`) as the attendee's Unix user, in their home, with
``LABKIT_HOME`` set to ``~/labkit``:

1. make or refresh their working copies of the notebooks (:func:`labkit.lab.workspace.make_copies`, in
   ``$LABKIT_HOME/work``) and the Jupyter server configuration ``make lab`` uses
   (:func:`labkit.lab.workspace.write_server_config`);
2. start their **lab broker**'s daemon (:func:`labkit.lab.server.spawn_broker` running :func:`serve_broker`) without
   waiting: the daemon starts the broker when their first kernel asks (``labkit.connect()``), its jars from the
   shared cache (``LABKIT_SHARED_CACHE``), its state in ``$LABKIT_HOME/lab/broker.json``;
3. replace itself with ``jupyterhub-singleuser`` of the same venv, given that configuration (``--config``) and the
   hub's ``ARGS`` (e.g. ``--port``).

A broker that does not start (no Java, slower than :data:`labkit.lab.server.BROKER_READY_S`) leaves JupyterLab
working, with :data:`FAILED_NOTE` at the top of the file browser saying what failed and what to do (the daemon's log,
``$LABKIT_HOME/lab/broker-daemon.log``, has the same lines). Runs as the attendee, never as root: a root process
writing into a home the attendee controls could be pointed anywhere through a symbolic link. Why the broker waits for
the first kernel, and why a failed broker does not fail the spawn: docs/hub-decisions.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from labkit.broker.runtime import labkit_home
from labkit.core.errors import LabkitError
from labkit.lab import server as lab
from labkit.lab.workspace import make_copies, work_dir, write_server_config

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


def serve_broker(home: Path | None = None) -> None:
    """Run the attendee's lab broker (:func:`labkit.lab.server.serve_broker`, until SIGTERM), started when their first
    kernel asks for it (:func:`labkit.connect` calls :func:`labkit.lab.server.want_broker`); if it does not start, write
    :data:`FAILED_NOTE` in their working folder and print the reason (the module docstring says why JupyterLab runs
    anyway); the note is removed once one starts.

    Raises:
        SystemExit: the broker did not start (status 1).
    """
    note = work_dir(home or labkit_home()) / FAILED_NOTE
    lab.wanted_file().unlink(missing_ok=True)  # a request of an earlier server's kernel: this one waits for its own

    def hold(stop) -> bool:
        while not lab.wanted_file().exists():
            if stop.wait(0.5):
                return False
        return True

    try:
        lab.serve_broker(hold=hold, on_ready=lambda: note.unlink(missing_ok=True))
    except (LabkitError, OSError) as exc:
        note.write_text(f"Your lab's Kafka broker did not start, so each notebook you run starts a broker of its "
                        "own (slower, and it uses more memory).\nTell the instructor; then File > Hub Control "
                        f"Panel > Stop My Server, and Start My Server to try again.\n\nWhat failed:\n{exc}\n")
        print(f"labkit: the lab broker did not start: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def main(argv: list[str]) -> None:
    """``serve-broker``: :func:`serve_broker`. Otherwise prepare (:func:`prepare`), start the broker's daemon
    (:func:`labkit.lab.server.spawn_broker`, running this module's ``serve-broker``) without waiting for the broker,
    then exec ``jupyterhub-singleuser --config=<file> ARGS`` (``argv``)."""
    os.umask(0o077)  # the attendee's files are theirs alone
    if argv == ["serve-broker"]:
        serve_broker()
        return
    config = prepare()
    lab.spawn_broker([sys.executable, "-m", "labkit.hub.singleuser", "serve-broker"])
    command = str(Path(sys.executable).with_name("jupyterhub-singleuser"))
    os.execv(command, [command, f"--config={config}", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
