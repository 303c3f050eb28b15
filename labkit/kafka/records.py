"""Write and read records on the real broker: topics with unique names, plain and transactional
produce, and full reads of a topic at an ``isolation.level`` (KIP-98)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import NewTopic

from labkit.broker.probe import KAFKA_LOG, admin
from labkit.core.errors import TopicNotFoundError
from labkit.core.waiting import Deadline, wait_for, wait_until
from labkit.kafka.ledger import record_created_topic
from labkit.learn import marks

if TYPE_CHECKING:
    import pandas as pd

READ_COLUMNS = ["partition", "offset", "key", "value"]


def create_topic(bootstrap: str, prefix: str = "lab", *, partitions: int = 1, timeout_s: float = 10.0,
                 config: dict[str, str] | None = None, replicas: list[int] | None = None) -> str:
    """Create a topic named ``<prefix>-<8 hex chars>`` (unique per run, so re-running a notebook
    never reads an earlier run's records) with ``partitions`` partitions, and return once every
    partition has a leader; it is entered in the lab's ledger (:mod:`labkit.kafka.ledger`), which makes it a topic
    ``make reset`` deletes. ``config``: topic configs, e.g. ``{"cleanup.policy": "compact"}``.
    The replication factor is the broker's ``default.replication.factor`` (1 on the lab's single
    broker, N on an :class:`~labkit.broker.multinode.EmbeddedCluster` of N brokers), so a topic on a
    cluster survives the loss of one broker; ``replicas`` (node ids, the preferred leader first) places every
    partition on those brokers instead (CreateTopics' replica assignment).

    An experiment starts with its topics: this publishes the mark ``("experiment", "started")``
    (:mod:`labkit.learn.marks`), after which a notebook's prediction is no longer taken as one
    (:mod:`labkit.learn.predictions`).

    Returns:
        The topic name.
    Raises:
        confluent_kafka.KafkaException: the broker refused (e.g. an invalid prefix).
    """
    marks.publish(marks.EXPERIMENT, "started")
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    client = admin(bootstrap)  # keep a reference: the futures fail if the client is collected
    placed = {"replica_assignment": [list(replicas)] * partitions} if replicas else {"replication_factor": -1}
    client.create_topics([NewTopic(name, partitions, config=config or {}, **placed)], request_timeout=timeout_s)[name].result(timeout_s)

    def led() -> bool:  # the controller answered; the partition leaders may not be known yet
        meta = client.list_topics(name, timeout=timeout_s).topics[name]
        return meta.error is None and len(meta.partitions) == partitions and \
            all(p.leader >= 0 and p.error is None for p in meta.partitions.values())

    if not wait_until(led, timeout_s, 0.05):
        raise KafkaException(f"topic {name} was created but its partitions have no leader after {timeout_s:g} s")
    record_created_topic(client.list_topics(name, timeout=timeout_s).cluster_id, name)  # make reset's to delete
    return name


def produce(bootstrap: str, topic: str, values: Iterable[str], *, key: str | None = None,
            transactional_id: str | None = None, outcome: str = "commit", partition: int = 0,
            timeout_s: float = 30.0, wait_marker: bool = False, **config: object) -> "pd.DataFrame":
    """Produce ``values`` (UTF-8 strings) to ``topic``/``partition`` and wait for every ack.

    Args:
        transactional_id: if set, all values go in one transaction of this ``transactional.id``
            (``init_transactions``, ``begin_transaction``, sends, then commit or abort).
        outcome: ``"commit"`` or ``"abort"``: how the transaction ends (ignored without
            ``transactional_id``).
        timeout_s: deadline of each client call and of the marker wait (s).
        wait_marker: also wait until the transaction's COMMIT or ABORT marker is in the partition (its last stable
            offset has reached its high watermark): the coordinator answers EndTxn before it has the partition leader
            write the marker (``TransactionCoordinator``, KIP-98's WriteTxnMarkers), so a next write may otherwise
            take the offset the marker would have had.
        **config: more producer configs (dotted names), e.g. ``{"enable.idempotence": False}``.
    Returns:
        One row per record: partition, offset (as the broker assigned it), key, value.
    Raises:
        ValueError: ``outcome`` is neither "commit" nor "abort".
        confluent_kafka.KafkaException: a send or the transaction failed.
        TimeoutError: ``wait_marker`` and the marker was not written within ``timeout_s``.
    """
    if outcome not in ("commit", "abort"):
        raise ValueError(f"outcome must be 'commit' or 'abort', not {outcome!r}")
    conf = {"bootstrap.servers": bootstrap, "logger": KAFKA_LOG, **config}
    if transactional_id:
        conf["transactional.id"] = transactional_id
    producer, acked, errors = Producer(conf), [], []

    def on_delivery(err, msg):
        if err:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.key() and msg.key().decode(), msg.value().decode()))

    if transactional_id:
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value.encode(), key=key and key.encode(), partition=partition,
                         on_delivery=on_delivery)
    if producer.flush(timeout_s):
        raise KafkaException(f"produce to {topic}: records still unacknowledged after {timeout_s:g} s")
    if errors:
        raise KafkaException(errors[0])
    if transactional_id:
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(timeout_s)
        if wait_marker:
            def marked() -> bool:
                return last_stable_offsets(bootstrap, topic)[partition] == high_watermarks(bootstrap, topic)[partition]

            wait_for(marked, f"the {outcome.upper()} marker of {transactional_id} in {topic}/{partition}", timeout_s,
                     hint="the broker's server.log")
    import pandas as pd  # a participant process (caught_up) goes without it

    return pd.DataFrame(acked, columns=READ_COLUMNS)


def high_watermarks(bootstrap: str, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """High watermark (the offset after the last written record or control record) of every
    partition of ``topic``: ``{partition: offset}``.

    Raises:
        TopicNotFoundError, KafkaException: see :func:`end_offsets`.
    """
    return end_offsets(bootstrap, topic, "read_uncommitted", timeout_s)


def last_stable_offsets(bootstrap: str, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """Last stable offset (LSO: the first offset of the oldest transaction whose marker is not yet written and
    replicated, open or already decided (``ProducerStateManager.firstUnstableOffset``), else the high
    watermark; what a read_committed consumer can read up to) of every partition of ``topic``:
    ``{partition: offset}``.

    Raises:
        TopicNotFoundError, KafkaException: see :func:`end_offsets`.
    """
    return end_offsets(bootstrap, topic, "read_committed", timeout_s)


def end_offsets(bootstrap: str, topic: str, isolation_level: str, timeout_s: float = 10.0) -> dict[int, int]:
    """``{partition: end offset}`` of ``topic`` as a consumer at ``isolation_level`` sees it: the high
    watermark at read_uncommitted, the last stable offset at read_committed (ListOffsets, KIP-98).

    Args:
        timeout_s: for the metadata request and the ListOffsets requests together, s.
    Raises:
        TopicNotFoundError: the broker at ``bootstrap`` has no topic ``topic``.
        KafkaException: the broker reported another error for the topic, or did not answer within ``timeout_s``.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "labkit-watermarks", "logger": KAFKA_LOG,
                         "isolation.level": isolation_level})
    deadline = Deadline(timeout_s)
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
        if meta.error is not None and meta.error.code() in _NO_SUCH_TOPIC:
            raise TopicNotFoundError(f"topic {topic!r} does not exist on the broker at {bootstrap}: check the name "
                                     "(create_topic returns the unique name it gave the topic)")
        if meta.error is not None:
            raise KafkaException(meta.error)
        return {p: _end_offset(consumer, TopicPartition(topic, p), deadline) for p in meta.partitions}
    finally:
        consumer.close()


