"""Notebook 02, zombie fencing: seed 002's A, B, B zombie on real processes, with no fencing, with a
shared ``transactional.id`` (KIP-98 epoch bump) and with group metadata (KIP-447)."""

from __future__ import annotations

import uuid

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.producers import describe_transaction
from labkit.waiting import wait_for

#: How a zombie is fenced in :func:`zombie`.
FENCING = ("none", "transactional.id", "group metadata")


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
    wait_for(lambda: exp.history.first("consume", "instance-1", "source-2"), "instance-1 never took record 2")
    one.pause()
    epochs = {"before": describe_transaction(exp.bootstrap, tid)["producer_epoch"]} if fencing == "transactional.id" else None
    two = exp.participant("instance-2", "processor", transactional_id=tids[1], **common).start()
    wait_for(lambda: exp.history.first("ack", "instance-2"), "instance-2 never wrote its output", 90)
    wait_for(lambda: exp.history.first("txn_end" if fencing != "none" else "offsets_committed", "instance-2"),
          "instance-2 never committed")
    if epochs is not None:
        epochs["after"] = describe_transaction(exp.bootstrap, tid)["producer_epoch"]
    one.resume()
    one.wait(60)
    two.wait(60)
    exp.final_reads(src, out)
    return {"input": src, "output": out, "instance-1": one, "instance-2": two, "epochs": epochs}
