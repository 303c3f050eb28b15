"""Notebook 03, isolation levels on the real broker: its opening question (:data:`QUESTION`, answered by
:func:`plain_record_outcome` from part 2's two runs); client defaults, how an open transaction holds
every read_committed consumer back (the LSO against the high watermark), how ``transaction.timeout.ms``
lets the coordinator abort a transaction whose producer stopped, and what transactions cost per record
as they grow (KIP-98)."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
from confluent_kafka import Producer

from labkit.broker.probe import KAFKA_LOG
from labkit.core.errors import LabkitError
from labkit.core.waiting import Deadline, wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.offsets import OffsetSampler
from labkit.kafka.producers import describe_transaction
from labkit.kafka.records import create_topic, high_watermarks, last_stable_offsets, produce, read_topic
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.learn.predictions import Question


def txn_throughput(bootstrap: str, sizes: tuple[int, ...] = (1, 10, 100, 1000, 10000), *,
                   min_records: int = 300, min_txns: int = 3) -> pd.DataFrame:
    """Records/s of a transactional producer writing ``size`` records per transaction, for each size,
    next to a non-transactional idempotent producer writing as many records in the same run.

    Each size writes ``max(min_records, min_txns * size)`` records of 100 bytes to a fresh topic; the
    non-transactional side writes at least 30 000, so its rate is a steady state, not a start-up.

    Returns:
        One row per size: records_per_txn, records, txn_rec_per_s, plain_rec_per_s, ratio (txn/plain).
    """
    rows = []
    for size in sizes:
        n = max(min_records, min_txns * size)
        plain = _rate(bootstrap, max(n, 30_000), None)  # steady state: enough records to fill batches
        txn = _rate(bootstrap, n, size)
        rows.append((size, n, txn, plain, txn / plain))
    return pd.DataFrame(rows, columns=["records_per_txn", "records", "txn_rec_per_s", "plain_rec_per_s", "ratio"])


def _rate(bootstrap: str, n: int, per_txn: int | None) -> float:
    topic = create_topic(bootstrap, "throughput")
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "logger": KAFKA_LOG, "linger.ms": 5}
    if per_txn:
        conf["transactional.id"] = f"throughput-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    producer.list_topics(topic, timeout=10)
    value = b"x" * 100
    if per_txn:
        producer.init_transactions(30)
    else:  # get the producer id before the clock starts, as init_transactions does for the other side
        producer.produce(topic, value, partition=0)
        producer.flush(30)
    started = time.monotonic()
    for first in range(0, n, per_txn or n):
        if per_txn:
            producer.begin_transaction()
        for _ in range(min(per_txn or n, n - first)):
            producer.produce(topic, value, partition=0)
            producer.poll(0)
        if per_txn:
            producer.commit_transaction(30)
    producer.flush(30)
    return n / (time.monotonic() - started)


def read_with_client_defaults(exp: Experiment, topic: str, timeout_s: float = 120.0) -> dict[str, list[str]]:
    """Values of partition 0 of ``topic``, read from the start by two consumer participants of ``exp``, one per
    client, both with ``isolation_level=None``, so neither sets ``isolation.level`` and each reads at its client's
    default:

    * confluent-kafka: librdkafka's default is read_committed (librdkafka ``CONFIGURATION.md``, ``isolation.level``);
    * Kafka's own Java client: the default is read_uncommitted (apache/kafka ``ConsumerConfig``, ``isolation.level``:
      "read_uncommitted (the default)").

    Args:
        timeout_s: for each consumer (s); each joins its group first (a few seconds) and stops 2 s after its last
            record.
    Returns:
        ``{"confluent-kafka": [...], "java": [...]}``, values in offset order.
    Raises:
        RuntimeError: a consumer ended otherwise than "finished" (its status and stderr log named).
        TimeoutError: a consumer was still running after ``timeout_s``.
    """
    consumers = {label: exp.participant(f"defaults-{client}-{topic}", "consumer", client=client, topic=topic,
                                        group_id=f"defaults-{client}-{topic}", isolation_level=None, idle_ms=2000)
                 for label, client in (("confluent-kafka", "librdkafka"), ("java", "java"))}
    for c in consumers.values():
        c.start()
    read = {}
    for label, c in consumers.items():
        status = c.wait(timeout_s)
        if status != "finished":
            raise RuntimeError(f"the {label} consumer {c.name} is {status}, not finished (see {c.stderr_log})")
        read[label] = [e.value_id for e in sorted((e for e in exp.history.events()
                                                   if e.participant == c.name and e.kind == "consume"),
                                                  key=lambda e: e.offset)]
    return read


def _write(exp: Experiment, producer: Producer, name: str, topic: str, vid: str, txn: int | None = None) -> None:
    exp.history.append("send", name, topic=topic, partition=0, value_id=vid, txn=txn)
    producer.produce(topic, vid.encode(), partition=0, on_delivery=lambda err, msg: exp.history.append(
        "ack", name, topic=topic, partition=0, offset=msg.offset(), value_id=vid, txn=txn, definite=True))
    producer.flush(30)


def _seen_ns(exp: Experiment, participant: str, kind: str, value_id: str | None = None) -> int | None:
    """``mono_ns`` of the first ``kind`` event of ``participant`` (about ``value_id``), or ``None``."""
    event = exp.history.first(kind, participant, value_id)
    return event.mono_ns if event else None


#: The notebook's opening question: when a read_committed consumer gets a plain record written after an open
#: transaction (answered by part 2, run once with a commit and once with an abort).
QUESTION = Question(
    "03", "a transaction is open on a partition, and another producer, with no transaction, writes a record to the "
          "same partition after it. When can a read_committed consumer read that record?",
    {"at_once": "At once: the record is in no transaction",
     "when_ends": "Once the transaction ends, whether it commits or aborts",
     "if_commits": "Only if the transaction commits"},
    {"at_once": "A read_committed consumer reads only below the last stable offset (LSO), and an open transaction "
                "holds the LSO at its first offset: every record after it waits, in a transaction or not (KIP-98; "
                "ProducerStateManager.firstUnstableOffset).",
     "if_commits": "An abort ends the transaction too: the coordinator writes an ABORT marker, the LSO moves past "
                   "the transaction, and the plain record is returned; only the aborted transaction's own records are "
                   "skipped (KIP-98)."})


def plain_record_outcome(committed: dict, aborted: dict) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from two :func:`open_transaction_blocks` runs, one ended by
    a commit (``committed``) and one by an abort (``aborted``): when their read_committed consumer got ``plain-1``,
    against when the transaction's end was asked for. "at_once" if before the end in both, "when_ends" if after it in
    both, "if_commits" if after the commit and never after the abort.

    Raises:
        LabkitError: the runs fit no choice, or are not one commit and one abort (the lab's failure, named).
    """
    if (committed["end"], aborted["end"]) != ("commit", "abort"):
        raise LabkitError(f"give one run ended by a commit and one by an abort, not {committed['end']}, {aborted['end']}")

    def when(run: dict) -> str:
        seen = run["seen_ns"]["read_committed"]
        return "never" if seen is None else "before" if seen < run["end_start_ns"] else "after"

    outcome = {("before", "before"): "at_once", ("after", "after"): "when_ends",
               ("after", "never"): "if_commits"}.get((when(committed), when(aborted)))
    if outcome is None:
        raise LabkitError(f"the runs fit no choice: plain-1 read {when(committed)} the commit, {when(aborted)} the abort")
    return outcome


