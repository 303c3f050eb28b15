"""What every role's loop shares, in its own OS process (``python -m labkit.crashlab.run <spec>``).

Every loop appends what it does to the experiment's history and passes named steps where a learner can crash it (a
role's ``steps``, :mod:`labkit.crashlab.registry`). A crash is a real SIGKILL of this process at that step. SIGTERM asks
the loop to finish its iteration and close its clients (a graceful stop). The roles themselves are modules of their own
(``labkit/*/roles/``). These loops are librdkafka's (confluent-kafka); the same roles on Kafka's Java client are
``jvm/participant/`` (``Loop.java`` is this module's twin; :mod:`labkit.crashlab.java`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from time import monotonic_ns
from typing import NoReturn

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from labkit.core.history import History
from labkit.core.waiting import Deadline
from labkit.crashlab.registry import REQUIRED, Option

#: Exit code of a participant that was fenced: its producer epoch or its group membership is no longer current
#: (:data:`FENCED_ERRORS`, :class:`Fenced`).
EXIT_FENCED = 3
#: Exit code of a participant that gave up waiting for its first assignment, or a share consumer for its first record
#: (:class:`GaveUp`).
EXIT_GAVE_UP = 4
#: Exit code of a participant that met any other error it cannot go on after: a fatal Kafka error that is not a
#: fencing (e.g. INVALID_TRANSACTION_TIMEOUT), a transactional call that failed (a timeout, COORDINATOR_NOT_AVAILABLE),
#: a bad config, an exception of the role's own code; its ``failed`` event names the error (:class:`Failed`).
EXIT_FAILED = 5
#: The errors that mean "fenced": a newer instance owns this one's producer epoch or group membership.
#: Producer (KIP-98): PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (librdkafka raises either as its fatal _FENCED);
#: INVALID_TXN_STATE, the coordinator's answer to an EndTxn for a transaction it already aborted or whose epoch it
#: bumped (a transaction timeout, a new instance's InitProducerId: what Kafka's Java client 4.4 raises from
#: commitTransaction, notebook 03). Group (KIP-447, KIP-345, KIP-848): FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID,
#: ILLEGAL_GENERATION, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH, what the group coordinator answers a member (its
#: TxnOffsetCommit or OffsetCommit) once the group moved on without it. Every other error is a failure
#: (:data:`EXIT_FAILED`). The Java participant gets this set and the exit codes in its spec
#: (:data:`labkit.crashlab.java.ENDINGS`; ``KafkaErrors.fencing`` in ``jvm/participant/``).
FENCED_ERRORS = frozenset({"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED", "INVALID_TXN_STATE",
                           "FENCED_INSTANCE_ID", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH",
                           "FENCED_MEMBER_EPOCH"})
_INDEFINITE = {"_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT"}


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError behind ``exc``, or None. confluent-kafka 2.16 raises a fatal error (e.g. _FENCED) from
    ``flush()`` as a KafkaException, as a SystemError caused by one inside a delivery callback, or as
    the KafkaError object itself, which is not a BaseException (only a bare ``except:`` catches it); when it
    loses the error altogether, :meth:`Loop.call` asks the producer (:func:`fatal_error`)."""
    for candidate in (exc, getattr(exc, "__cause__", None), getattr(exc, "__context__", None)):
        if isinstance(candidate, KafkaError):
            return candidate
        if isinstance(candidate, KafkaException):
            return candidate.args[0]
    return None


#: How long :func:`fatal_error` waits for librdkafka's answer (s); the answer is immediate unless the machine is busy.
FATAL_QUERY_S = 5.0


def fatal_error(producer: Producer) -> KafkaError | None:
    """The fatal error (e.g. _FENCED) ``producer`` has met, or None; for a transactional producer (librdkafka's
    FATAL_ERROR state), None for any other. confluent-kafka 2.16 can lose such an error: it raises it from the call
    serving callbacks (``flush``, ``commit_transaction``), and if a delivery callback runs next in the same call
    (for a message the error purged, _PURGE_QUEUE) and its Python code handles an exception of its own, the fatal
    one is cleared: the call fails with ``SystemError: ... returned NULL without setting an exception``.
    librdkafka still holds it, and every transactional API returns it; ``init_transactions`` is asked, which on
    an initialised producer does nothing (it fails on the state, _STATE), within :data:`FATAL_QUERY_S` seconds: the
    answer comes from librdkafka's main thread, which on a busy machine can take longer than a 0 s timeout allows
    (the call then fails with _TIMED_OUT, and the fatal error would be missed; seen with one core kept busy)."""
    try:
        producer.init_transactions(FATAL_QUERY_S)
    except KafkaException as exc:
        return exc.args[0] if exc.args[0].fatal() else None
    return None


