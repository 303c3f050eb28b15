"""A Kafka client as an OS process a learner can crash, pause, resume, stop and restart.

``crash()`` is SIGKILL (no flush, no close: the broker sees a dead client); ``pause()`` /
``resume()`` are SIGSTOP / SIGCONT (a stop-the-world pause, like a long GC: heartbeats stop too).
Each participant is the leader of its own process group and every signal goes to the whole group, so
the JVM a Spark driver starts is killed, stopped and resumed with it. No participant process outlives the
kernel that started it (atexit, and Linux's parent-death signal), and re-creating a participant of the same
name (re-running a cell) first kills the old process.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from labkit.crashlab.loop import EXIT_FENCED, EXIT_GAVE_UP
from labkit.crashlab import java
from labkit.crashlab.registry import CLIENTS, Role, load
from labkit.errors import LabkitError
from labkit.history import History
from labkit.waiting import wait_until
from labkit.procs import die_with_parent, process_state

#: The last started participant of each (experiment, name): an experiment is its history's folder and name without
#: the run id (``<name>-<8 hex>.jsonl``), so a re-run notebook cell, which makes a new run of the same experiment,
#: replaces the process the last run left, and two experiments can run participants of the same name side by side.
_LIVE: dict[tuple[str, str], "Participant"] = {}


class ParticipantStateError(LabkitError):
    """An action does not fit the participant's status (e.g. ``pause()`` on a crashed participant)."""


@atexit.register
def _kill_all() -> None:
    for participant in list(_LIVE.values()):
        participant._signal(signal.SIGKILL)


def default_client(role: Role) -> str:
    """The client a participant of ``role`` runs on when none is given: ``$LABKIT_CLIENT`` if the role has it, else
    the role's first.

    Raises:
        ValueError: ``$LABKIT_CLIENT`` is not one of :data:`CLIENTS`.
    """
    wanted = os.environ.get("LABKIT_CLIENT") or role.clients[0]
    if wanted not in CLIENTS:
        raise ValueError(f"LABKIT_CLIENT={wanted!r} is not a client labkit has: set it to one of {', '.join(CLIENTS)}"
                         f", or unset it")
    return wanted if wanted in role.clients else role.clients[0]


def _command(client: str) -> list[str]:
    """The command that runs a participant on ``client``, before its spec (JSON)."""
    return java.command() if client == "java" else [sys.executable, "-m", "labkit.crashlab.run"]


