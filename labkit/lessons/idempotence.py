"""Notebook 01, the idempotent producer: its opening question (:data:`QUESTION`, answered by :func:`copies_outcome`
from the run); lost produce responses (a real proxy drops them) with and
without ``enable.idempotence`` (KIP-98: producer id and sequence numbers); ordering under retries with several
requests in flight, on both clients (the proxy corrupts one request, the broker refuses it, later ones succeed);
and a restarted producer.

Each function returns what it made and leaves the final reads in the experiment's history, so
``exp.check(...)`` and the timelines show what really happened.
"""

from __future__ import annotations

import pandas as pd
from confluent_kafka import KafkaException, Producer

from labkit.broker.probe import KAFKA_LOG
from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_for
from labkit.crashlab.check import CheckResult
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import Participant
from labkit.crashlab.proxy import FaultProxy
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.producers import describe_producers
from labkit.learn.exercise import CheckError, Verdict, marked, unanswered
from labkit.learn.predictions import Question

#: The notebook's opening question: how many copies of a record whose Produce response was lost, without and with
#: ``enable.idempotence`` (KIP-98). A key is "<copies without>_<copies with>".
QUESTION = Question(
    "01", "the broker writes a record, its response is lost, and the producer sends it again. How many copies end "
          "up in the log, with enable.idempotence=false and with enable.idempotence=true?",
    {"two_one": "Two copies without idempotence, one with it",
     "one_one": "One copy either way",
     "two_two": "Two copies either way",
     "none_one": "None without idempotence (the send failed), one with it"},
    {"one_one": "Without idempotence nothing in the retry tells the broker it is one: it carries no producer id and "
                "no sequence number, so the broker writes it again.",
     "two_two": "An idempotent producer numbers its batches (producer id, sequence number); the partition leader "
                "recognises the retry's number as one it wrote and acknowledges it without writing it again (KIP-98).",
     "none_one": "A lost response is not a lost record: the broker had written it before its answer was lost, so "
                 "the retry is a second copy."})


def copies_outcome(plain: CheckResult, idempotent: CheckResult) -> str:
    """Which choice of :data:`QUESTION` the run bore out, from the checker's verdicts on part 2's topic (``plain``,
    ``enable.idempotence=false``) and part 3's (``idempotent``): two copies where the checker found duplicates, none
    where it found a lost write, else one.

    Raises:
        LabkitError: the run shows none of the choices (e.g. duplicates with idempotence): the lab's failure, named.
    """
    def copies(check: CheckResult) -> str:
        return "two" if check.count("duplicate") else "none" if check.count("lost write") else "one"

    outcome = f"{copies(plain)}_{copies(idempotent)}"
    if outcome not in QUESTION.choices:
        raise LabkitError(f"the run fits no choice: {outcome} copies (without_with idempotence)")
    return outcome


#: Producer settings that make a lost response show within seconds: librdkafka times a Produce
#: request out after ``socket.timeout.ms`` and retries it; one record per request.
FAST_RETRY = {"socket.timeout.ms": 2000, "message.timeout.ms": 60000, "retry.backoff.ms": 100, "linger.ms": 0,
              "max.in.flight.requests.per.connection": 1}


def lost_responses(exp: Experiment, proxy: FaultProxy, *, idempotent: bool, records: int = 12,
                   losses: int = 3, interval_ms: int = 200, config: dict | None = None,
                   name: str | None = None) -> tuple[Participant, str]:
    """A producer behind ``proxy`` writes ``records`` records (one per Produce request) while the
    proxy loses the responses to ``losses`` of those requests: the broker wrote each record, the
    producer never heard so, and it retries (``enable.idempotence`` per ``idempotent``; ``config``: more
    producer configs, over :data:`FAST_RETRY` and ``idempotent``). ``name``: the participant's (and
    topic's) name, default "idempotent" or "plain".

    Returns:
        The producer participant and its topic (final reads recorded).
    Raises:
        ValueError: ``records`` too small to fit the losses (needs ``records >= 2 * losses + 3``).
    """
    if records < 2 * losses + 3:
        raise ValueError(f"records={records} is too few for losses={losses}: use at least {2 * losses + 3}")
    name = name or ("idempotent" if idempotent else "plain")
    topic = exp.topic(name)
    p = exp.participant(name, "producer", bootstrap=proxy.bootstrap_servers,
                        topic=topic, mode="idempotent" if idempotent else "plain", iterations=records,
                        interval_ms=interval_ms, config={**FAST_RETRY, **(config or {})}).start()
    wait_for(lambda: p.counters()["acked"] >= 2, f"{p.name} wrote nothing")
    for _ in range(losses):
        acked = p.counters()["acked"]
        proxy.lose_responses(1)
        wait_for(lambda: p.counters()["acked"] >= acked + 2, f"{p.name} did not recover from a lost response")
    p.wait(120)
    exp.final_reads(topic)
    return p, topic


