"""One experiment: its history file, topics and participants, and what happened in the end."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.broker.runtime import labkit_home
from labkit.crashlab.check import CheckResult, check
from labkit.history import History
from labkit.crashlab.participant import Participant
from labkit.kafka.records import create_topic, read_topic

if TYPE_CHECKING:
    from labkit.broker import EmbeddedBroker


class Experiment:
    """A named experiment against the broker at ``bootstrap``.

    Args:
        name: short label, used in the history file name (``<name>-<8 hex>.jsonl``) and topic names.
        bootstrap: broker address, "host:port" (e.g. from :func:`labkit.connect`).
        folder: where the history goes; default ``$LABKIT_HOME/experiments``.
    """

    def __init__(self, name: str, bootstrap: str, folder: str | Path | None = None) -> None:
        self.name, self.bootstrap = name, bootstrap
        self.run_id = uuid.uuid4().hex[:8]
        folder = Path(folder) if folder else labkit_home() / "experiments"
        self.history = History(folder / f"{name}-{self.run_id}.jsonl")
        self.participants: dict[str, Participant] = {}

    def topic(self, label: str, partitions: int = 1, prefix: str = "", config: dict[str, str] | None = None) -> str:
        """Create a fresh topic ``<prefix><experiment>-<label>-<8 hex>`` (``config``: topic configs)
        and return its name."""
        return create_topic(self.bootstrap, f"{prefix}{self.name}-{label}", partitions=partitions, config=config)

    def participant(self, name: str, role: str, **options: object) -> Participant:
        """Make (not start) a :class:`Participant` writing to this experiment's history.
        ``bootstrap`` defaults to the experiment's (pass a proxy's address to put it behind one)."""
        options.setdefault("bootstrap", self.bootstrap)
        p = Participant(name, role, history=self.history, **options)
        self.participants[name] = p
        return p

    def stop_all(self) -> None:
        """Gracefully stop every participant still running (paused ones are resumed first)."""
        for p in self.participants.values():
            p.stop()

    def restart_broker(self, broker: "EmbeddedBroker", down_s: float = 1.0) -> int:
        """kill -9 ``broker`` (an :class:`~labkit.broker.EmbeddedBroker`), start it again ``down_s`` seconds later
        (same data, same ports) and record both in the history (``crash`` and ``start`` of participant
        "broker"). Returns the monotonic time (ns) at which the broker was ready again.

        Raises:
            BrokerStateError: the broker is not running.
            BrokerNotReadyError, BrokerExitedError: it did not come back (the message holds its log).
        """
        broker.kill()
        self.history.append("crash", "broker")
        time.sleep(down_s)
        broker.start()
        self.history.append("start", "broker")
        return time.monotonic_ns()

    def final_reads(self, *topics: str, timeout_s: float = 30.0) -> None:
        """Read each topic to its end at read_committed and at read_uncommitted and record what
        each saw as ``final_read`` events (one per record, plus one that marks the read done).

        Raises:
            TimeoutError: a read_committed read was held back by a transaction still open.
        """
        for topic in topics:
            for level in ("read_committed", "read_uncommitted"):
                for row in read_topic(self.bootstrap, topic, level, timeout_s).itertuples():
                    self.history.append("final_read", "lab", topic=topic, partition=row.partition,
                                        offset=row.offset, value_id=row.value, isolation_level=level)
                self.history.append("final_read", "lab", topic=topic, isolation_level=level)

    def check(self, output_topic: str, input_topic: str | None = None) -> CheckResult:
        """Run :func:`labkit.crashlab.check.check` on the history (record :meth:`final_reads` first)."""
        return check(self.history.events(), output_topic=output_topic, input_topic=input_topic)