def open_transaction_blocks(exp: Experiment, open_s: float = 3.0, end: str = "commit") -> dict:
    """A transaction stays open ``open_s`` seconds, and at least until the read_uncommitted consumer (the control)
    has read ``plain-1``: half a second after the transaction opened, a non-transactional producer writes record
    ``plain-1`` to the same partition. A read_committed and a read_uncommitted consumer (participants) read the
    partition all along (KIP-98: read_committed reads only below the LSO, which the open transaction holds at its
    first offset). Waiting for the control, not only for a clock, keeps the lesson true on a busy machine: plain-1
    was readable while the transaction was open, and only read_committed did not get it.

    Args:
        open_s: how long the transaction stays open at least, in seconds (at least 1).
        end: how the transaction ends: "commit" (``commit_transaction``) or "abort" (``abort_transaction``); either
            way the coordinator writes a marker, and the LSO moves past the transaction (KIP-98).
    Returns:
        ``{"topic", "end", "samples", "marks", "write_ns", "end_start_ns", "end_ns", "seen_ns": {level: ns}}``:
        offset samples (high watermark, LSO), and (``time.monotonic_ns()``) when plain-1 was written,
        when ``commit_transaction`` (``abort_transaction``) was called and returned, and when each consumer got
        plain-1. Final reads are recorded.
    Raises:
        ValueError: ``open_s`` below 1, ``end`` neither "commit" nor "abort", or ``exp`` has run this already.
        TimeoutError: a consumer never read a record within 60 s (names which).
    """
    if open_s < 1:
        raise ValueError(f"open_s={open_s:g}: keep the transaction open at least 1 s, so plain-1 is written inside it")
    if end not in ("commit", "abort"):
        raise ValueError(f"end={end!r}: a transaction ends with a \"commit\" or an \"abort\"")
    if any(e.participant == "txn-producer" for e in exp.history.events()):
        raise ValueError(f"experiment {exp.name!r} has run this already: give each run an Experiment of its own (the "
                         "participants' names are the same in every run, and the run reads its times by them)")
    topic = exp.topic("blocked")
    consumers = {level: exp.participant(f"consumer-{level}", "consumer", topic=topic, isolation_level=level,
                                        group_id=f"{topic}-{level}", idle_ms=int(open_s * 1000) + 8000).start()
                 for level in ("read_committed", "read_uncommitted")}
    plain = Producer({"bootstrap.servers": exp.bootstrap, "logger": KAFKA_LOG, "enable.idempotence": True})
    _write(exp, plain, "plain-producer", topic, "warm-up-1")
    for c in consumers.values():
        wait_for(lambda c=c: _seen_ns(exp, c.name, "consume", "warm-up-1"), f"{c.name} never read the first record")
    txn = Producer({"bootstrap.servers": exp.bootstrap, "logger": KAFKA_LOG,
                    "transactional.id": f"{topic}-{uuid.uuid4().hex[:6]}"})
    txn.init_transactions(30)
    with OffsetSampler(exp.bootstrap, topic) as sampler:
        txn.begin_transaction()
        exp.history.append("txn_begin", "txn-producer", txn=1)
        _write(exp, txn, "txn-producer", topic, "txn-1", txn=1)
        commit_at = Deadline(open_s)
        time.sleep(0.5)
        _write(exp, plain, "plain-producer", topic, "plain-1")
        control = consumers["read_uncommitted"]
        wait_for(lambda: _seen_ns(exp, control.name, "consume", "plain-1"), f"{control.name} never read plain-1")
        time.sleep(commit_at.remaining_s())
        end_start_ns = time.monotonic_ns()
        if end == "commit":
            exp.history.append("txn_commit_start", "txn-producer", txn=1)
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
        exp.history.append("txn_end", "txn-producer", txn=1, outcome={"commit": "committed", "abort": "aborted"}[end],
                           definite=True)
        for c in consumers.values():
            wait_for(lambda c=c: _seen_ns(exp, c.name, "consume", "plain-1"), f"{c.name} never read plain-1")
        time.sleep(0.3)
    for c in consumers.values():
        c.stop()
    exp.final_reads(topic)
    marks = {"transaction opens": _seen_ns(exp, "txn-producer", "txn_begin"),
             "plain-1 written": _seen_ns(exp, "plain-producer", "ack", "plain-1"),
             end: _seen_ns(exp, "txn-producer", "txn_end")}
    return {"topic": topic, "end": end, "samples": sampler.samples, "marks": marks,
            "write_ns": marks["plain-1 written"], "end_start_ns": end_start_ns, "end_ns": marks[end],
            "seen_ns": {level: _seen_ns(exp, c.name, "consume", "plain-1") for level, c in consumers.items()}}


