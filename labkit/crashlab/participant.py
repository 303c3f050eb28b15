"""A Kafka client as an OS process a learner can crash, pause, resume, stop and restart.

``crash()`` is SIGKILL (no flush, no close: the broker sees a dead client); ``pause()`` /
``resume()`` are SIGSTOP / SIGCONT (a stop-the-world pause, like a long GC: heartbeats stop too).
A participant's :attr:`~Participant.status` says what happened, not what the lab asked for: "paused" is the OS's
state of the process (psutil), "crashed" a death by a signal, "fenced" and "failed: <error>" what the process
recorded in the history before it exited with its code (:mod:`labkit.crashlab.loop`).
Each participant is the leader of its own process group and every signal goes to the whole group, so
the JVM a Spark driver starts is killed, stopped and resumed with it. No participant process outlives the
kernel that started it (atexit, and Linux's parent-death signal), and a re-run notebook cell's participant first
kills the process the cell's last run left (the same cell, experiment and name: never another cell's).
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

import psutil

from labkit.core.errors import LabkitError
from labkit.core.history import History
from labkit.core.procs import os_status, spawn
from labkit.core.waiting import wait_until
from labkit.crashlab import java
from labkit.crashlab.cell import current_cell
from labkit.crashlab.loop import EXIT_FENCED, EXIT_GAVE_UP
from labkit.crashlab.registry import CLIENTS, Role, load
from labkit.learn import marks

#: The last started participant of each (experiment, name, cell): an experiment is its history's folder and name
#: without the run id (``<name>-<8 hex>.jsonl``) and the cell the one that made the participant
#: (:func:`labkit.crashlab.cell.current_cell`), so a re-run notebook cell, which makes a new run of the same experiment,
#: replaces the process its last run left, while another cell's experiment of the same name (notebook 04's parts 5 and
#: 6 both run a ``spark-B`` driver) runs on. Made outside a cell (a script, a test), a participant replaces none.
_LIVE: dict[tuple[str, str, str], "Participant"] = {}


class ParticipantStateError(LabkitError):
    """An action does not fit the participant's status (e.g. ``pause()`` on a crashed participant)."""


@atexit.register
def _kill_all() -> None:
    for participant in list(_LIVE.values()):
        participant._signal(signal.SIGKILL)


#: How long :meth:`Participant.pause` and :meth:`Participant.resume` wait for the OS to report the process stopped, or
#: running again (s): the kernel acts on SIGSTOP when the process is next scheduled, at once on an idle machine.
SIGNAL_DEADLINE_S = 5.0


def _os_stopped(proc: subprocess.Popen) -> bool:
    """Whether the OS reports ``proc`` stopped (:func:`labkit.core.procs.os_status`: Linux's state "T", after SIGSTOP);
    False if the process is gone."""
    return os_status(proc.pid) == psutil.STATUS_STOPPED


def last_error_line(text: str) -> str | None:
    """The last line of a process's stderr ``text`` that says what went wrong: the last line that is not indented
    (a Python traceback's ``File ...`` lines, a Java stack trace's ``at ...``), a Java trace's "... 3 more" or a
    librdkafka log line ("%3|..."): a Python traceback's ``ValueError: ...``, a Java trace's last ``Caused by: ...``.
    ``None`` if there is none."""
    for line in reversed(text.splitlines()):
        if line.strip() and not line[0].isspace() and not line.startswith(("%", "...")):
            return line.strip()
    return None


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


