"""Notebook 01, the idempotent producer: lost produce responses (a real proxy drops them) with and
without ``enable.idempotence`` (KIP-98: producer id and sequence numbers), and a restarted producer.

Each function returns what it made and leaves the final reads in the experiment's history, so
``exp.check(...)`` and the timelines show what really happened.
"""

from __future__ import annotations

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import Participant
from labkit.crashlab.proxy import FaultProxy
from labkit.waiting import wait_for

#: Producer settings that make a lost response show within seconds: librdkafka times a Produce
#: request out after ``socket.timeout.ms`` and retries it; one record per request.
FAST_RETRY = {"socket.timeout.ms": 2000, "message.timeout.ms": 60000, "retry.backoff.ms": 100, "linger.ms": 0,
              "max.in.flight.requests.per.connection": 1}


def lost_responses(exp: Experiment, proxy: FaultProxy, *, idempotent: bool, records: int = 12,
                   losses: int = 3, interval_ms: int = 200) -> tuple[Participant, str]:
    """A producer behind ``proxy`` writes ``records`` records (one per Produce request) while the
    proxy loses the responses to ``losses`` of those requests: the broker wrote each record, the
    producer never heard so, and it retries (``enable.idempotence`` per ``idempotent``).

    Returns:
        The producer participant and its topic (final reads recorded).
    Raises:
        ValueError: ``records`` too small to fit the losses (needs ``records >= 2 * losses + 3``).
    """
    if records < 2 * losses + 3:
        raise ValueError(f"records={records} is too few for losses={losses}: use at least {2 * losses + 3}")
    topic = exp.topic("idempotent" if idempotent else "plain")
    p = exp.participant("idempotent" if idempotent else "plain", "producer", bootstrap=proxy.bootstrap_servers,
                        topic=topic, mode="idempotent" if idempotent else "plain", iterations=records,
                        interval_ms=interval_ms, config=FAST_RETRY).start()
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