#: What Kafka's Java client meets when it commits a transaction the coordinator has already aborted for its
#: ``transaction.timeout.ms`` (:func:`timeout_abort`, notebook 03 part 3), per broker release: the participant's history
#: errors, ``[(event kind, error)]``. Kafka 4.4.0's coordinator answers the EndTxn(commit) INVALID_TXN_STATE (the
#: transaction is COMPLETE_ABORT; under transaction version 2 the commit's epoch, one below the bumped one, passes as a
#: retry's), fatal in the client's ``TransactionManager.EndTxnHandler``: the participant's ``abortTransaction`` then
#: fails with it too. Kafka 4.3.2 answers PRODUCER_FENCED (KAFKA-20785, apache/kafka PR 23204: in 4.3.2, not in 4.4.0),
#: also fatal, which Kafka Streams handles as a task migration instead of a dying thread. Settled by runs on a real
#: broker of each release (``tests/test_java.py``); the client's ``EndTxnHandler`` is the same in both jars.
JAVA_TIMED_OUT_COMMIT: dict[str, list[tuple[str, str]]] = {
    "4.4.0": [("txn_end", "INVALID_TXN_STATE"), ("fenced", "INVALID_TXN_STATE")],
    "4.3.2": [("fenced", "PRODUCER_FENCED")],
}