class Participant:
    """One role running in its own process.

    Args:
        name: unique name in the experiment, e.g. "producer-1"; it writes ``"<name>-<n>"`` value ids.
        role: a role's name: "producer", "consumer", "processor" (:mod:`labkit.crashlab.roles`),
            "share_consumer" (KIP-932, :mod:`labkit.share.roles.share_consumer`), "spark_pipeline" (a Structured
            Streaming query, :mod:`labkit.spark.roles.spark_pipeline`), or the dotted path of a module defining
            ``ROLE`` (:mod:`labkit.crashlab.registry`).
        history: the experiment's :class:`~labkit.history.History`.
        bootstrap: broker address, "host:port".
        crash_at: a step of the role's loop where the process SIGKILLs itself, or ``None``.
        crash_iteration: crash only on this iteration (1-based; a Spark pipeline's iteration is the
            micro-batch id, from 0); ``None``: the first time the step is reached.
        client: the client the role runs on, one of :data:`labkit.crashlab.registry.CLIENTS`: "librdkafka"
            (confluent-kafka, a Python process) or "java" (Kafka's own Java client of the running release, a JVM:
            :mod:`labkit.crashlab.java`); default ``$LABKIT_CLIENT`` where the role has that client, else the role's
            first (librdkafka).
        **options: the role's settings: its module's ``ROLE.options`` and :data:`labkit.crashlab.registry.COMMON`
            (``topic``, ``config``, ``sleep_at``, ``call_deadline_ms``), each with its type, unit and default.
    Raises:
        ValueError: unknown role or client, ``crash_at`` is not a step of the role, or an option is unknown, not
            on this client, of the wrong type or missing (the message names the valid ones).
        JavaError, MavenError: a Java participant without a JDK 17+ or the Kafka jars (:func:`java.compiled`).
    """

    def __init__(self, name: str, role: str, *, history: History, bootstrap: str, crash_at: str | None = None,
                 crash_iteration: int | None = None, client: str | None = None, **options: object) -> None:
        self.role_def = load(role)
        self.name, self.role, self.history = name, role, history
        client = client or default_client(self.role_def)
        self.spec = {"name": name, "role": role, "history": str(history.path), "bootstrap": bootstrap,
                     "crash_at": crash_at, "crash_iteration": crash_iteration, "client": client,
                     **self.role_def.spec(options, crash_at, client)}
        self._command = _command(client)
        self._options = dict(options)
        self._proc: subprocess.Popen | None = None
        self._paused = False
        self._stopped = False
        # a new process and its cleared flags are swapped in together, and status reads them together: a
        # supervisor's thread starts the participant while the notebook's or a panel's reads its status
        self._swap = threading.Lock()

    # -- actions ----------------------------------------------------------------------------
    def start(self) -> "Participant":
        """Start the process. Raises :class:`ParticipantStateError` if it already runs."""
        if self._alive():
            raise ParticipantStateError(f"{self.name} is already {self.status}; stop() or crash() it first.")
        old = _LIVE.get(self._live_key)
        if old is not None and old is not self and old._alive():  # a re-run cell: the old process goes
            old._signal(signal.SIGKILL)
            old._proc.wait()
        if self._proc is not None:  # a restart: its transactions are numbered on from the last run's
            self.spec["last_txn"] = max((e.txn for e in self.history.events() if e.participant == self.name
                                         and e.txn), default=0)
        self.history.append("start", self.name)
        with open(self.stderr_log, "ab") as err:
            proc = subprocess.Popen([*self._command, json.dumps(self.spec)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    preexec_fn=die_with_parent, process_group=0)
        with self._swap:
            self._proc, self._paused, self._stopped = proc, False, False
        _LIVE[self._live_key] = self
        return self

    def crash(self) -> None:
        """SIGKILL the process (also when paused). Raises :class:`ParticipantStateError` if not running."""
        self._require_alive("crash()")
        self.history.append("crash", self.name)
        self._signal(signal.SIGKILL)
        self._proc.wait()

    def pause(self) -> None:
        """SIGSTOP the process; returns once it is stopped. Raises :class:`ParticipantStateError`
        unless it is running."""
        self._require_alive("pause()")
        if self._paused:
            raise ParticipantStateError(f"{self.name} is already paused; resume() it.")
        self._signal(signal.SIGSTOP)
        wait_until(lambda: process_state(self._proc.pid) in ("T", "t", ""), 5, 0.01)  # delivery is async
        self._paused = True
        self.history.append("pause", self.name)

    def resume(self) -> None:
        """SIGCONT the process. Raises :class:`ParticipantStateError` unless it is paused."""
        if not self._paused or not self._alive():
            raise ParticipantStateError(f"{self.name} is {self.status}, not paused: nothing to resume.")
        self._signal(signal.SIGCONT)
        self._paused = False
        self.history.append("resume", self.name)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the loop to finish its iteration and close its clients (SIGTERM); SIGKILL after
        ``timeout_s`` seconds. Does nothing if the process has already ended."""
        if not self._alive():
            return
        if self._paused:
            self.resume()
        self._stopped = True
        self._signal(signal.SIGTERM, group=False)  # the loop stops its own children (a Spark driver its JVM)
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._proc.wait()

    def restart(self, **changes: object) -> "Participant":
        """Stop the process if it runs, then start it again with the same settings; ``changes``
        override some (e.g. ``crash_at=None`` so it does not crash again, ``first=11``, ``client="java"``).

        Raises:
            ValueError: a change the role does not take (see the class), checked before anything stops.
        """
        own = {k: changes.pop(k, self.spec[k]) for k in ("bootstrap", "crash_at", "crash_iteration", "client")}
        spec = self.role_def.spec({**self._options, **changes}, own["crash_at"], own["client"])
        command = _command(own["client"])
        self.stop()
        self._options.update(changes)
        self.spec.update(spec, **own)
        self._command = command
        return self.start()

    def wait(self, timeout_s: float = 60.0) -> str:
        """Wait until the process ends; returns its :attr:`status`.

        Raises:
            TimeoutError: still running after ``timeout_s`` seconds.
        """
        if self._proc is None:
            raise ParticipantStateError(f"{self.name} was never started.")
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.name} is still {self.status} after {timeout_s:g} s") from None
        return self.status

    # -- state ------------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """"not started", "running", "stalled" (running, but stuck in a client call past the lab's deadline:
        :attr:`stalled_in` names it), "paused", "crashed", "fenced", "gave up" (ended before it had anything to do:
        no partition assigned within ``assignment_timeout_ms``, a share consumer's first record not within
        ``first_ms``; its ``gave_up`` event says which), "stopped" or "finished"."""
        with self._swap:
            proc, paused, stopped = self._proc, self._paused, self._stopped
        if proc is None:
            return "not started"
        code = proc.poll()
        if code is None:
            return "paused" if paused else "stalled" if self.stalled_in else "running"
        if code == EXIT_FENCED:
            return "fenced"
        if code == EXIT_GAVE_UP:
            return "gave up"
        if code == 0:
            return "stopped" if stopped else "finished"
        return "crashed"

    @property
    def stalled_in(self) -> str | None:
        """The client call the running process is stuck in past the lab's deadline (its last event is a
        ``stalled`` one), else ``None``."""
        if not self._alive():
            return None
        last = next((e for e in reversed(self.history.events()) if e.participant == self.name), None)
        return last.step if last is not None and last.kind == "stalled" else None

    @property
    def stderr_log(self) -> Path:
        """Where the process's stderr goes: ``<history stem>.<name>.stderr.log`` beside the history."""
        return self.history.path.with_name(f"{self.history.path.stem}.{self.name}.stderr.log")

    @property
    def pid(self) -> int | None:
        """OS process id while the process exists, else ``None``."""
        return self._proc.pid if self._alive() else None

    def counters(self) -> dict[str, int]:
        """Live counts from the history, by the role's ``counters`` (label to event kind; "committed" and
        "aborted" count transactions by outcome), e.g. a producer's sent, acked, consumed, committed, aborted, a
        share consumer's delivered, ack_committed (acknowledgements whose commit returned) and effects."""
        c = Counter()
        for e in self.history.events():
            if e.participant != self.name:
                continue
            c[e.kind] += 1
            if e.kind == "txn_end" and e.outcome:
                c[e.outcome] += 1
        return {label: c[kind] for label, kind in self.role_def.counters}

    def __repr__(self) -> str:
        return f"Participant({self.name!r}, {self.role}, {self.spec['client']}, {self.status})"

    # -- helpers ----------------------------------------------------------------------------
    @property
    def _live_key(self) -> tuple[str, str]:
        return str(self.history.path.parent / self.history.path.stem.rsplit("-", 1)[0]), self.name

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _require_alive(self, action: str) -> None:
        if not self._alive():
            raise ParticipantStateError(f"{action}: {self.name} is {self.status}; restart() it first.")

    def _signal(self, sig: int, group: bool = True) -> None:
        if self._alive():  # the whole process group: a Spark driver's JVM goes (or stops) with it
            (os.killpg if group else os.kill)(self._proc.pid, sig)