#: The metadata's error for a topic the broker does not have (librdkafka's own code, or the broker's).
_NO_SUCH_TOPIC = frozenset({KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART})


#: ListOffsets errors of a partition whose leader is moving or not acting yet (a topic just created: the metadata
#: names its leader before that broker serves it as leader), or whose new leader's high watermark has not yet reached
#: where the last leader's ended (OFFSET_NOT_AVAILABLE, Kafka's ``Errors``: "The leader high watermark has not caught
#: up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing", KIP-207; a
#: ``RetriableException``): met after a broker restart under load (notebook 09's ``commit_then_kill``).
_NOT_LEADING_YET = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                              KafkaError.OFFSET_NOT_AVAILABLE})


def _end_offset(consumer: Consumer, tp: TopicPartition, deadline: Deadline) -> int:
    """``get_watermark_offsets(tp)``'s end offset, asked again on :data:`_NOT_LEADING_YET` until ``deadline``;
    raises its KafkaException past it."""
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=max(0.1, deadline.remaining_s()))[1]
        except KafkaException as exc:
            if exc.args[0].code() not in _NOT_LEADING_YET or deadline.expired():
                raise
            time.sleep(0.1)


def read_topic(bootstrap: str, topic: str, isolation_level: str = "read_committed",
               timeout_s: float = 15.0, *, headers: bool = False, raw: bool = False) -> "pd.DataFrame":
    """Read every record of ``topic`` from the beginning to the end as a consumer with
    ``isolation.level=isolation_level`` sees it (``read_committed`` stops at the LSO and skips
    aborted records; both skip control records). No consumer group offsets are committed.

    Returns:
        One row per record seen, ordered by partition and offset: partition, offset, key, value
        (``None`` for a null key or value; text, or with ``raw`` the bytes as stored, e.g. for an internal topic
        such as ``__transaction_state``), and with ``headers`` a ``headers`` column ({name: text}).
    Raises:
        TimeoutError: the end was not reached within ``timeout_s`` (an open transaction holds
            the LSO of a read_committed read back).
        TopicNotFoundError, KafkaException: from :func:`high_watermarks`, before anything is read.
    """
    ends = high_watermarks(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"labkit-read-{uuid.uuid4().hex[:8]}",
                         "isolation.level": isolation_level, "enable.auto.commit": False,
                         "enable.partition.eof": True, "logger": KAFKA_LOG})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    rows, at_end = [], {p for p, end in ends.items() if end == 0}
    deadline = Deadline(timeout_s)
    try:
        while len(at_end) < len(ends):
            if deadline.expired():
                raise TimeoutError(f"{isolation_level} read of {topic} did not reach the end within {timeout_s:g} s "
                                   "(is a transaction still open?)")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= ends[msg.partition()]:
                    at_end.add(msg.partition())
                continue
            key, value = msg.key(), msg.value()
            if not raw:
                key, value = key and key.decode(), value and value.decode()
            row = (msg.partition(), msg.offset(), key, value)
            rows.append(row + ({k: v and v.decode(errors="replace") for k, v in msg.headers() or []},) if headers else row)
    finally:
        consumer.close()
    columns = READ_COLUMNS + ["headers"] if headers else READ_COLUMNS
    import pandas as pd

    return pd.DataFrame(rows, columns=columns).sort_values(["partition", "offset"], ignore_index=True)