def is_fencing(error: str | None) -> bool:
    """Whether the error named ``error`` (a Kafka error name, as the history keeps it; the Java participant's
    ``CommitFailedException(ILLEGAL_GENERATION)`` form too) is a fencing (:data:`FENCED_ERRORS`)."""
    if not error:
        return False
    inner = error[error.index("(") + 1:error.rindex(")")] if error.endswith(")") and "(" in error else error
    return inner in FENCED_ERRORS


#: librdkafka's description of each error code (``KafkaError(code).str()``) to its name, to name the error behind a
#: consumer's _FATAL error, whose text only quotes the cause's description.
_DESCRIPTIONS = {KafkaError(code).str(): KafkaError(code).name()
                 for code in {getattr(KafkaError, a) for a in dir(KafkaError) if a.lstrip("_").isupper()}
                 if isinstance(code, int) and code not in (KafkaError._FATAL, KafkaError.UNKNOWN)}


def error_name(err: KafkaError) -> str:
    """Kafka's name of ``err``: its own, or for a consumer's fatal error (code _FATAL, which confluent-kafka 2.16 gives
    the application as an error message of ``consume()``, its cause in its text only, e.g. "Fatal consumer error:
    Broker: Static consumer fenced by other consumer with same group.instance.id") the name of the cause (here
    FENCED_INSTANCE_ID), found by librdkafka's description of it; "_FATAL" if none fits."""
    if err.code() != KafkaError._FATAL:
        return err.name()
    text = err.str()
    found = [d for d in _DESCRIPTIONS if d and d in text]
    return _DESCRIPTIONS[max(found, key=len)] if found else err.name()


class Fenced(Exception):
    """The broker fenced this participant (:data:`FENCED_ERRORS`); carries the Kafka error name."""


class Failed(Exception):
    """The participant met an error it cannot go on after that is not a fencing (see :data:`EXIT_FAILED`), after its
    ``failed`` event; carries the error's name (:func:`fail`)."""


def ending(loop: "Loop", error: str, **fields: object) -> Fenced | Failed:
    """The exception that ends the loop over the error named ``error``, after its event: a ``fenced`` event and
    :class:`Fenced` if it is a fencing (:func:`is_fencing`), else a ``failed`` event and :class:`Failed`. ``fields`` go
    into the event (e.g. ``txn``, ``step``: the call that failed)."""
    fenced = is_fencing(error)
    loop.log("fenced" if fenced else "failed", error=error, **fields)
    return (Fenced if fenced else Failed)(error)


def end_with(loop: "Loop", error: str, **fields: object) -> NoReturn:
    """Raise :func:`ending`'s exception (after its event)."""
    raise ending(loop, error, **fields)


class GaveUp(Exception):
    """The loop ended before it had anything to do: no partition was assigned to its consumer (a share consumer: no
    record came) within its deadline; carries why (:func:`give_up`)."""


