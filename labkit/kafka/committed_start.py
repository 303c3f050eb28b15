"""Start every newly assigned partition at its committed offset, even when librdkafka would not.

A KIP-447 consumer (``isolation.level=read_committed``) asks the group coordinator for a partition's
committed offset with ``require_stable``: while a transaction holding offsets for it is open, the
coordinator answers ``UNSTABLE_OFFSET_COMMIT`` (offset -1) and the client retries. librdkafka 2.16
(``rd_kafka_assignment_apply_offsets`` in ``rdkafka_assignment.c``) stops retrying when the assignment
changed while that OffsetFetch was in flight, puts the partition back as pending *with the -1*, and
starts it as if there were no committed offset: at ``auto.offset.reset`` (offset 0 here). The
processor then redoes, and commits again, everything committed before. The lab's soak met it (a
processor SIGKILLed with a transaction open, its partitions moving while that transaction was still
open); notebook 08's part 5 (:func:`labkit.lessons.broker_crashes.start_below_committed`, checked by its claims
cell) reproduces it with the lab's group protocol (KIP-848); the classic protocol showed it too when the member kept
the partition through the rebalance.

:class:`CommittedStart` is the guard the processor role uses: it remembers which partitions were newly
assigned and, before the first records of one are processed, asks ``Consumer.committed()`` (which
waits for the open transaction). Records below the committed offset are dropped
and the consumer seeks to it; an ``offset_reset`` event records each correction.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

#: How long one ``committed()`` may wait for an open transaction before the records are put back (s).
COMMITTED_TIMEOUT_S = 5.0


class CommittedStart:
    """Guards one subscribed consumer of ``loop``'s topic (see the module docstring).

    Args:
        loop: the participant's :class:`labkit.crashlab.loop.Loop` (its ``call`` deadline, its history).
        consumer: a group consumer; pass :meth:`callbacks` to its ``subscribe()``.
    """

    def __init__(self, loop, consumer: Consumer) -> None:
        self.loop, self.consumer = loop, consumer
        self.unchecked: set[tuple[str, int]] = set()

    def callbacks(self) -> dict:
        """``on_assign``/``on_revoke``/``on_lost`` for ``Consumer.subscribe`` (the client still assigns
        and unassigns as without them)."""
        return {"on_assign": self._assigned, "on_revoke": self._revoked, "on_lost": self._revoked}

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.unchecked |= {(tp.topic, tp.partition) for tp in partitions}

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.unchecked -= {(tp.topic, tp.partition) for tp in partitions}

    def admit(self, msgs: list[Message]) -> list[Message]:
        """The records of ``msgs`` (without errors) that start where the group's committed offset says.

        For each partition not yet checked since its assignment: ``committed()`` under the lab's deadline;
        records below the committed offset are dropped and the consumer seeks to it (an ``offset_reset``
        event: ``offset`` the committed offset, ``last_offset`` the offset the client started at). If the
        committed offset is not known yet (a transaction still open past :data:`COMMITTED_TIMEOUT_S`), the
        partition's records are put back (seek to the first) and checked again on the next batch."""
        good = [m for m in msgs if not m.error()]
        first: dict[tuple[str, int], int] = {}
        for m in good:
            key = (m.topic(), m.partition())
            if key in self.unchecked:
                first[key] = min(first.get(key, m.offset()), m.offset())
        dropped: set[tuple[str, int]] = set()
        for key, offset in first.items():
            start = self._committed(*key)
            if start is None or start > offset:
                dropped.add(key)
                self._seek(key, offset if start is None else start)
                if start is not None:
                    self.loop.log("offset_reset", topic=key[0], partition=key[1], offset=start, last_offset=offset,
                                  error=f"the client started partition {key[1]} at offset {offset} (auto.offset.reset)"
                                        f" although the committed offset is {start}: sought to {start}")
            if start is not None:
                self.unchecked.discard(key)
        return [m for m in good if (m.topic(), m.partition()) not in dropped]

    def _committed(self, topic: str, partition: int) -> int | None:
        """The committed offset (0 if none), or None while it cannot be read."""
        try:
            [tp] = self.loop.call("committed", lambda timeout_s: self.consumer.committed(
                [TopicPartition(topic, partition)], timeout=timeout_s), timeout_s=COMMITTED_TIMEOUT_S)
        except KafkaException:
            return None
        if tp.error:
            return None
        return max(tp.offset, 0)

    def _seek(self, key: tuple[str, int], offset: int) -> None:
        try:
            self.consumer.seek(TopicPartition(key[0], key[1], offset))
        except KafkaException:  # revoked meanwhile: its new owner starts it
            self.unchecked.discard(key)
