"""Notebook 02, zombie fencing: seed 002's A, B, B zombie on real processes, with no fencing, with a
shared ``transactional.id`` (KIP-98 epoch bump) and with group metadata (KIP-447); the exercise: write the
offsets step of a read-process-write loop and run it through a crash."""

from __future__ import annotations

import inspect
import textwrap
import uuid
from collections.abc import Callable

from labkit.crashlab.experiment import Experiment
from labkit.kafka.producers import describe_transaction
from labkit.exercise import Verdict, unanswered
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


def offsets_step_run(exp: Experiment, step: Callable) -> dict:
    """Notebook 02's exercise run: a transactional processor whose offsets step is the learner's ``step``
    (``step(producer, consumer, offsets)``, called inside each transaction after the outputs are flushed; offsets:
    a list of ``TopicPartition``, each the next offset to read) is SIGKILLed right after ``step`` in its second
    batch, then restarted with the same ``transactional.id`` (its ``init_transactions`` aborts the open
    transaction) and runs to the end. Input: 6 records in batches of 3. Takes about 45 s.

    Returns:
        ``{"input", "output", "processor", "check"}``; check: :meth:`Experiment.check` of output against input.
    Raises:
        ValueError: ``step`` is not a function defined with ``def`` (its source is sent to the processor).
        RuntimeError: the processor did not crash where planned (e.g. ``step`` raised: its stderr is quoted).
    """
    try:
        source = textwrap.dedent(inspect.getsource(step))
    except (OSError, TypeError) as exc:
        raise ValueError(f"define your step with def in a notebook cell ({exc})") from None
    src, out = exp.topic("input"), exp.topic("output")
    exp.participant("source", "producer", topic=src, iterations=6).start().wait(60)
    tid = f"{exp.name}-{uuid.uuid4().hex[:6]}"
    p = exp.participant(f"processor-{len(exp.participants)}", "processor", topic=src, output_topic=out,
                        group_id=f"{tid}-group", transactional_id=tid, batch=3, idle_ms=6000,
                        crash_at="after_send_offsets", crash_iteration=2,
                        offsets_step={"source": source, "name": step.__name__})
    if p.start().wait(90) != "crashed" or not exp.history.first("crash", p.name):
        raise RuntimeError(f"{p.name} ended {p.status}, not crashed after your step: "
                           f"{p.stderr_log.read_text()[-1500:]}")
    p.restart(crash_at=None, idle_ms=20_000).wait(120)  # its crashed self holds the partition until its session times out
    exp.final_reads(src, out)
    return {"input": src, "output": out, "processor": p, "check": exp.check(out, src)}


def check_offsets_step(exp: Experiment, answer: object) -> Verdict:
    """Notebook 02's exercise: ``answer``, a function ``(producer, consumer, offsets)`` that commits a batch's
    input offsets, must make the read-process-write loop exactly-once through a crash between it and
    ``commit_transaction`` (:func:`offsets_step_run`, a real run): no duplicate, nothing unprocessed."""
    if (v := unanswered(answer, "a function def finish_batch(producer, consumer, offsets): ...")):
        return v
    if not callable(answer):
        return Verdict(False, "The answer is a function: def finish_batch(producer, consumer, offsets): ...")
    try:
        run = offsets_step_run(exp, answer)
    except (ValueError, RuntimeError) as exc:
        return Verdict(False, f"The run did not get through: {exc}")
    counts = run["check"].counts()
    if counts["unprocessed"]:
        return Verdict(False, f"{counts['unprocessed']} input record(s) never reached the output: their offsets were "
                              "committed, but the transaction that wrote their outputs was aborted by the crash. "
                              "The offsets must commit in the same transaction as the outputs.")
    if counts["duplicate"]:
        return Verdict(False, f"{counts['duplicate']} duplicate(s): after the restart the processor read inputs "
                              "whose outputs were already committed, so their offsets never committed with them. "
                              "Which producer call adds the consumer's offsets to the transaction?")
    if not run["check"].ok:
        return Verdict(False, f"The checker found: {counts}")
    return Verdict(True, "Every input exactly once in read_committed through a SIGKILL: the offsets committed "
                         "(or aborted) atomically with the outputs (KIP-98's send_offsets_to_transaction, "
                         "fenced by group metadata since KIP-447).")
