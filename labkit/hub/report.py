"""An attendee's kernel reporting to the instructor's live view (:mod:`labkit.hub.liveview`): each exercise check's
outcome, the notebook's claims mark, a prediction locked in before the run, a participant seen stalled and the
kernel's own state (busy, idle, its latest cell raised), with the attendee's own hub API token, never slowing or
breaking the learner's cell.

Active only in an IPython kernel on the workshop hub: ``import labkit`` calls :func:`install`, which does nothing
unless the hub's spawner set :data:`URL_ENV` (the live view's address, ``Spawner.environment``) and the single-user
server passed its ``JUPYTERHUB_API_TOKEN`` (:data:`TOKEN_ENV`) to its kernels, and an IPython shell runs this
process (a participant or a Spark process importing labkit reports nothing). Then the reporter hears:

* the **marks** the lab publishes where it observes them (:mod:`labkit.learn.marks`, subscribed to; the kinds of
  :data:`labkit.learn.marks.REPORTED`): an exercise check's ``unanswered``, ``wrong``, ``right`` or ``error`` (the check
  raised: the lab's failure, not the answer; :func:`labkit.learn.exercise.marked`), a prediction's choice key (published
  only for a choice locked in before the notebook's first experiment: :func:`labkit.learn.predictions.lock_in`) and a
  participant's ``stalled`` (its own stalled event in its history,
  :attr:`labkit.crashlab.participant.Participant.stalled_in`). The lab knows nothing of this module.
* the **start and end of every cell** (IPython's ``pre_run_cell`` and ``post_run_cell`` events, which the kernel
  fires around each execution it runs), for the kernel's state (:meth:`Reporter.kernel`): ``busy`` when a cell
  starts (and at :func:`install`, which runs inside a cell), ``idle`` when it ended, ``raised`` when it ended by
  raising (``ExecutionResult.success`` false: the run failed at that cell, an interrupt included). The service keeps
  the time each came, so the live view shows since when the kernel is busy or idle. Reported by the kernel rather
  than read from the attendee's Jupyter Server (``/api/kernels``'s ``execution_state`` and ``last_activity``): the
  server's ``last_activity`` moves with every output message, so it does not say since when a cell runs, and reading
  it would need the ``access:servers`` scope, which opens every attendee's server (files, terminals, kernels) to the
  service. What it cannot say: a kernel that died in a cell (an OOM kill) sends no end, so it stays ``busy``, which
  the live view flags as stuck after :data:`labkit.hub.page.STUCK_S`; beside the lab's memory and OOM kills.
* the **end of every cell** (an IPython ``post_run_cell`` hook), for the notebook's claims mark: each cell's end
  goes to the kernel's :class:`labkit.learn.claims.Run` (the cell told apart by JupyterLab's cell id,
  ``ExecutionInfo.cell_id``, else by its source), with what it raised and whether the claims line
  (``labkit.claims_hold(...)``, its ``("claims", "held")`` mark heard during the cell) ran; the mark it returns is
  reported: ``failed`` or ``error`` as soon as any assertion cell fails, ``held`` only when the claims line ran and no
  assertion cell of the kernel's latest run failed.
* the **notebook** is the two digits its file name starts with, from ``JPY_SESSION_NAME`` (:data:`SESSION_ENV`:
  Jupyter Server's ``SessionManager.get_kernel_env`` gives each kernel its notebook's path); a kernel of another
  file (a console, ``scratch.ipynb``) reports nothing.

Why an observer registry rather than reading each cell's result: a check's verdict is heard however the cell shows it
(or stores it), a check that raised is told from any other failing cell, and a held claims mark comes from the claims
line having run, not from a cell's text.

Reports go from a daemon thread through a bounded queue (:data:`QUEUE_SIZE`; a full queue drops the newest), each a POST
with a :data:`DEADLINE_S` deadline (the kernel's state is not queued per cell: the latest one waits in one slot, so a
Run All of many short cells sends its latest state and never fills the queue); a failure is logged once per kernel to
the kernel's own stderr (the hub's log, not the learner's cell) and never raised. Stdlib only (``urllib``), so ``import
labkit`` pays nothing more.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import sys
import threading

from labkit.learn import marks
from labkit.learn.claims import Run

#: The live view's address (``http://127.0.0.1:<port>/services/liveview/``), set by the hub for attendees only.
URL_ENV = "LABKIT_LIVEVIEW_URL"
#: The attendee's own hub API token (JupyterHub's, in the single-user server's environment and its kernels').
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
#: The kernel's notebook path (Jupyter Server 2, ``SessionManager.get_kernel_env``).
SESSION_ENV = "JPY_SESSION_NAME"
#: Each report's deadline, in seconds (connect, and each read).
DEADLINE_S = 2.0
#: Reports waiting to be sent, at most.
QUEUE_SIZE = 64

LOG = logging.getLogger("labkit.hub.report")
LOG.propagate = False  # never into the learner's cell
LOG.addHandler(logging.StreamHandler(sys.__stderr__))  # the kernel's own stderr: the hub's log

_reporter: Reporter | None = None


def notebook_of(path: str | None) -> str | None:
    """The two digits the file name of ``path`` starts with (``".../00_tour.ipynb"`` -> ``"00"``), else ``None``."""
    match = re.match(r"(\d\d)_.*\.ipynb$", os.path.basename(path or ""))
    return match.group(1) if match else None


def send(url: str, token: str, report: dict, timeout_s: float = DEADLINE_S) -> int:
    """POST ``report`` (JSON) to ``<url>api/report`` with ``Authorization: token <token>``; returns the HTTP status.

    Raises:
        OSError: no answer within ``timeout_s`` seconds, or the address refuses (``urllib.error.URLError``).
    """
    import urllib.error  # here: ``import labkit`` off the hub pays nothing for it
    import urllib.request

    request = urllib.request.Request(f"{url.rstrip('/')}/api/report", data=json.dumps(report).encode(),
                                     method="POST", headers={"Authorization": f"token {token}",
                                                             "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


class Reporter:
    """Sends one kernel's reports to the live view at ``url`` with ``token``, from a daemon thread."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.sent = 0  # reports the service accepted (tests read it)
        self._queue: queue.Queue[dict] = queue.Queue(QUEUE_SIZE)
        self._warned = False
        self._claims = Run()  # this kernel's assertion cells: the claims mark
        self._claims_line_ran = False  # in the running cell
        self._kernel: dict | None = None  # the kernel's latest state not sent yet (one slot, :meth:`kernel`)
        self._kernel_lock = threading.Lock()
        threading.Thread(target=self._run, name="labkit-liveview-report", daemon=True).start()

    def heard(self, kind: str, state: str) -> None:
        """The observer :func:`install` subscribes to :mod:`labkit.learn.marks`: a mark of a kind the live view is told
        of (:data:`labkit.learn.marks.REPORTED`) is reported (:meth:`put`), but a claims line's ``held``, which waits
        for its cell's end (:meth:`after_cell`); an experiment's start is not reported. Never blocks."""
        if kind == "claims":
            self._claims_line_ran = True
        elif kind in marks.REPORTED:
            self.put(kind, state)

    def put(self, kind: str, state: str) -> None:
        """Queue a report of the mark ``(kind, state)`` (:func:`labkit.learn.marks.valid`: a state of
        :data:`labkit.learn.marks.STATES`, or a prediction's choice key) for this kernel's notebook;
        nothing if the kernel has none (:func:`notebook_of`) or the queue is full. Never blocks."""
        notebook = notebook_of(os.environ.get(SESSION_ENV))
        if notebook is not None:
            try:
                self._queue.put_nowait({"notebook": notebook, "kind": kind, "state": state})
            except queue.Full:
                self._warn("its queue is full (the live view does not answer): a report was dropped")

    def kernel(self, state: str) -> None:
        """Report the kernel's state (``"busy"``, ``"idle"`` or ``"raised"``: :data:`labkit.learn.marks.STATES`): it
        replaces a state not sent yet, and is queued only when none waits, so the latest state always reaches the
        service. Never blocks."""
        notebook = notebook_of(os.environ.get(SESSION_ENV))
        if notebook is None:
            return
        with self._kernel_lock:
            waiting, self._kernel = self._kernel is not None, {"notebook": notebook, "kind": marks.KERNEL,
                                                              "state": state}
        if not waiting:
            try:
                self._queue.put_nowait({"kind": marks.KERNEL})  # the slot's turn: _run sends its state then
            except queue.Full:
                with self._kernel_lock:
                    self._kernel = None
                self._warn("its queue is full (the live view does not answer): a report was dropped")

    def before_cell(self, info=None) -> None:
        """IPython's ``pre_run_cell`` hook (``info``: IPython's ``ExecutionInfo``): the kernel is busy."""
        self.kernel("busy")

    def after_cell(self, result) -> None:
        """IPython's ``post_run_cell`` hook (``result``: IPython's ``ExecutionResult``): tell the kernel's
        :class:`labkit.learn.claims.Run` of the cell's end and report the claims mark it returns, if any, then the
        kernel's state: ``idle``, or ``raised`` if the cell raised."""
        source = getattr(result.info, "raw_cell", "") or ""
        cell = getattr(result.info, "cell_id", None) or f"source {source}"
        raised = None if result.success else (result.error_in_exec or result.error_before_exec or RuntimeError())
        ran, self._claims_line_ran = self._claims_line_ran, False
        if (state := self._claims.cell_ended(cell, source, raised, ran)) is not None:
            self.put("claims", state)
        self.kernel("idle" if raised is None else "raised")

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            LOG.warning("labkit: reports to the instructor's live view (%s) fail: %s; further failures not logged",
                        self.url, why)

    def _run(self) -> None:
        while True:
            report = self._queue.get()
            if report == {"kind": marks.KERNEL}:
                with self._kernel_lock:
                    report, self._kernel = self._kernel, None
                if report is None:
                    continue
            try:
                status = send(self.url, self.token, report)
            except OSError as exc:
                self._warn(str(exc))
                continue
            if status == 204:
                self.sent += 1
            else:
                self._warn(f"HTTP {status} for {report}")


def install(shell=None) -> Reporter | None:
    """Start reporting from this kernel (the module docstring): subscribe to :mod:`labkit.learn.marks`, register the
    ``pre_run_cell`` and ``post_run_cell`` hooks on ``shell`` (default: IPython's running shell) and report the kernel
    busy (it runs the cell importing labkit), once per process. Returns the reporter, or
    ``None`` when not in a hub kernel (no :data:`URL_ENV` or :data:`TOKEN_ENV`, or no IPython shell). Never raises."""
    global _reporter
    url, token = os.environ.get(URL_ENV), os.environ.get(TOKEN_ENV)
    if _reporter is not None or not url or not token:
        return _reporter
    if shell is None and "IPython" in sys.modules:
        shell = sys.modules["IPython"].get_ipython()
    if shell is None:
        return None
    _reporter = Reporter(url, token)
    marks.subscribe(_reporter.heard)
    shell.events.register("pre_run_cell", _reporter.before_cell)
    shell.events.register("post_run_cell", _reporter.after_cell)
    _reporter.kernel("busy")
    return _reporter