def committed_offsets(bootstrap: str, group: str, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """The offsets consumer group ``group`` has committed for each partition of ``topic`` (OffsetFetch:
    offsets committed in a transaction count once it committed): ``{partition: offset}``, negative where the
    group has none (librdkafka's OFFSET_INVALID, -1001).

    Raises:
        KafkaException: the group coordinator did not answer within ``timeout_s`` (e.g. the broker is down).
        TopicNotFoundError: see :func:`high_watermarks`.
    """
    parts = high_watermarks(bootstrap, topic, timeout_s)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in parts])
    client = admin(bootstrap)  # held while the future runs: a collected AdminClient never completes it
    done = client.list_consumer_group_offsets([request], request_timeout=timeout_s)[group].result(timeout_s + 1)
    return {tp.partition: tp.offset for tp in done.topic_partitions}


def caught_up(bootstrap: str, group: str, topic: str, timeout_s: float = 10.0, *,
              positions: dict[int, int] | None = None, returned: dict[int, int] | None = None) -> bool:
    """Whether consumer group ``group`` has consumed and committed every partition of ``topic``:
    :func:`committed_offsets` (an offset committed in a transaction counts once the transaction committed) against
    :func:`high_watermarks`. A partition is done when its committed offset is at its high watermark (an empty
    partition counts as done), or, for a partition of ``positions`` (a member's consumer positions,
    ``{partition: offset}``), when that position is at the high watermark and the committed offset at least
    ``returned``'s (the offset after the last record that member's consumer returned, if it returned any): the
    consumer skipped the rest, control records (a transaction's COMMIT or ABORT marker takes an offset, KIP-98) or
    aborted ones, and a committed offset stops below such a marker. ``False`` while the broker is down or restarting,
    the group coordinator loading or moving, a partition leader not serving yet, or no answer came within
    ``timeout_s`` per request (up to three requests); any other error is raised.

    Args:
        timeout_s: per request, s.
    Raises:
        TopicNotFoundError: ``topic`` does not exist (:func:`high_watermarks`).
        KafkaException: an error of another kind (not one that passes), from the broker or the client.
    """
    positions, returned = positions or {}, returned or {}
    try:
        done = committed_offsets(bootstrap, group, topic, timeout_s)
        ends = high_watermarks(bootstrap, topic, timeout_s)
    except (KafkaException, TimeoutError) as exc:
        if _not_yet(exc):
            return False
        raise
    return all(end == 0 or done[p] >= end
               or (positions.get(p, -1) >= end and done[p] >= returned.get(p, done[p])) for p, end in ends.items())


#: Errors that pass: the broker down or restarting, a group coordinator loading or moving, a leader not serving yet,
#: a request past its timeout.
_TRANSIENT = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
                        KafkaError._WAIT_COORD, KafkaError.REQUEST_TIMED_OUT, KafkaError.NETWORK_EXCEPTION,
                        KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                        KafkaError.NOT_COORDINATOR}) | _NOT_LEADING_YET


def _not_yet(exc: KafkaException | TimeoutError) -> bool:
    """Whether ``exc`` is one that passes: a future's ``result()`` timing out, or a KafkaException whose error is
    retriable or in :data:`_TRANSIENT`."""
    if isinstance(exc, TimeoutError):
        return True
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _TRANSIENT)


def caught_up_in_child(bootstrap: str, group: str, topic: str, timeout_s: float = 30.0) -> bool:
    """Ask :func:`caught_up` from a child process, for at most ``timeout_s`` seconds (False past it).

    For a caller that polls across broker restarts (notebook 08's restarts, the soak's faults): a librdkafka client
    polled across one crashed the polling process once (SIGSEGV in its ``rdk:main`` thread, librdkafka 2.16.0), and
    the caller must outlive the faults it deals.
    """
    child = [sys.executable, "-c", "import sys; from labkit.kafka.records import caught_up; "
             "sys.exit(0 if caught_up(*sys.argv[1:]) else 1)", bootstrap, group, topic]
    try:
        return subprocess.run(child, capture_output=True, timeout=timeout_s).returncode == 0
    except subprocess.TimeoutExpired:
        return False