class Loop:
    """What every role shares: the spec, the history, the steps, the stop flag."""

    def __init__(self, spec: dict) -> None:
        self.spec, self.name = spec, spec["name"]
        self.history = History(spec["history"])
        self.iteration, self.stopping = 0, False
        # transaction numbers go on across restarts (the handle passes the last one), so each
        # (participant, txn) names one transaction
        self.txn = spec.get("last_txn") or 0
        self._topic: str | None = None
        self._sends: list[tuple] = []  # (mono_ns, [value ids], partition) per batch handed over
        self._acks: list[tuple] = []  # (mono_ns, delivered Message): fields read when the batch is written
        self._call: tuple[str, Deadline] | None = None  # (call, the lab's deadline for it)
        signal.signal(signal.SIGTERM, self._on_term)
        threading.Thread(target=self._watchdog, daemon=True, name="labkit-watchdog").start()

    def _on_term(self, *_: object) -> None:
        self.stopping = True

    def call(self, name: str, fn: Callable, *args: object, timeout_s: float = 30.0) -> object:
        """Run the blocking client call ``fn(*args, timeout_s)`` (e.g. ``commit_transaction``) under the lab's
        deadline: the spec's ``call_deadline_ms``, default ``timeout_s`` + 5 s. A call still running past it
        is reported (a ``stalled`` event naming the call, so the participant's status is "stalled") and left
        to return or fail by itself: a client call in C cannot be interrupted safely. Returns ``fn``'s result.
        Raises what ``fn`` raises; a producer method's SystemError that hides a fatal error (:func:`fatal_error`)
        as the KafkaException confluent-kafka meant to raise."""
        deadline_s = (self.spec.get("call_deadline_ms") or (timeout_s + 5) * 1000) / 1000
        self._call = (name, Deadline(deadline_s))
        try:
            return fn(*args, timeout_s)
        except SystemError as exc:  # a producer's fatal error lost by confluent-kafka: raise it as it should have
            producer = getattr(fn, "__self__", None)
            err = kafka_error(exc) or (fatal_error(producer) if isinstance(producer, Producer) else None)
            if err is None:
                raise
            raise KafkaException(err) from exc
        finally:
            self._call = None

    def _watchdog(self) -> None:
        reported = None
        while True:
            time.sleep(0.2)
            call = self._call
            if call and call is not reported and call[1].expired():
                reported = call
                self.log("stalled", step=call[0], error=f"{call[0]} still running past the lab's deadline of "
                                                        f"{call[1].timeout_s:g} s")

    def log(self, kind: str, **fields: object) -> None:
        self.history.append(kind, self.name, **fields)

    def step(self, name: str) -> None:
        """Pass step ``name``: wait there ``sleep_at[name]`` ms if the spec says so (a window for the
        lab to pause the process at that step), and SIGKILL this process here if its crash point says so."""
        hold_ms = self.spec.get("sleep_at", {}).get(name)
        if hold_ms:
            time.sleep(hold_ms / 1000)
        if self.crashes_at(name):
            self.log("crash", step=name)
            if os.getpgid(0) == os.getpid():  # a participant leads its group: its children (a JVM) go too
                os.killpg(0, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)

    def crashes_at(self, name: str) -> bool:
        """Whether the spec's crash point is step ``name`` in the current iteration."""
        return name == self.spec.get("crash_at") and self.spec.get("crash_iteration") in (None, self.iteration)

    def client_config(self, **extra: object) -> dict:
        """A client's configs: the broker, ``extra``, then the spec's ``config`` (which overrides). Every client
        retries a lost broker at least every second (``reconnect.backoff.max.ms``; librdkafka's default, 10 s,
        finds a restarted broker up to 10 s late). No error callback: confluent-kafka 2.16 raises a fatal error
        from the call that meets it instead of calling one, and the rest are transient (librdkafka retries)."""
        return {"bootstrap.servers": self.spec["bootstrap"], "reconnect.backoff.max.ms": 1000, **extra,
                **self.spec.get("config", {})}

    def flush(self, producer: Producer) -> None:
        """Wait for every delivery report.

        Raises:
            Fenced: the producer was fenced (its fatal _FENCED), after a ``fenced`` event with the error.
            Failed: it met another error (a fatal one, e.g. an idempotence sequence error), after a ``failed`` event.
        """
        try:
            self.call("flush", producer.flush)
        except:  # noqa: E722: a fatal error surfaces in several shapes, one not even a BaseException (kafka_error)
            fatal = kafka_error(sys.exc_info()[1])
            if fatal is None:
                raise
            self.write_events()
            end_with(self, fatal.name(), txn=self.txn or None, step="flush")
        self.write_events()

    def send(self, producer: Producer, topic: str, partition: int, vids: list[str], key: str | None = None) -> None:
        """Produce values ``vids`` to ``topic``/``partition``. Their ``send`` events share the time the
        batch was handed to the producer and are buffered until :meth:`flush` writes them."""
        if topic != self._topic:
            self.write_events()
            self._topic = topic
        self._sends.append((monotonic_ns(), vids, partition))
        produce, on_delivery = producer.produce, self.on_delivery
        for vid in vids:
            produce(topic, vid.encode(), key=key, partition=partition, on_delivery=on_delivery)

    def on_delivery(self, err, msg) -> None:
        if err:
            self.write_events()
            self.log("send_failed", topic=msg.topic(), partition=msg.partition(), value_id=msg.value().decode(),
                     txn=self.txn or None, error=err.name(), definite=err.name() not in _INDEFINITE)
        else:  # the hot path: one tuple per record, decoded when the batch is written
            self._acks.append((monotonic_ns(), msg))

    def write_events(self) -> None:
        """Write the buffered send and ack events, one history line each (a batch)."""
        txn = self.txn or None
        if self._sends:
            rows = [(mono, vid, part) for mono, vids, part in self._sends for vid in vids]
            mono, vids, parts = zip(*rows)
            self.history.append_batch("send", self.name, {"mono_ns": mono, "value_id": vids, "partition": parts},
                                      topic=self._topic, txn=txn)
        if self._acks:
            self.history.append_batch("ack", self.name, {"mono_ns": [mono for mono, _ in self._acks],
                                                         "value_id": [m.value().decode() for _, m in self._acks],
                                                         "partition": [m.partition() for _, m in self._acks],
                                                         "offset": [m.offset() for _, m in self._acks]},
                                      topic=self._topic, txn=txn, definite=True)
        self._sends.clear()
        self._acks.clear()

    def commit(self, producer: Producer) -> bool:
        """Commit the open transaction, recording its outcome. Returns whether it committed (False: it failed with an
        abortable error, and was aborted if it had to be: KIP-98, librdkafka's ``txn_requires_abort()``).

        Raises:
            Fenced: the commit met a fencing (:data:`FENCED_ERRORS`: librdkafka's fatal _FENCED), after its event.
            Failed: it met another fatal error, after a ``failed`` event naming it.
        """
        self.step("before_commit")
        self.log("txn_commit_start", txn=self.txn)
        try:
            self.call("commit_transaction", producer.commit_transaction)
            self.log("txn_end", txn=self.txn, outcome="committed", definite=True)
        except KafkaException as exc:
            err = exc.args[0]
            if is_fencing(err.name()) or err.fatal():
                end_with(self, err.name(), txn=self.txn, step="commit_transaction")
            self.log("txn_end", txn=self.txn, outcome=None, error=err.name(), definite=False)
            if err.txn_requires_abort():
                self.call("abort_transaction", producer.abort_transaction)
                self.log("txn_end", txn=self.txn, outcome="aborted", definite=True)
            return False
        self.step("after_commit")
        return True


