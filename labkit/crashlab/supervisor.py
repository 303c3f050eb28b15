"""A supervisor that restarts participants, the way a process manager runs a production EOS application
(systemd's ``Restart=on-failure`` with ``RestartSec`` and a start limit; Kubernetes' restart policy with its
crash-loop back-off).

On a fatal or fenced error a participant closes its clients and exits; a crashed one is simply gone; a
stalled one (a client call past the lab's deadline, :meth:`labkit.crashlab.loop.Loop.call`) is SIGKILLed
first, as a watchdog would. The supervisor starts it again after a back-off that doubles on each restart, up to
a limit. The new instance's ``init_transactions`` fences every older producer epoch of its
``transactional.id`` and ends the transaction the old one left open (KIP-98; the coordinator aborts an
Ongoing transaction and completes one in PrepareCommit): the new instance writes that to the history as a
``txn_init`` event and a ``txn_end`` for the old transaction.

Each restart is a ``restart`` event of the participant (``step``: the status it ended in, e.g. "fenced");
giving up at the limit is a ``stop`` event whose ``error`` says so.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from labkit.core.background import Periodic
from labkit.core.waiting import wait_until
from labkit.crashlab.participant import Participant

#: Statuses the supervisor acts on by default.
RESTART_ON = ("crashed", "fenced", "stalled")


@dataclass(frozen=True)
class RestartPolicy:
    """How one participant is restarted.

    Args:
        on: the statuses that trigger a restart (of "crashed", "fenced", "stalled").
        on_failed: restart a participant whose status is "failed: <error>" too (a non-zero exit that is neither a
            fencing nor a crash, :attr:`Participant.status`), as systemd's ``Restart=on-failure`` restarts any
            non-zero exit: a transient fault (GROUP_ID_NOT_FOUND from a group coordinator still loading after a
            broker restart, a transactional call that timed out) goes with a new instance; a learner's own bug (a bad
            config, an exception in their step) fails again at once, and the supervisor gives up at ``limit``, its
            ``stop`` event naming the status. False: a failed participant is left as it is (settled).
        backoff_ms: wait before the first restart (ms); doubled for each further one.
        max_backoff_ms: the longest wait (ms).
        limit: restarts at most; past it the supervisor gives up on the participant.
        changes: spec changes for the restarted instance; default ``{"crash_at": None}``: the lab's crash
            point was a one-off fault, the restarted process runs without it.
    """

    on: tuple[str, ...] = RESTART_ON
    on_failed: bool = True
    backoff_ms: int = 500
    max_backoff_ms: int = 8000
    limit: int = 5
    changes: dict = field(default_factory=lambda: {"crash_at": None})

    def __post_init__(self) -> None:
        unknown = set(self.on) - set(RESTART_ON)
        if unknown:
            raise ValueError(f"a supervisor restarts on {', '.join(RESTART_ON)}, not {', '.join(sorted(unknown))}")
        if self.limit < 0 or self.backoff_ms < 0 or self.max_backoff_ms < self.backoff_ms:
            raise ValueError("limit and backoff_ms must be >= 0 and max_backoff_ms >= backoff_ms")

    def restarts_on(self, status: str) -> bool:
        """Whether a participant in ``status`` (:attr:`Participant.status`) is restarted by this policy."""
        return status in self.on or (self.on_failed and status.startswith("failed"))

    def backoff_s(self, restart: int) -> float:
        """Seconds to wait before restart number ``restart`` (1-based)."""
        return min(self.backoff_ms * 2 ** (restart - 1), self.max_backoff_ms) / 1000


class Supervisor:
    """Watches participants every ``interval_s`` seconds in a background thread and restarts them by
    their :class:`RestartPolicy`. Use as a context manager, or :meth:`start` / :meth:`stop`.

    Args:
        interval_s: how often statuses are checked (s).

    Its state (policies, restart counts, who it gave up on, restarts due) changes under a lock: in
    :meth:`supervise`, from the notebook's thread, and for a whole :meth:`check_once` round, in the background
    thread; :meth:`settled` reads under it, and :attr:`restarts` and :attr:`gave_up` are copies taken under it. So
    a round is never seen half done (a participant given up on before its ``stop`` event is written, or supervised
    before its restart count exists).
    """

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.policies: dict[str, tuple[Participant, RestartPolicy]] = {}
        self._restarts: dict[str, int] = {}
        self._gave_up: set[str] = set()
        self._due: dict[str, float] = {}  # participant -> monotonic time of its next restart
        self._lock = threading.Lock()
        self._thread = Periodic("labkit-supervisor", self.check_once, interval_s, first_now=False)

    def supervise(self, participant: Participant, policy: RestartPolicy | None = None) -> Participant:
        """Restart ``participant`` by ``policy`` (default :class:`RestartPolicy`) from now on. Returns it."""
        with self._lock:
            self.policies[participant.name] = (participant, policy or RestartPolicy())
            self._restarts.setdefault(participant.name, 0)
        return participant

    @property
    def restarts(self) -> dict[str, int]:
        """Restarts so far per participant (a copy)."""
        with self._lock:
            return dict(self._restarts)

    @property
    def gave_up(self) -> set[str]:
        """The participants given up on at their restart limit (a copy)."""
        with self._lock:
            return set(self._gave_up)

    def start(self) -> "Supervisor":
        """Start watching in the background.

        Raises:
            RuntimeError: already watching.
        """
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop watching; waits at most ``timeout_s`` seconds for the thread. Participants keep running, those this
        thread restarted too: labkit's spawner thread started them (:func:`labkit.core.procs.spawn`), not this one.

        Raises:
            TimeoutError: a check still runs after ``timeout_s`` seconds.
            Exception: what ended the watching thread.
        """
        self._thread.stop(timeout_s)

    def __enter__(self) -> "Supervisor":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def settled(self) -> bool:
        """Whether every supervised participant has ended for good: finished, stopped, gave up, ended in a status its
        policy does not restart (e.g. "failed: ..." with ``on_failed=False``), or given up on."""
        with self._lock:
            return all(name in self._gave_up or name not in self._due and self._ended_for_good(p.status, policy)
                       for name, (p, policy) in self.policies.items())

    @staticmethod
    def _ended_for_good(status: str, policy: RestartPolicy) -> bool:
        return status not in ("running", "paused", "stalled") and not policy.restarts_on(status)

    def wait(self, timeout_s: float = 300.0) -> dict[str, str]:
        """Wait until :meth:`settled`; returns ``{name: status}``.

        Raises:
            TimeoutError: not settled within ``timeout_s`` seconds (the message gives each status).
        """
        if not wait_until(self.settled, timeout_s, self.interval_s):
            restarts = self.restarts
            raise TimeoutError(f"supervised participants not settled within {timeout_s:g} s: " + ", ".join(
                f"{name} {p.status} after {restarts[name]} restarts" for name, (p, _) in self.policies.items()))
        return {name: p.status for name, (p, _) in self.policies.items()}

    def check_once(self) -> None:
        """Act on every supervised participant's status now (the background thread calls this), under the lock."""
        with self._lock:
            now = time.monotonic()
            for name, (p, policy) in self.policies.items():
                self._check(name, p, policy, now)

    def _check(self, name: str, p: Participant, policy: RestartPolicy, now: float) -> None:
        """Act on one participant's status (the caller holds the lock)."""
        if name in self._gave_up:
            return
        status = p.status
        if name in self._due:
            if now >= self._due[name]:
                del self._due[name]
                if status not in ("running", "paused", "stalled"):  # not already restarted by hand
                    p.start()
            return
        if not policy.restarts_on(status):
            return
        if status == "stalled":
            p.crash()  # a watchdog's kill: the process cannot be trusted to come back
        if self._restarts[name] >= policy.limit:
            self._gave_up.add(name)
            p.history.append("stop", name, error=f"supervisor gave up: restart limit {policy.limit} reached; "
                                                f"{name} {status}")
            return
        self._restarts[name] += 1
        wait_s = policy.backoff_s(self._restarts[name])
        p.history.append("restart", name, step=status,
                         error=f"restart {self._restarts[name]} of at most {policy.limit}, in {wait_s:g} s")
        p.spec.update(policy.changes)
        self._due[name] = now + wait_s
