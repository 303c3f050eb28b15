"""Which notebook cell is running: what tells a re-run cell from another cell (:class:`labkit.crashlab.Participant`
replaces the process a re-run cell's last run left, and only that one).

A Jupyter kernel runs a cell as an ``execute_request`` (the Jupyter messaging protocol); ipykernel keeps the request
it is serving (``Kernel.get_parent("shell")``, which a thread the cell started also sees). JupyterLab sends the cell's
id in the request's metadata (``cellId``: stable while the cell is edited and re-run); a client that sends none (nbval,
jupyter_client's ``execute``) is told apart by the cell's source, so a re-run of the same source is the same cell.
"""

from __future__ import annotations

import hashlib
import sys


def current_cell() -> str | None:
    """The cell the running kernel is executing: ``"cell <cellId>"`` (JupyterLab's id) or ``"source <sha1 of the
    code>"``; ``None`` outside an IPython kernel, or while the kernel serves something that is not a cell (a widget's
    button press arrives as a ``comm_msg``). Never raises."""
    ipython = sys.modules.get("IPython")
    kernel = getattr(ipython.get_ipython(), "kernel", None) if ipython is not None else None
    if kernel is None:
        return None
    parent = kernel.get_parent("shell") or {}
    if parent.get("header", {}).get("msg_type") != "execute_request":
        return None
    cell_id = (parent.get("metadata") or {}).get("cellId")
    if cell_id:
        return f"cell {cell_id}"
    code = (parent.get("content") or {}).get("code")
    return None if code is None else "source " + hashlib.sha1(code.encode()).hexdigest()