def reordered_retry(exp: Experiment, proxy: FaultProxy, *, idempotent: bool, client: str, records: int = 5,
                    max_in_flight: int = 5, hold_response_s: float = 0.5) -> tuple[Participant, str]:
    """Ordering under retries: a producer on ``client`` ("librdkafka" or "java") behind ``proxy`` writes two rounds
    of ``records`` records to one partition, each round handed over at once, one record per Produce request
    (``single_record_batches``), up to ``max_in_flight`` requests in flight (``max.in.flight.requests.per.connection``).
    The proxy corrupts the first record of round 2 on its way in: the broker's CRC check refuses that request
    (CORRUPT_MESSAGE, retriable), and its response is held ``hold_response_s`` seconds so that the requests after it
    are in flight by then and succeed (:meth:`FaultProxy.corrupt_record`). The producer retries the refused record.
    Round 1 gives the partition leader the producer's state first: a leader that knows nothing of a producer id
    accepts any sequence number from it (apache/kafka ``ProducerAppendInfo.checkSequence``).

    Returns:
        The producer participant and its topic (final reads recorded). The participant's name, and so its records'
        value ids (``"<name>-<n>"``), is ``order-<plain|idempotent>-<client>``.
    Raises:
        ValueError: an unknown client, fewer than 2 records, or ``max_in_flight`` below 2 (nothing could be
            in flight behind the refused request).
        RuntimeError: the proxy saw no Produce request carrying the record to corrupt.
    """
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}; the clients are {', '.join(CLIENTS)}")
    if records < 2 or max_in_flight < 2:
        raise ValueError(f"records={records} and max_in_flight={max_in_flight}: both must be at least 2, for a "
                         "request to be in flight behind the refused one")
    name = f"order-{'idempotent' if idempotent else 'plain'}-{client}"
    topic = exp.topic(name)
    corrupted = proxy.corrupted_requests
    proxy.corrupt_record(f"{name}-{records + 1}".encode(), hold_response_s)
    try:
        p = exp.participant(name, "producer", client=client, bootstrap=proxy.bootstrap_servers, topic=topic,
                            mode="idempotent" if idempotent else "plain", iterations=2, batch=records,
                            single_record_batches=True, max_in_flight=max_in_flight).start()
        p.wait(120)
    finally:
        proxy.heal()
    if proxy.corrupted_requests == corrupted:
        raise RuntimeError(f"{name}: no Produce request carried {name}-{records + 1}; see {p.stderr_log}")
    exp.final_reads(topic)
    return p, topic


def log_order(exp: Experiment, runs: dict[str, tuple[Participant, str]]) -> pd.DataFrame:
    """For each of :func:`reordered_retry`'s ``runs`` (label -> (participant, topic)): the record numbers in log
    order (``read_uncommitted``, from the final reads), and the checker's out-of-order and duplicate counts.

    Returns:
        One row per run: run, client, log (e.g. "1 2 3 4 5 7 8 9 10 6"), out_of_order, duplicates.
    """
    events = exp.history.events()
    rows = []
    for label, (p, topic) in runs.items():
        read = sorted((e for e in events if e.kind == "final_read" and e.topic == topic and e.value_id
                       and e.isolation_level == "read_uncommitted"), key=lambda e: e.offset)
        check = exp.check(topic)
        rows.append({"run": label, "client": p.spec["client"], "log": " ".join(e.value_id.rsplit("-", 1)[1] for e in read),
                     "out_of_order": check.count("out-of-order"), "duplicates": check.count("duplicate")})
    return pd.DataFrame(rows)


def restart_and_resend(exp: Experiment, *, batches: int = 5, batch: int = 2,
                       crash_iteration: int = 3) -> tuple[Participant, str]:
    """An idempotent producer crashes right after batch ``crash_iteration`` was acked, before it
    could note that; restarted, it sends that batch again (same values) and goes on.

    Returns:
        The producer participant and its topic (final reads recorded).
    Raises:
        ValueError: ``crash_iteration`` is not within 1..``batches``.
    """
    if not 1 <= crash_iteration <= batches:
        raise ValueError(f"crash_iteration must be within 1..{batches}, not {crash_iteration}")
    topic = exp.topic("resend")
    p = exp.participant("resender", "producer", topic=topic, mode="idempotent", iterations=batches, batch=batch,
                        crash_at="after_produce", crash_iteration=crash_iteration).start()
    p.wait(60)
    p.restart(crash_at=None, first=(crash_iteration - 1) * batch + 1, iterations=batches - crash_iteration + 1)
    p.wait(60)
    exp.final_reads(topic)
    return p, topic