def timeout_abort(exp: Experiment, timeout_ms: int = 3000, abort_within_s: float = 60.0, *,
                  client: str = "librdkafka") -> dict:
    """A transactional producer participant on ``client`` (``transaction.timeout.ms=timeout_ms``) writes two
    records, then is paused (SIGSTOP) before it commits. It stays paused until the transaction
    coordinator has aborted the transaction (its ABORT marker makes the LSO catch up with the high
    watermark), and half a second more; then it resumes, tries to commit, and would go on to a second transaction
    if its client let it (KIP-98; the coordinator looks for expired transactions every
    ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and fences the producer's epoch as it aborts).

    What the resumed producer meets is its client's: librdkafka raises the fatal ``_FENCED`` (its transaction manager,
    ``rdkafka_txnmgr.c``, names PRODUCER_FENCED and INVALID_PRODUCER_EPOCH ``_FENCED``: rd_kafka_txn_normalize_err), and
    Kafka's Java client gets the coordinator's answer to its EndTxn, which depends on the broker's release
    (:data:`JAVA_TIMED_OUT_COMMIT`): fatal either way in its ``TransactionManager.EndTxnHandler``.

    Args:
        timeout_ms: the producer's ``transaction.timeout.ms``, in ms (the lab broker allows up to 60 000).
        abort_within_s: how long to wait for the coordinator's abort, in seconds.
        client: "librdkafka" or "java" (:data:`labkit.crashlab.registry.CLIENTS`); the participant is named
            ``stalled-<client>``.
    Returns:
        ``{"topic", "producer", "samples", "marks", "begin_ns", "aborted_ns", "error", "errors", "epochs"}``: the
        participant, offset samples, marks (label to mono_ns), when the transaction began and when the first sample
        showed it aborted (``time.monotonic_ns()``), the first error its history records and all of them
        (``[(event kind, error)]``), and the coordinator's producer epoch (DescribeTransactions) ``{"before": while
        paused before the abort, "after": after it}``. Final reads are recorded.
    Raises:
        TimeoutError: the producer wrote nothing, or no abort within ``abort_within_s`` (the producer
            is resumed first).
    """
    topic = exp.topic(f"timeout-{client}")
    tid = f"{topic}-{uuid.uuid4().hex[:6]}"
    p = exp.participant(f"stalled-{client}", "producer", client=client, topic=topic, mode="transactional",
                        transactional_id=tid, iterations=2, batch=2, sleep_at={"before_commit": 2000},
                        config={"transaction.timeout.ms": timeout_ms})
    with OffsetSampler(exp.bootstrap, topic) as sampler:
        p.start()
        wait_for(lambda: p.counters()["acked"] == 2, "the producer wrote nothing")
        p.pause()
        try:  # two records and the ABORT marker: high watermark 3, and the LSO caught up with it
            epochs = {"before": describe_transaction(exp.bootstrap, tid)["producer_epoch"]}
            wait_for(lambda: ((sampler.samples.lso == 3) & (sampler.samples.high_watermark == 3)).any(),
                     f"the coordinator did not abort the stalled transaction (transaction.timeout.ms={timeout_ms})",
                     abort_within_s, hint="the broker's server.log")
            epochs["after"] = describe_transaction(exp.bootstrap, tid)["producer_epoch"]
            time.sleep(0.5)
        finally:
            p.resume()
        p.wait(60)
        time.sleep(0.5)
    exp.final_reads(topic)
    samples = sampler.samples
    errors = [(e.kind, e.error) for e in exp.history.events() if e.participant == p.name and e.error]
    marks = {"paused": _seen_ns(exp, p.name, "pause"), "resumed": _seen_ns(exp, p.name, "resume")}
    aborted = samples[(samples.lso == 3) & (samples.high_watermark == 3)].mono_ns
    return {"topic": topic, "producer": p, "samples": samples, "marks": marks,
            "begin_ns": _seen_ns(exp, p.name, "txn_begin"), "aborted_ns": int(aborted.iloc[0]),
            "error": errors[0][1] if errors else None, "errors": errors, "epochs": epochs}


