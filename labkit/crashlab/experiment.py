"""One experiment: its history file, topics and participants, and what happened in the end."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.broker.runtime import labkit_home
from labkit.core.history import History
from labkit.crashlab.check import CheckResult, check
from labkit.crashlab.participant import Participant
from labkit.kafka.logbatches import read_log
from labkit.kafka.records import create_topic, high_watermarks, read_topic

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

    def topic(self, label: str, partitions: int = 1, prefix: str = "", config: dict[str, str] | None = None,
              replicas: list[int] | None = None) -> str:
        """Create a fresh topic ``<prefix><experiment>-<label>-<8 hex>`` (``config``: topic configs; ``replicas``:
        the brokers (node ids, preferred leader first) of every partition, see
        :func:`~labkit.kafka.records.create_topic`) and return its name."""
        return create_topic(self.bootstrap, f"{prefix}{self.name}-{label}", partitions=partitions, config=config,
                            replicas=replicas)

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

        The read_committed read is a consumer's (:func:`labkit.kafka.records.read_topic`). The read_uncommitted one is
        the log itself, its record batches fetched at READ_UNCOMMITTED (:func:`labkit.kafka.logbatches.read_log`: what
        a read_uncommitted consumer returns, the control records left out), so each record's event also holds what
        the log says of it: its batch's ``producer_id`` and ``producer_epoch`` (None for a producer without
        idempotence) and, for a transactional record, its transaction's ``outcome`` by the log's own control record
        ("committed", "aborted", or None while none follows). The checker matches an unacknowledged write by them.

        Args:
            timeout_s: deadline of each read (s).
        Raises:
            TimeoutError: a read_committed read was held back by a transaction still open.
            labkit.core.errors.TopicNotFoundError: a topic does not exist.
        """
        for topic in topics:
            committed = read_topic(self.bootstrap, topic, "read_committed", timeout_s)
            self._record_final_read(topic, "read_committed", {
                "partition": committed.partition.tolist(), "offset": committed.offset.tolist(),
                "value_id": committed.value.tolist()})
            rows = {"partition": [], "offset": [], "value_id": [], "producer_id": [], "producer_epoch": [],
                    "outcome": []}
            for partition in sorted(high_watermarks(self.bootstrap, topic, timeout_s)):
                log = read_log(self.bootstrap, topic, partition, timeout_s=timeout_s)
                data = log[~log.control]
                idempotent = (data.producer_id >= 0).tolist()
                rows["partition"] += [partition] * len(data)
                rows["offset"] += data.offset.tolist()
                rows["value_id"] += data.value.tolist()
                rows["producer_id"] += [p if i else None for p, i in zip(data.producer_id.tolist(), idempotent)]
                rows["producer_epoch"] += [e if i else None for e, i in zip(data.producer_epoch.tolist(), idempotent)]
                rows["outcome"] += data.outcome.tolist()
            self._record_final_read(topic, "read_uncommitted", rows)

    def _record_final_read(self, topic: str, level: str, columns: dict[str, list]) -> None:
        """One ``final_read`` event per record (one history line for all of them), then the one that marks the read
        done."""
        columns["mono_ns"] = [time.monotonic_ns()] * len(columns["offset"])
        self.history.append_batch("final_read", "lab", columns, topic=topic, isolation_level=level)
        self.history.append("final_read", "lab", topic=topic, isolation_level=level)

    def check(self, output_topic: str, input_topic: str | None = None) -> CheckResult:
        """Run :func:`labkit.crashlab.check.check` on the history (record :meth:`final_reads` first)."""
        return check(self.history.events(), output_topic=output_topic, input_topic=input_topic)