#: What ``init_transactions`` does to the transaction an older instance left, by the coordinator's state (KIP-98).
_ENDED_BY_INIT = {"Ongoing": "aborted", "PrepareAbort": "aborted", "PrepareCommit": "committed"}


def init_transactions(loop: Loop, producer: Producer) -> None:
    """``init_transactions`` under the lab's deadline. On a restart (the spec carries ``last_txn``) also
    record what it did: the coordinator's state of the ``transactional.id`` before, the new producer epoch
    (every older one is fenced) and, if the old instance's transaction was still open, its end (aborted, or
    committed if it was in PrepareCommit) as a ``txn_end`` of that transaction."""
    restarted = loop.spec.get("last_txn") is not None
    if restarted:
        from labkit.kafka.producers import describe_transaction  # kafka-python: only restarts pay for it

        tid = loop.spec["transactional_id"]
        try:
            before = describe_transaction(loop.spec["bootstrap"], tid)["state"]
        except Exception as exc:  # noqa: BLE001: first run of this transactional.id, or the broker refused
            before = type(exc).__name__
    loop.call("init_transactions", producer.init_transactions)
    if restarted:
        now = describe_transaction(loop.spec["bootstrap"], tid)
        old_txn = loop.spec["last_txn"]
        ended = any(e.kind == "txn_end" and e.outcome and e.participant == loop.name and e.txn == old_txn
                    for e in loop.history.events())
        outcome = None if ended else _ENDED_BY_INIT.get(before)  # else another instance's (a shared id)
        old_txn = old_txn if outcome else None
        loop.log("txn_init", transactional_id=tid, producer_id=now["producer_id"],
                 producer_epoch=now["producer_epoch"], state=before, txn=old_txn, outcome=outcome)
        if outcome:
            loop.log("txn_end", txn=old_txn, outcome=outcome, step="init_transactions", definite=True)


