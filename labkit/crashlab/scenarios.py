"""The experiments the notebooks run, as plain functions (a cell calls one; a button would too).

Each returns what it made and leaves the final reads in the experiment's history, so
``exp.check(...)`` and the timelines show what really happened.
"""

from __future__ import annotations

import uuid

from labkit.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import Participant
from labkit.crashlab.producers import describe_transaction
from labkit.crashlab.proxy import FaultProxy

#: Producer settings that make a lost response show within seconds: librdkafka times a Produce
#: request out after ``socket.timeout.ms`` and retries it; one record per request.
FAST_RETRY = {"socket.timeout.ms": 2000, "message.timeout.ms": 60000, "retry.backoff.ms": 100, "linger.ms": 0,
              "max.in.flight.requests.per.connection": 1}
#: How a zombie is fenced in :func:`zombie`.
FENCING = ("none", "transactional.id", "group metadata")


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


def zombie(exp: Experiment, fencing: str, *, per_record_ms: int = 3000) -> dict:
    """Seed 002's A, B, B: two consume-transform-produce instances of one group on a one-partition
    input holding two records. Instance 1 processes record 1 (output A), takes record 2 and is
    paused (SIGSTOP, like a long GC) while processing it. Its session times out, instance 2 gets the
    partition and processes record 2 (output B). Then instance 1 resumes and writes its B.

    Args:
        fencing: "none" (no transactions: at-least-once), "transactional.id" (both instances share
            one ``transactional.id``: instance 2's ``init_transactions`` bumps the producer epoch and
            fences instance 1), or "group metadata" (KIP-447: one ``transactional.id`` per instance;
            the group coordinator rejects the zombie's ``send_offsets_to_transaction``).
        per_record_ms: processing time per record, in ms (the pause lands inside it).
    Returns:
        ``{"input", "output", "instance-1", "instance-2", "epochs"}``; epochs: producer epoch of
        the shared ``transactional.id`` before and after instance 2 started (only with
        "transactional.id", else ``None``). Final reads are recorded.
    Raises:
        ValueError: unknown ``fencing`` (the message lists them).
    """
    if fencing not in FENCING:
        raise ValueError(f"unknown fencing {fencing!r}; choose one of {', '.join(FENCING)}")
    src, out = exp.topic("input"), exp.topic("output")
    exp.participant("source", "producer", topic=src, iterations=2).start().wait(60)
    tid = f"{exp.name}-{uuid.uuid4().hex[:6]}"
    common = dict(topic=src, output_topic=out, group_id=f"{tid}-group", batch=1, per_record_ms=per_record_ms,
                  idle_ms=per_record_ms + 8000, transactional=fencing != "none",
                  config={"transaction.timeout.ms": 10000} if fencing != "none" else {})
    tids = [tid] * 2 if fencing == "transactional.id" else [f"{tid}-1", f"{tid}-2"]
    one = exp.participant("instance-1", "processor", transactional_id=tids[0], **common).start()
    wait_for(lambda: _did(exp, "instance-1", "consume", "source-2"), "instance-1 never took record 2")
    one.pause()
    epochs = {"before": describe_transaction(exp.bootstrap, tid)["producer_epoch"]} if fencing == "transactional.id" else None
    two = exp.participant("instance-2", "processor", transactional_id=tids[1], **common).start()
    wait_for(lambda: _did(exp, "instance-2", "ack"), "instance-2 never wrote its output", 90)
    wait_for(lambda: _did(exp, "instance-2", "txn_end" if fencing != "none" else "offsets_committed"),
          "instance-2 never committed")
    if epochs is not None:
        epochs["after"] = describe_transaction(exp.bootstrap, tid)["producer_epoch"]
    one.resume()
    one.wait(60)
    two.wait(60)
    exp.final_reads(src, out)
    return {"input": src, "output": out, "instance-1": one, "instance-2": two, "epochs": epochs}


def _did(exp: Experiment, participant: str, kind: str, value_id: str | None = None) -> bool:
    return any(e.participant == participant and e.kind == kind and (value_id is None or e.value_id == value_id)
               for e in exp.history.events())
