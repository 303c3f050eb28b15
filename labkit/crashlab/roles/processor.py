"""The processor role: consume-transform-produce, exactly-once (KIP-447) or at-least-once.

Each input record ``v`` gives one output ``v>stage`` (:func:`labkit.core.history.derived_id`) on the same partition
of ``output_topic``. Transactional (default): outputs and input offsets commit in one transaction. Otherwise
outputs are produced, then the consumer commits the offsets.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from labkit.crashlab.loop import (GROUP_OPTIONS, IdleClock, Loop, close_consumer, end_with, ending, error_name,
                                  group_consumer, init_transactions, log_consumed)
from labkit.core.history import derived_id
from labkit.crashlab.registry import CLIENTS, REQUIRED, Option, Role
from labkit.kafka.committed_start import CommittedStart
from labkit.kafka.records import caught_up


#: The processor's clients (its transactional producer and its consumer) do not re-bootstrap when every broker
#: is down: librdkafka's re-bootstrap leaves its cached coordinator on the dead connection, and the first
#: coordinator request after a broker restart (``send_offsets_to_transaction``; a consumer's offset commit or
#: group heartbeat) then hangs until another connection changes state (librdkafka issues 5456 and 5511;
#: :func:`labkit.crashlab.broker_restart.broker_restart_in_transaction`). A spec's ``config`` overrides it
#: (``{"metadata.recovery.strategy": "rebootstrap"}``: librdkafka's default).
_NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}


def run(loop: Loop) -> None:
    """Consume-transform-produce. ``transactional`` (default): KIP-447, outputs and input offsets
    commit in one transaction (``send_offsets_to_transaction`` with ``consumer_group_metadata()``).
    Otherwise at-least-once: outputs are produced, then the consumer commits the offsets. A fatal error of either
    client ends the loop as fenced, for a supervisor to restart it (:func:`_end_if_fatal`)."""
    s = loop.spec
    transactional = s["transactional"]
    consumer = group_consumer(loop, **_NO_REBOOTSTRAP)
    guard = CommittedStart(loop, consumer)  # librdkafka may start a partition below its committed offset
    consumer.subscribe([s["topic"]], **guard.callbacks())
    producer = Producer(loop.client_config(**(_NO_REBOOTSTRAP | {"transactional.id": s["transactional_id"]}
                                              if transactional else {})))
    if transactional:
        init_transactions(loop, producer)
    idle = IdleClock(loop, consumer)
    pending: dict = {}  # at-least-once offsets not committed yet
    returned: dict[int, int] = {}  # partition -> the offset after the last record the consumer returned
    try:
        while not idle.done():
            batch = consumer.consume(s["batch"], 0.5)
            _end_if_fatal(loop, batch)
            msgs = log_consumed(loop, guard.admit(batch), s["isolation_level"])
            returned.update((m.partition(), m.offset() + 1) for m in msgs)
            if msgs:
                _process(loop, consumer, producer, msgs, transactional, pending)
                idle.reset()  # idle from the end of the last batch: a slow one is not idleness
            elif pending:
                _commit(loop, consumer, pending)
            elif s["stop_when_caught_up"] and _group_done(loop, consumer, returned):
                break
    finally:
        close_consumer(consumer)


def _group_done(loop: Loop, consumer: Consumer, returned: dict[int, int]) -> bool:
    """Whether the processor's group has consumed and committed its whole input
    (:func:`labkit.kafka.records.caught_up`), asked when a poll returned nothing and no commit is pending, under the
    lab's deadline (1 s per request): the processor stops as soon as the work is done instead of after ``idle_ms`` of
    silence. The consumer's positions on its own partitions (``position()``, local: librdkafka's moves past the control
    records it skips, e.g. the COMMIT marker a transactional input ends with) and ``returned`` (the offset after the
    last record it returned, by partition) let such a partition count too, its committed offset below the marker; a
    partition another member holds counts once committed up to its high watermark (its position is that member's)."""
    s = loop.spec
    positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
    return loop.call("caught_up", lambda t: caught_up(s["bootstrap"], s["group_id"], s["topic"], t,
                                                      positions=positions, returned=returned), timeout_s=1)


def _end_if_fatal(loop: Loop, batch: list) -> None:
    """End the loop if the consumer of ``loop`` hit a fatal error: it comes as an error message of ``consume()``, code
    _FATAL (its ``fatal()`` says False in confluent-kafka 2.16), the cause in its text only (the producer's is raised
    by its calls: :meth:`Loop.flush`, :meth:`Loop.commit`). Such a client is done; only a new instance (a
    supervisor's restart) carries on.

    Raises:
        Fenced: the cause is a fencing (FENCED_INSTANCE_ID: another member took this one's ``group.instance.id``,
            KIP-345), after a ``fenced`` event naming it (:func:`~labkit.crashlab.loop.error_name`).
        Failed: any other cause (e.g. GROUP_ID_NOT_FOUND, met after a broker restart), after a ``failed`` event.
    """
    err = next((m.error() for m in batch if m.error() is not None
                and (m.error().fatal() or m.error().code() == KafkaError._FATAL)), None)
    if err is not None:
        print(f"consumer's fatal error: {err.str()}", file=sys.stderr)  # the text, beside the name in the history
        end_with(loop, error_name(err), txn=loop.txn or None, step="consume")


def _process(loop: Loop, consumer: Consumer, producer: Producer, msgs: list, transactional: bool,
             pending: dict) -> None:
    """One iteration of :func:`run`: the outputs of ``msgs``, then their offsets (in the transaction,
    or added to ``pending`` and committed by the consumer after the outputs, :func:`_commit`)."""
    s = loop.spec
    loop.iteration += 1
    if transactional:
        producer.begin_transaction()
        loop.txn += 1
        loop.log("txn_begin", txn=loop.txn, transactional_id=s["transactional_id"])
    loop.step("after_poll")
    for m in msgs:
        time.sleep(s["per_record_ms"] / 1000)  # "processing" the record
        loop.send(producer, s["output_topic"], m.partition(), [derived_id(m.value().decode(), s["stage"])])
    loop.flush(producer)
    loop.step("after_produce")
    offsets = [TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in msgs]
    if transactional:
        _send_offsets(loop, producer, consumer, offsets)
        loop.commit(producer)
        return
    pending.update({(o.topic, o.partition): o for o in offsets})
    if _commit(loop, consumer, pending):
        loop.step("after_commit")


#: Offset commit errors worth another try (the causes of the Java consumer's RetriableCommitFailedException): the
#: group coordinator moving or loading, e.g. after a broker restart.
_RETRIABLE_COMMIT = frozenset({KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                               KafkaError.NOT_COORDINATOR, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT,
                               KafkaError._TIMED_OUT})


def _commit(loop: Loop, consumer: Consumer, pending: dict) -> bool:
    """At-least-once: commit ``pending`` (``(topic, partition) -> TopicPartition`` of the next offset to process)
    under the lab's deadline (a commit stuck on a dead coordinator is "stalled"), as an ``offsets_committed`` event
    with the error if it failed. A retriable error (:data:`_RETRIABLE_COMMIT`) keeps the offsets for the next try, on
    the next loop iteration even if no record comes: librdkafka answers a synchronous commit with e.g.
    COORDINATOR_LOAD_IN_PROGRESS where Kafka's Java ``commitSync`` retries, and the last batch's offsets would
    never be committed. Returns whether the commit succeeded."""
    try:
        loop.call("commit", lambda _timeout_s: consumer.commit(offsets=list(pending.values()), asynchronous=False))
    except KafkaException as exc:
        loop.log("offsets_committed", topic=loop.spec["topic"], error=exc.args[0].name(), definite=True)
        if exc.args[0].code() not in _RETRIABLE_COMMIT:
            pending.clear()
        return False
    pending.clear()
    loop.log("offsets_committed", topic=loop.spec["topic"], definite=True)
    return True


def _send_offsets(loop: Loop, producer: Producer, consumer: Consumer, offsets: list) -> None:
    """``send_offsets_to_transaction``; the group coordinator rejects a zombie's (KIP-447). A spec's
    ``offsets_step`` (``{"source", "name"}``: a learner's function ``name(producer, consumer, offsets)``, notebook
    02's exercise) runs in its place, under the same deadline. On a Kafka error the transaction is aborted unless the
    producer's error is fatal (librdkafka: ``abort_transaction`` after any abortable or retriable error; the coordinator
    aborts it anyway after ``transaction.timeout.ms``), and the loop ends.

    Raises:
        Fenced: a fencing (:data:`~labkit.crashlab.loop.FENCED_ERRORS`: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION ... once
            the group moved on, KIP-447; the producer's _FENCED), after a ``fenced`` event naming it.
        Failed: any other error (e.g. _TIMED_OUT, COORDINATOR_NOT_AVAILABLE: not a fencing), after a ``failed``
            event naming it.
    """
    step = loop.spec["offsets_step"]
    if step:
        namespace: dict = {}
        exec(step["source"], namespace)  # noqa: S102: the learner's own cell, run in the learner's own process
        call = ("your " + step["name"], lambda _timeout_s: namespace[step["name"]](producer, consumer, offsets))
    else:
        call = ("send_offsets_to_transaction", lambda timeout_s: producer.send_offsets_to_transaction(
            offsets, consumer.consumer_group_metadata(), timeout_s))
    try:
        loop.call(*call)
    except KafkaException as exc:
        err = exc.args[0]
        end = ending(loop, err.name(), txn=loop.txn, step=call[0])
        if not err.fatal():  # an abort that fails too ends the loop with its own error (run.py records it)
            loop.call("abort_transaction", producer.abort_transaction)
            loop.log("txn_end", txn=loop.txn, outcome="aborted", definite=True)
        raise end from exc
    loop.log("offsets_sent", topic=loop.spec["topic"], txn=loop.txn)
    loop.step("after_send_offsets")


def _check(options: dict, _crash_at: str | None) -> None:
    if options.get("transactional", True) and not options.get("transactional_id"):
        raise ValueError("a transactional processor needs transactional_id (or transactional=False)")


ROLE = Role(
    name="processor",
    steps=("after_poll", "after_produce", "after_send_offsets", "before_commit", "after_commit"),
    options={
        **GROUP_OPTIONS,
        "output_topic": Option(REQUIRED, str, "where the outputs go"),
        "transactional": Option(True, bool, "True: KIP-447, outputs and offsets in one transaction; False: "
                                "at-least-once, outputs then the offset commit"),
        "transactional_id": Option(None, (str, type(None)), "transactional.id, when transactional"),
        "per_record_ms": Option(0, int, "processing time per record, before its output is produced (ms)"),
        "stop_when_caught_up": Option(True, bool, "stop, before idle_ms, once the group has committed every input "
                                      "partition up to its high watermark, or up to the control records (transaction "
                                      "markers) before it that this consumer skipped; False: only idle_ms or a stop "
                                      "ends it"),
        "stage": Option("out", str, "the output's suffix: input 'v' gives output 'v>stage'"),
        "rebalance_listener": Option(True, bool, "subscribe with a ConsumerRebalanceListener (it does nothing): a "
                                     "member fenced while paused then waits for the loop's next poll before it "
                                     "rejoins; False: it rejoins at once and the zombie's batch commits with the new "
                                     "member epoch (KAFKA-20191)", clients=("java",)),
        "offsets_step": Option(None, (dict, type(None)), "{'source', 'name'}: a learner's function "
                               "name(producer, consumer, offsets) run instead of send_offsets_to_transaction",
                               clients=("librdkafka",)),
    },
    run=run, check=_check, clients=CLIENTS)
