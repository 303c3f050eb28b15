"""Notebook 01, the idempotent producer: lost produce responses (a real proxy drops them) with and
without ``enable.idempotence`` (KIP-98: producer id and sequence numbers), and a restarted producer.

Each function returns what it made and leaves the final reads in the experiment's history, so
``exp.check(...)`` and the timelines show what really happened.
"""

from __future__ import annotations

from labkit.crashlab.experiment import Experiment
from labkit.exercise import Verdict, unanswered
from labkit.crashlab.participant import Participant
from labkit.crashlab.proxy import FaultProxy
from labkit.waiting import wait_for

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


def check_configs(exp: Experiment, proxy: FaultProxy, answer: object) -> Verdict:
    """Notebook 01's exercise: ``answer``, a dict of producer configs (dotted names) for a producer that starts
    without idempotence, must make three lost Produce responses harmless. Checked by a real run
    (:func:`lost_responses` with those configs): no duplicate and nothing lost. Takes about 15 s."""
    if (v := unanswered(answer, 'a dict of producer configs, e.g. {"acks": "all"}')):
        return v
    if not isinstance(answer, dict) or not all(isinstance(k, str) for k in answer):
        return Verdict(False, 'The answer is a dict of producer configs, e.g. {"acks": "all"}.')
    try:
        p, topic = lost_responses(exp, proxy, idempotent=False, config=answer, name=f"exercise-{len(exp.participants)}")
    except Exception as exc:  # noqa: BLE001: a config the client refuses is a wrong answer, said as such
        return Verdict(False, f"The producer did not get through the run with these configs: {exc}")
    counts = exp.check(topic).counts()
    if counts["duplicate"] or counts["lost write"]:
        return Verdict(False, f"{counts['duplicate']} duplicate and {counts['lost write']} lost record(s). A retry "
                              "of a request whose response was lost was appended again: which setting gives the "
                              "producer a producer id and sequence numbers, so the leader recognises the retry?")
    return Verdict(True, f"{p.counters()['acked']} records, three responses lost, no duplicate and nothing lost: "
                         "the leader recognised each retry by its producer id, epoch and sequence number.")