def timeout_aborts(exp: Experiment, timeout_ms: int = 3000, clients: tuple[str, ...] = CLIENTS) -> dict[str, dict]:
    """:func:`timeout_abort` on each of ``clients`` at once, in ``exp``. Returns ``{client: its result}``."""
    with ThreadPoolExecutor(len(clients)) as pool:
        return dict(zip(clients, pool.map(lambda c: timeout_abort(exp, timeout_ms, client=c), clients)))


@marked
def check_lso(bootstrap: str, answer: object) -> Verdict:
    """Notebook 03's exercise. One partition gets, in order: a transaction of ``x1, x2`` that commits, a plain
    record ``p1``, a transaction of ``y1`` left open, a plain record ``p2``. ``answer`` predicts
    ``{"high_watermark": offset, "last_stable_offset": offset, "read_committed_after_commit": [values]}``: the
    partition's high watermark and LSO while ``y1``'s transaction is open, and what read_committed returns once
    it commits. Checked on the broker: the scenario runs at each check (a few seconds)."""
    keys = ("high_watermark", "last_stable_offset", "read_committed_after_commit")
    if (v := unanswered(answer, f"a dict with keys {', '.join(keys)}")):
        return v
    if not isinstance(answer, dict) or set(answer) != set(keys):
        return Verdict("wrong", f"The answer is a dict with exactly the keys {', '.join(keys)}.")
    topic = create_topic(bootstrap, "lso-quiz")
    produce(bootstrap, topic, ["x1", "x2"], transactional_id=f"x-{topic}", wait_marker=True)
    produce(bootstrap, topic, ["p1"])
    open_txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"y-{topic}", "logger": KAFKA_LOG})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(topic, b"y1", partition=0)
    open_txn.flush(30)
    produce(bootstrap, topic, ["p2"])
    real = {"high_watermark": high_watermarks(bootstrap, topic)[0],
            "last_stable_offset": last_stable_offsets(bootstrap, topic)[0]}
    open_txn.commit_transaction(30)
    real["read_committed_after_commit"] = list(read_topic(bootstrap, topic, "read_committed").value)
    wrong = [k for k in keys if answer[k] != real[k]]
    if not wrong:
        return Verdict("right", f"High watermark {real['high_watermark']} (five records and one COMMIT marker), LSO "
                                f"{real['last_stable_offset']}: the open transaction's first offset, so p2 waited "
                                "behind it although it was never part of it.")
    hints = {"high_watermark": "The high watermark is the offset after the last entry in the log, and a COMMIT "
                               "marker takes an offset too.",
             "last_stable_offset": "The LSO is the first offset of the oldest transaction whose marker is not yet in "
                                   "the partition (open, or decided with its marker still to come).",
             "read_committed_after_commit": "Once every transaction has ended, read_committed returns committed "
                                            "and non-transactional records, in log order, and no markers."}
    return Verdict("wrong", " ".join(hints[k] for k in wrong) + f" (wrong: {', '.join(wrong)})")
