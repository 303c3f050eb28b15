"""The broker's side of a share group, sampled into the experiment's history while it runs (KIP-932).

Every ``interval_s`` seconds a background thread records, as history events
(:mod:`labkit.core.history`):

* ``share_state``: each new ``__share_group_state`` record of the group and topic, one event per
  state batch (what the share coordinator persisted: AVAILABLE / ACKNOWLEDGED / ARCHIVING / ARCHIVED
  with delivery counts; ACQUIRED is never persisted), timed by the record's own timestamp (when the
  broker wrote it, converted to the history's monotonic clock), not by when it was read;
* ``share_offsets``: the SPSO and lag of each share partition (DescribeShareGroupOffsets), when they change;
* ``share_assignment``: which member (by client id, i.e. participant name) holds which partition
  (ShareGroupDescribe), when it changes.

Decoding and requests are in :mod:`labkit.kafka.share_state`.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from labkit.broker.probe import KAFKA_LOG
from labkit.core.background import Periodic
from labkit.core.errors import LabkitError
from labkit.core.history import History
from labkit.core.waiting import Deadline
from labkit.kafka.share_state import STATE_TOPIC, decode_state_record, describe_share_group, describe_share_group_offsets


class ShareObserver:
    """Samples ``group_id``'s share partitions of ``topic`` into ``history`` (participant "broker").

    Args:
        bootstrap: broker address, "host:port".
        history: the experiment's history.
        group_id, topic: the share group and the topic it consumes.
        interval_s: seconds between samples.
    Use as a context manager, or :meth:`start` / :meth:`stop`. :attr:`last_error` holds the last
    request error (e.g. the group does not exist yet); sampling goes on after one.
    """

    def __init__(self, bootstrap: str, history: History, group_id: str, topic: str, interval_s: float = 0.5) -> None:
        self.bootstrap, self.history, self.group_id, self.topic = bootstrap, history, group_id, topic
        self.interval_s = interval_s
        self.topic_id: str | None = None
        self.last_error: str | None = None
        self.samples = 0
        self._reader: Consumer | None = None
        self._last_offsets: dict[int, tuple] = {}
        self._last_assignment: set[tuple] | None = None
        self._thread = Periodic("labkit-share-observer", self.sample, interval_s, last_round=True)

    @classmethod
    def started_for(cls, exp, topic: str, group_id: str, interval_s: float = 0.3) -> "ShareObserver":
        """Start an observer of ``group_id`` on ``topic`` into the experiment ``exp``'s history.

        Args:
            exp: a :class:`~labkit.crashlab.experiment.Experiment` (its ``bootstrap`` and ``history``).
            topic, group_id: the topic and the share group (the group may not exist yet).
            interval_s: seconds between samples.
        Raises:
            RuntimeError: see :meth:`start`.
        """
        return cls(exp.bootstrap, exp.history, group_id, topic, interval_s=interval_s).start()

    def settle(self, seconds: float = 1.5) -> None:
        """Wait ``seconds`` for the last persisted states to be sampled, then :meth:`stop`.

        Raises:
            see :meth:`stop`.
        """
        time.sleep(seconds)
        self.stop()

    def start(self) -> "ShareObserver":
        """Start sampling in the background (a first sample at once).

        Raises:
            RuntimeError: already sampling.
        """
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """One last sample, then stop (waits at most ``timeout_s`` seconds for the thread).

        Raises:
            TimeoutError: a sample still runs after ``timeout_s`` seconds.
            Exception: what ended the sampling thread (an error other than a request's, which is :attr:`last_error`).
        """
        try:
            self._thread.stop(timeout_s)
        finally:
            if self._reader is not None and not self._thread.running:
                self._reader.close()

    def __enter__(self) -> "ShareObserver":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sample(self) -> None:
        """Take one sample now (what the thread does every ``interval_s``); each of its three parts
        is tried on its own, so one failing request does not hide the others."""
        errors = []
        for part in (self._offsets, self._assignment, self._state_records):
            try:
                part()
            except LabkitError as exc:
                errors.append(str(exc))
        self.last_error = "; ".join(errors) or None
        self.samples += 1

    def _offsets(self) -> None:
        for row in describe_share_group_offsets(self.bootstrap, self.group_id):
            if row["topic"] != self.topic or row["error"]:
                continue
            self.topic_id = row["topic_id"]
            now = (row["start_offset"], row["lag"])
            if self._last_offsets.get(row["partition"]) != now:
                self._last_offsets[row["partition"]] = now
                self.history.append("share_offsets", "broker", topic=self.topic, partition=row["partition"],
                                    offset=row["start_offset"], lag=row["lag"])

    def _assignment(self) -> None:
        group = describe_share_group(self.bootstrap, self.group_id)
        held = {(m["client_id"], m["member_id"], p) for m in group["members"]
                for p in m["assignment"].get(self.topic, [])}
        if held != self._last_assignment:
            self._last_assignment = held
            for client_id, member_id, partition in sorted(held):
                self.history.append("share_assignment", client_id, topic=self.topic, partition=partition,
                                    member_id=member_id)

    def _state_records(self) -> None:
        if self.topic_id is None:
            return
        if self._reader is None:
            reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"labkit-observer-{self.group_id}",
                               "enable.auto.commit": False, "logger": KAFKA_LOG})
            meta = reader.list_topics(STATE_TOPIC, timeout=5).topics.get(STATE_TOPIC)
            if meta is None or meta.error is not None:
                reader.close()
                return
            reader.assign([TopicPartition(STATE_TOPIC, p, OFFSET_BEGINNING) for p in meta.partitions])
            self._reader = reader
        deadline = Deadline(self.interval_s)
        while not deadline.expired():
            msgs = self._reader.consume(500, 0.05)
            if not msgs:
                break
            for m in msgs:
                if m.error() or m.key() is None:
                    continue
                record = decode_state_record(m.key(), m.value())
                if record.group_id != self.group_id or record.topic_id != self.topic_id or not record.batches:
                    continue
                b = record.batches
                written_ns = time.monotonic_ns() - (time.time_ns() - m.timestamp()[1] * 1_000_000)
                self.history.append_batch("share_state", "broker", {
                    "mono_ns": [written_ns] * len(b), "offset": [x.first_offset for x in b], "last_offset": [x.last_offset for x in b],
                    "state": [x.state for x in b], "delivery_count": [x.delivery_count for x in b]},
                    topic=self.topic, partition=record.partition)