@marked
def check_configs(exp: Experiment, proxy: FaultProxy, answer: object) -> Verdict:
    """Notebook 01's exercise: ``answer``, a dict of producer configs (dotted names, e.g. ``{"acks": "all"}``) for a
    producer that starts without idempotence, must make the lost Produce responses harmless. Checked by a real run
    (:func:`lost_responses` with those configs, through ``proxy``, in ``exp``; about 15 s), in this order:

    * every record acknowledged: a record whose delivery failed (no retry, or ``message.timeout.ms`` spent) is
      at most once, although the broker may have written it;
    * no duplicate and nothing lost in the log (:meth:`Experiment.check`);
    * one producer id for the run on the partition leader (DescribeProducers, :func:`describe_producers`): the
      id by which the leader recognised the retries.

    The right verdict reports the responses the proxy really dropped in the run (its ``dropped_responses``).

    Returns:
        The :class:`Verdict`; a missing, malformed or wrong answer, a config the client refuses (when it is made,
        or by failing in the run) included, is a verdict, never an exception.
    Raises:
        kafka.errors.KafkaError: the broker refused DescribeProducers for the run's topic.
        confluent_kafka.KafkaException, TimeoutError: the broker did not answer, or the run did not get through
            while the producer had not failed (what :func:`lost_responses` raises).
        CheckError: records neither acknowledged nor failed, the producer not failed: the lab's failure.
    """
    if (v := unanswered(answer, 'a dict of producer configs, e.g. {"acks": "all"}')):
        return v
    if not isinstance(answer, dict) or not all(isinstance(k, str) for k in answer):
        return Verdict("wrong", 'The answer is a dict of producer configs, e.g. {"acks": "all"}.')
    try:  # librdkafka checks each config and their combination when a client is made: in the learner's process
        Producer({"enable.idempotence": False, **FAST_RETRY, **answer, "logger": KAFKA_LOG})
    except KafkaException as exc:
        return Verdict("wrong", f"The client refuses these configs: {exc.args[0].str()}")
    except (TypeError, ValueError) as exc:
        return Verdict("wrong", f"The client refuses these configs: {exc}")
    name, dropped = f"exercise-{len(exp.participants)}", proxy.dropped_responses
    try:
        p, topic = lost_responses(exp, proxy, idempotent=False, config=answer, name=name)
    except TimeoutError:  # the run waits for the producer's acks: a producer the configs made fail is the answer's
        p = exp.participants.get(name)
        if p is None or not p.status.startswith("failed"):
            raise  # the broker or the lab failed, not the answer
        return Verdict("wrong", f"The producer failed with these configs: {p.cause} (see {p.stderr_log}).")
    dropped = proxy.dropped_responses - dropped
    events = exp.history.events()
    failed = [e for e in events if e.participant == p.name and e.kind == "send_failed"]
    if failed:
        in_log = {e.value_id for e in events if e.kind == "final_read" and e.topic == topic}
        errors = ", ".join(sorted({e.error for e in failed}))
        return Verdict("wrong", f"{len(failed)} record(s) failed delivery ({errors}), and "
                                f"{sum(e.value_id in in_log for e in failed)} of them are in the log all the same: the "
                                f"proxy lost {dropped} responses and the producer gave up on those records instead of "
                                "retrying until it heard. That is at most once: the application is told the send "
                                "failed. Let the producer retry, and make the retry harmless: which setting gives the "
                                "producer a producer id and sequence numbers?")
    records, acked = p.spec["iterations"], sum(e.participant == p.name and e.kind == "ack" for e in events)
    if acked < records:
        if not p.status.startswith("failed"):  # neither failed delivery nor a failed producer: not the configs' doing
            raise CheckError(f"Only {acked} of {records} records were acknowledged, none failed delivery, and the "
                             f"producer ended {p.status}: see {p.stderr_log}.")
        return Verdict("wrong", f"Only {acked} of {records} records were acknowledged and the producer ended "
                                f"{p.status}: see {p.stderr_log}.")
    found = exp.check(topic)
    if found.count("duplicate") or found.count("lost write"):
        return Verdict("wrong", f"{found.count('duplicate')} record(s) in the log more than once and "
                                f"{found.count('lost write')} lost, with {dropped} responses lost by the proxy. A "
                                "retry of a request whose response was lost was appended again: which setting gives "
                                "the producer a producer id and sequence numbers, so the leader recognises the "
                                "retry?")
    producers = describe_producers(exp.bootstrap, topic)
    if len(producers) != 1:
        return Verdict("wrong", f"The partition leader knows {len(producers)} producer id(s) for this run "
                                "(DescribeProducers), not one: no duplicate this time, but a retry is recognised only "
                                "by the producer id, epoch and sequence number of the request it repeats.")
    pid, seq = producers.producer_id.iloc[0], producers.last_sequence.iloc[0]
    return Verdict("right", f"{acked} records acknowledged, {dropped} responses lost, no duplicate and nothing lost: "
                            f"one producer id ({pid}) with sequence numbers 0 to {seq}, and the leader recognised each "
                            "retry by its producer id, epoch and sequence number.")
