"""An attendee told, in their notebook, that their lab reached its memory limit (issue 49).

On the workshop hub each attendee's lab has a memory limit (a cgroup, :mod:`labkit.hub.sandbox`); past it the kernel's
OOM killer ends one of their processes, usually the kernel whose cell took the memory, and JupyterLab only says "the
kernel appears to have died". The hub's spawner writes what it observes of the attendee's memory group to :data:`INFO`
(``{"limit_mib", "oom_kills"}``: the cgroup's ``memory.limit_in_bytes`` and ``memory.oom_control``'s ``oom_kill``, read
as root; :meth:`labkit.hub.spawner.LabSpawner.poll`), in a root-owned folder (mode 0755, the file 0644) bound at
``/run/labkit`` in the attendee's namespace (:func:`labkit.hub.sandbox.enter_command`: a read-write bind mount, which
the attendee can read and not write because root owns the folder and the file). A kernel that imports labkit on the hub
(:func:`install`) checks it before each cell: once the count is above what the attendee was last told (:data:`TOLD`, in
their lab folder), the cell's output starts with the notice, once. Stdlib only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: What the hub observed of this attendee's memory group, as their lab sees it.
INFO = Path("/run/labkit/memory.json")
#: The OOM kill count the attendee was last told of (in ``$LABKIT_HOME/lab``).
TOLD = "oom-told"


def notice(info: Path, told: Path) -> str | None:
    """The notice to show if ``info`` (:data:`INFO`'s form) counts more OOM kills than ``told`` records, recording the
    new count in ``told``; else None (no file, an unreadable one, or nothing new)."""
    try:
        seen = json.loads(info.read_text())
        kills, limit = int(seen["oom_kills"]), int(seen["limit_mib"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        before = int(told.read_text())
    except (OSError, ValueError):
        before = 0
    if kills <= before:
        return None
    told.parent.mkdir(parents=True, exist_ok=True)
    told.write_text(str(kills))
    return (f"Your lab reached its memory limit ({limit} MiB) and the system ended one of its processes to stay "
            f"under it ({kills - before} time{'s' if kills - before > 1 else ''} since you were last told): a kernel "
            "that died, or a broker or Spark process that stopped. Restart the kernel (Kernel > Restart Kernel) and "
            "run the notebook again; close notebooks you are not using (File > Close and Shut Down Notebook) to free "
            "memory, and tell the instructor if it happens again.")


def install(shell=None, info: Path = INFO) -> bool:
    """Show :func:`notice` at the top of the next cell's output whenever there is one (an IPython ``pre_run_cell``
    hook on ``shell``, default IPython's running shell), if ``info`` exists (on the hub). Returns whether it was
    installed. Never raises."""
    if not info.exists():
        return False
    if shell is None and "IPython" in sys.modules:
        shell = sys.modules["IPython"].get_ipython()
    if shell is None:
        return False
    told = Path(os.environ.get("LABKIT_HOME", Path.home() / ".labkit")) / "lab" / TOLD

    def before_cell(*_args) -> None:
        if (text := notice(info, told)):
            print(text, file=sys.stderr)

    shell.events.register("pre_run_cell", before_cell)
    return True