def _role_spec(role: Role, options: dict, crash_at: str | None, client: str) -> dict:
    """``role``'s part of a spec for ``client`` (:meth:`~labkit.crashlab.registry.Role.spec`, which raises what it
    raises), and for the Java participant how it ends (:data:`labkit.crashlab.java.ENDINGS`)."""
    return {**role.spec(options, crash_at, client), **(java.ENDINGS if client == "java" else {})}


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
        history: the experiment's :class:`~labkit.core.history.History`.
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
                     **_role_spec(self.role_def, options, crash_at, client)}
        self._command = _command(client)
        self._cell = current_cell() or f"made outside a cell, {id(self)}"
        self._options = dict(options)
        self._proc: subprocess.Popen | None = None
        self._stopped = False
        self._stderr_from = 0  # the stderr log's size when the process started: what it wrote comes after
        self._failure: tuple[subprocess.Popen, str] | None = None  # (an ended process, why it failed), read once
        self._stall_told: int | None = None  # the stalled event last published as a mark (its mono_ns)
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
        stderr_from = self.stderr_log.stat().st_size if self.stderr_log.exists() else 0
        with open(self.stderr_log, "ab") as err:
            proc = spawn([*self._command, json.dumps(self.spec)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, process_group=0)
        with self._swap:
            self._proc, self._stopped, self._stderr_from = proc, False, stderr_from
        _LIVE[self._live_key] = self
        return self

    def crash(self) -> None:
        """SIGKILL the process (also when paused). Raises :class:`ParticipantStateError` if not running."""
        self._require_alive("crash()")
        self.history.append("crash", self.name)
        self._signal(signal.SIGKILL)
        self._proc.wait()

    def pause(self) -> None:
        """SIGSTOP the process (its whole group); returns once the OS reports it stopped (psutil's
        ``STATUS_STOPPED``), then writes the ``pause`` event.

        Raises:
            ParticipantStateError: it is not running (not started, ended, or already stopped); it ended before it
                stopped; or the OS did not report it stopped within :data:`SIGNAL_DEADLINE_S` seconds (the message
                names the participant, its pid and the state the OS reports).
        """
        self._require_alive("pause()")
        proc = self._proc
        if _os_stopped(proc):
            raise ParticipantStateError(f"{self.name} is already paused; resume() it.")
        self._signal(signal.SIGSTOP)
        # the kernel stops the process when it is next scheduled: wait until the OS says so (or the process ended)
        wait_until(lambda: _os_stopped(proc) or proc.poll() is not None, SIGNAL_DEADLINE_S, 0.01)
        if proc.poll() is not None:
            raise ParticipantStateError(f"pause(): {self.name} ended {self.status} before it stopped.")
        if not _os_stopped(proc):
            raise ParticipantStateError(f"pause(): {self.name} (pid {proc.pid}) did not stop within "
                                        f"{SIGNAL_DEADLINE_S:g} s of SIGSTOP: the OS reports it {os_status(proc.pid)}.")
        self.history.append("pause", self.name)

    def resume(self) -> None:
        """SIGCONT the process (its whole group); returns once the OS no longer reports it stopped, then writes the
        ``resume`` event.

        Raises:
            ParticipantStateError: the OS does not report it stopped (it runs, or it ended), or it is still stopped
                :data:`SIGNAL_DEADLINE_S` seconds after SIGCONT.
        """
        proc = self._proc
        if not self._alive() or not _os_stopped(proc):
            raise ParticipantStateError(f"{self.name} is {self.status}, not paused: nothing to resume.")
        self._signal(signal.SIGCONT)
        if not wait_until(lambda: not _os_stopped(proc), SIGNAL_DEADLINE_S, 0.01):
            raise ParticipantStateError(f"resume(): {self.name} (pid {proc.pid}) is still stopped "
                                        f"{SIGNAL_DEADLINE_S:g} s after SIGCONT.")
        self.history.append("resume", self.name)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the loop to finish its iteration and close its clients (SIGTERM); SIGKILL after
        ``timeout_s`` seconds. Does nothing if the process has already ended."""
        if not self._alive():
            return
        if _os_stopped(self._proc):
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
        spec = _role_spec(self.role_def, {**self._options, **changes}, own["crash_at"], own["client"])
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
        """What the process is, or how it ended, as the OS and the process itself report it (never a flag the lab
        set when it sent a signal):

        - "not started";
        - "running"; "stalled": running, but its last event says it is stuck in a client call past the lab's deadline
          (:attr:`stalled_in` names it); "paused": the OS reports the process stopped (psutil's ``STATUS_STOPPED``,
          after SIGSTOP; a process resumed behind the lab's back is "running" again);
        - "crashed": it died by a signal (a negative exit status from ``waitpid``: :attr:`cause` names it, e.g.
          SIGKILL from :meth:`crash` or a crash point);
        - "fenced": it exited with :data:`~labkit.crashlab.loop.EXIT_FENCED` after a ``fenced`` event: its producer
          epoch or group membership was no longer current (:data:`~labkit.crashlab.loop.FENCED_ERRORS`);
        - "gave up": it exited with :data:`~labkit.crashlab.loop.EXIT_GAVE_UP`: it ended before it had anything to do
          (no partition assigned within ``assignment_timeout_ms``, a share consumer's first record not within
          ``first_ms``; its ``gave_up`` event says which);
        - "failed: <error>": any other non-zero exit (a fatal error that is not a fencing, a bad config, an exception
          of the role): ``<error>`` is Kafka's error name from its first ``failed`` event (e.g. "failed:
          INVALID_TRANSACTION_TIMEOUT"), else the last error line of its stderr (:attr:`stderr_log`), else its exit
          code;
        - "stopped" (exit 0 after :meth:`stop`) or "finished" (exit 0 by itself).
        """
        with self._swap:
            proc, stopped = self._proc, self._stopped
        if proc is None:
            return "not started"
        code = proc.poll()
        if code is None:
            if _os_stopped(proc) and proc.poll() is None:  # polled again: a pid is only ours until it is reaped
                return "paused"
            return "stalled" if self.stalled_in else "running"
        if code < 0:
            return "crashed"
        if code == 0:
            return "stopped" if stopped else "finished"
        if code == EXIT_FENCED:
            return "fenced"
        if code == EXIT_GAVE_UP:
            return "gave up"
        return f"failed: {self._failed(proc)}"

    @property
    def returncode(self) -> int | None:
        """The process's exit status as the OS reported it (``waitpid``, :attr:`subprocess.Popen.returncode`):
        ``None`` while it runs (or before it started); ``-N``: killed by signal N (e.g. -9, SIGKILL); else its exit
        code (0, :data:`~labkit.crashlab.loop.EXIT_FENCED`, :data:`~labkit.crashlab.loop.EXIT_GAVE_UP`,
        :data:`~labkit.crashlab.loop.EXIT_FAILED`, 1 for an error before its loop began)."""
        with self._swap:
            proc = self._proc
        return None if proc is None else proc.poll()

    @property
    def cause(self) -> str | None:
        """Why the process ended, if it did not end well: the signal that killed a "crashed" one ("SIGKILL"); Kafka's
        error name from the first ``fenced`` event of a "fenced" one (e.g. "PRODUCER_FENCED", librdkafka's
        "_FENCED"), the reason in the ``gave_up`` event of one that gave up, the error of a "failed" one
        (:attr:`status`); else ``None``."""
        code = self.returncode
        if code is None or code == 0:
            return None
        if code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        kind = {EXIT_FENCED: "fenced", EXIT_GAVE_UP: "gave_up"}.get(code)
        if kind is None:
            return self.status.removeprefix("failed: ")
        event = self._first_event(kind)
        return event.error if event is not None else None

    @property
    def stalled_in(self) -> str | None:
        """The client call the running process is stuck in past the lab's deadline (its last event is a
        ``stalled`` one), else ``None``. The first read that finds a stalled event publishes the mark
        ``("participant", "stalled")`` (:mod:`labkit.learn.marks`), once per event."""
        if not self._alive():
            return None
        last = next((e for e in reversed(self.history.events()) if e.participant == self.name), None)
        if last is None or last.kind != "stalled":
            return None
        with self._swap:  # told once per stalled event, however many threads read the status
            told, self._stall_told = self._stall_told, last.mono_ns
        if told != last.mono_ns:
            marks.publish(marks.PARTICIPANT, "stalled")  # labkit.learn.marks: the workshop hub's live view hears it
        return last.step

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
    def _first_event(self, kind: str):
        """This participant's first event of ``kind`` since its last ``start`` event (its current process's: the error
        that ended it, not what it met on the way out, e.g. an abort that failed too), or ``None``."""
        found = None
        for e in self.history.events():
            if e.participant != self.name:
                continue
            if e.kind == "start":
                found = None
            elif e.kind == kind and found is None:
                found = e
        return found

    def _failed(self, proc: subprocess.Popen) -> str:
        """Why the ended process ``proc`` failed (see :attr:`status`), worked out once per process."""
        failure = self._failure
        if failure is not None and failure[0] is proc:
            return failure[1]
        event = self._first_event("failed")
        why = event.error if event is not None and event.error else None
        if why is None:
            try:
                with open(self.stderr_log, "rb") as f:
                    f.seek(self._stderr_from)
                    why = last_error_line(f.read().decode(errors="replace"))
            except OSError:
                why = None
        why = why or f"exit code {proc.returncode}"
        self._failure = (proc, why)
        return why

    @property
    def _live_key(self) -> tuple[str, str, str]:
        return str(self.history.path.parent / self.history.path.stem.rsplit("-", 1)[0]), self.name, self._cell

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _require_alive(self, action: str) -> None:
        if not self._alive():
            raise ParticipantStateError(f"{action}: {self.name} is {self.status}; restart() it first.")

    def _signal(self, sig: int, group: bool = True) -> None:
        if self._alive():  # the whole process group: a Spark driver's JVM goes (or stops) with it
            (os.killpg if group else os.kill)(self._proc.pid, sig)