#: The options of a role whose loop has a group consumer (:func:`group_consumer`, :class:`IdleClock`).
GROUP_OPTIONS = {
    "group_id": Option(REQUIRED, str, "the consumer group (group.id)"),
    "group_protocol": Option("consumer", str, "group.protocol: 'consumer' (KIP-848) or 'classic'",
                             ("consumer", "classic")),
    "isolation_level": Option("read_committed", (str, type(None)), "isolation.level (KIP-98); None leaves it unset, "
                              "so the client's own default holds (librdkafka CONFIGURATION.md: read_committed; Kafka's "
                              "ConsumerConfig: read_uncommitted) and consume events carry no isolation_level",
                              ("read_committed", "read_uncommitted", None)),
    "batch": Option(10, int, "records per poll, at most"),
    "idle_ms": Option(10_000, int, "stop after this long without records, counted from the consumer's first "
                      "assignment (ms)"),
    "assignment_timeout_ms": Option(120_000, int, "give up if no partition was assigned this long after the start "
                                    "(ms; a 'gave_up' event says so, the status is 'gave up'): a partition another "
                                    "member holds moves once that member leaves or its session times out "
                                    "(group.consumer.session.timeout.ms, KIP-848; classic: the member's "
                                    "session.timeout.ms)"),
}


def group_consumer(loop: Loop, **extra: object) -> Consumer:
    """A consumer of the spec's ``group_id`` with its ``group_protocol`` and ``isolation_level`` (None: left unset),
    offsets committed by the loop (``enable.auto.commit`` false), starting at the earliest offset; ``extra`` configs
    added."""
    s = loop.spec
    level = {} if s["isolation_level"] is None else {"isolation.level": s["isolation_level"]}
    return Consumer(loop.client_config(**{
        "group.id": s["group_id"], "group.protocol": s["group_protocol"], **level,
        "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra}))


def log_consumed(loop: Loop, msgs: list, level: str) -> list:
    """Record a ``consume`` event per record of ``msgs`` read at isolation ``level``; returns the records (errors
    left out)."""
    good = [m for m in msgs if not m.error()]
    for m in good:
        loop.log("consume", topic=m.topic(), partition=m.partition(), offset=m.offset(),
                 value_id=m.value().decode(), isolation_level=level)
    return good


def give_up(loop: Loop, reason: str) -> NoReturn:
    """End the loop as given up: a ``gave_up`` event with ``reason`` as its error, then :class:`GaveUp` (the process
    exits with :data:`EXIT_GAVE_UP`, the participant's status is "gave up")."""
    loop.log("gave_up", error=reason)
    raise GaveUp(reason)


class IdleClock:
    """When a group consumer's loop ends for want of records: ``idle_ms`` without a record batch, counted from the
    consumer's first assignment (a non-empty ``assignment()``), not from the start. Joining takes a few heartbeats
    (about 4 s for Kafka's Java consumer, KIP-848), and a partition another member holds moves only once that member
    leaves or its session times out. Until then ``assignment_timeout_ms`` from the start bounds the wait."""

    def __init__(self, loop: Loop, consumer: Consumer) -> None:
        self.loop, self.consumer = loop, consumer
        self.started = time.monotonic()
        self.since: float | None = None  # the first assignment or the end of the last batch (time.monotonic(), s)

    def reset(self) -> None:
        """A record batch was handled: the idle time starts again."""
        self.since = time.monotonic()

    def done(self) -> bool:
        """Whether the loop should end: it was asked to stop, or no batch came for ``idle_ms`` since the first
        assignment or the last :meth:`reset`.

        Raises:
            GaveUp: no partition assigned within ``assignment_timeout_ms`` of the start (after its ``gave_up``
                event).
        """
        if self.loop.stopping:
            return True
        now = time.monotonic()
        if self.since is None:
            if not self.consumer.assignment():
                timeout_ms = self.loop.spec["assignment_timeout_ms"]
                if now - self.started > timeout_ms / 1000:
                    give_up(self.loop, f"no partition of {self.loop.spec['topic']} was assigned within "
                                       f"assignment_timeout_ms ({timeout_ms} ms)")
                return False
            self.since = now
        return now - self.since > self.loop.spec["idle_ms"] / 1000


def close_consumer(consumer: Consumer) -> None:
    """Close ``consumer``; a failure (e.g. leaving a group that already fenced this member) goes to stderr, so
    it does not hide why the loop ended (a fence, a crash point, a stop)."""
    try:
        consumer.close()
    except KafkaException as exc:
        print(f"consumer.close() failed: {exc.args[0]}", file=sys.stderr)
