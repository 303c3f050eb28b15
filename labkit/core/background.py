"""Run periodic work in a background thread.

What a sampler, a supervisor, a live figure and a panel share."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Periodic:
    """Calls ``work()`` every ``interval_s`` seconds in a daemon thread named ``name``, from :meth:`start`
    until :meth:`stop`.

    Args:
        name: the thread's name (shown in tracebacks and thread dumps).
        work: one round of the work; its result is ignored.
        interval_s: seconds from the end of one round to the start of the next.
        first_now: run the first round at once (else ``interval_s`` seconds after :meth:`start`).
        last_round: run one more round when :meth:`stop` is called (e.g. a last sample).

    An exception from ``work`` ends the thread: it is reported when it happens, by :func:`threading.excepthook`
    (printed to stderr, as for any thread), kept in :attr:`error` and raised again by :meth:`stop`.
    """

    def __init__(self, name: str, work: Callable[[], object], interval_s: float, *, first_now: bool = True,
                 last_round: bool = False) -> None:
        self.name, self.work, self.interval_s = name, work, interval_s
        self.first_now, self.last_round = first_now, last_round
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread (again, after :meth:`stop`).

        Raises:
            RuntimeError: it is already running.
        """
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self._stop.clear()
        self.error = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.name)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the thread to end (after its last round, with ``last_round``) and wait at most ``timeout_s``
        seconds for it. Nothing to wait for if it was never started.

        Raises:
            TimeoutError: the thread still runs after ``timeout_s`` seconds (a round is stuck; the thread ends
                when that round returns).
            Exception: what ``work`` raised, if that ended the thread.
        """
        self._stop.set()
        if self._thread is None:
            return
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"{self.name} still running {timeout_s:g} s after it was asked to stop")
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            if self.first_now:
                self.work()
            while not self._stop.wait(self.interval_s):
                self.work()
            if self.last_round:
                self.work()
        except BaseException as exc:
            self.error = exc
            raise
