"""Notebook 02, zombie fencing: its opening question (:data:`QUESTION`, answered by :func:`zombie_outcome` from parts
1 to 3); seed 002's A, B, B zombie on real processes, with no fencing, with a
shared ``transactional.id`` (KIP-98 epoch bump) and with group metadata (KIP-447), on each client (librdkafka and
Kafka's Java client); the producer epoch per transaction on each client (KIP-890's bump at every commit, Java only);
the exercise: write the offsets step of a read-process-write loop and run it through a crash."""

from __future__ import annotations

import inspect
import textwrap
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_for
from labkit.crashlab.check import CheckResult
from labkit.crashlab.colours import participant_colour
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import Participant
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.producers import describe_producers, describe_transaction
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.learn.predictions import Question

#: How a zombie is fenced in :func:`zombie`.
FENCING = ("none", "transactional.id", "group metadata")


#: The notebook's opening question: what keeps a zombie's second output from reaching read_committed (answered by
#: parts 1 to 3: without transactions, and with each kind of fencing).
QUESTION = Question(
    "02", "the zombie writes its output for a record the other instance has already processed. What can keep that "
          "second output from ever reaching a read_committed consumer?",
    {"nothing": "Nothing: once written, it counts",
     "idempotence": "The idempotent producer: the broker drops it as a duplicate",
     "fencing": "Fencing: the broker refuses the zombie's transaction, so its output is aborted or never written"},
    {"nothing": "With transactions the zombie's output stays in an open transaction, and its end is refused: by the "
                "producer epoch the new instance's init_transactions bumped (a shared transactional.id, KIP-98), or "
                "by the group coordinator refusing its offsets (KIP-447: its sendOffsetsToTransaction fails, and the "
                "zombie's application aborts the transaction); read_committed skips an aborted transaction's "
                "records.",
     "idempotence": "Idempotence drops a producer's own retries of one batch (producer id, epoch and sequence "
                    "number); the zombie's B comes from another producer (another producer id) than instance 2's B, "
                    "and without transactions it is written (part 1: A, B, B)."})


def zombie_outcome(plain: dict[str, CheckResult], fenced: list[CheckResult]) -> str:
    """Which choice of :data:`QUESTION` the runs bore out, from the checker's verdicts on part 1's runs without
    transactions (``plain``, by client) and on the fenced runs (``fenced``: parts 2 and 3 with a rebalance listener
    where the client needs one): "fencing" when the zombie's duplicate was in every plain run and in no fenced one,
    "idempotence" when it was in none, "nothing" when it was in every run.

    Raises:
        LabkitError: no runs, or runs that fit no choice (the lab's failure, named).
    """
    if not plain or not fenced:
        raise LabkitError("give part 1's runs and the fenced runs of parts 2 and 3")
    plain_dup = tuple(sorted({check.count("duplicate") > 0 for check in plain.values()}))
    fenced_dup = tuple(sorted({check.count("duplicate") > 0 for check in fenced}))
    outcome = {((True,), (False,)): "fencing", ((False,), (False,)): "idempotence",
               ((True,), (True,)): "nothing"}.get((plain_dup, fenced_dup))
    if outcome is None:
        raise LabkitError(f"the runs fit no choice: the zombie's duplicate without transactions {list(plain_dup)}, "
                          f"with fencing {list(fenced_dup)}")
    return outcome


#: Seconds each step of :func:`zombie` may take before it is an error: a step takes about 15 s alone (a Java client's
#: start, the group's 10 s session timeout) and 3.6 times as long with a room of 8 running notebook 02 at once on two
#: cores (bench/room.py), where 90 s was once too short for instance 2's first output.
STEP_S = 240.0

#: The runs :func:`zombies` can make: name -> (client, the processors' extra options). "java, no rebalance listener"
#: is Kafka's Java client subscribed without a ``ConsumerRebalanceListener`` (the processor's ``rebalance_listener``):
#: its consumer, fenced while the process was paused, rejoins the group from its background thread at once, where
#: with a listener it waits for the application's next poll (``ConsumerMembershipManager``).
VARIANTS = {"librdkafka": ("librdkafka", {}), "java": ("java", {}),
            "java, no rebalance listener": ("java", {"rebalance_listener": False})}


def zombie(exp: Experiment, fencing: str, *, per_record_ms: int = 3000, client: str | None = None,
           **options: object) -> dict:
    """Seed 002's A, B, B: two consume-transform-produce instances of one group on a one-partition
    input holding two records. Instance 1 processes record 1 (output A), takes record 2 and is
    paused (SIGSTOP, like a long GC) before processing it (in a 2 s hold at its ``after_poll`` step). Its session
    times out, instance 2 gets the partition and processes record 2 (output B). Then instance 1 resumes, processes
    record 2 (``per_record_ms``: its client's background threads run meanwhile, as after a real GC pause) and writes
    its B.

    Args:
        fencing: "none" (no transactions: at-least-once), "transactional.id" (both instances share
            one ``transactional.id``: instance 2's ``init_transactions`` bumps the producer epoch and
            fences instance 1), or "group metadata" (KIP-447: one ``transactional.id`` per instance;
            the group coordinator rejects the zombie's ``send_offsets_to_transaction``).
        per_record_ms: processing time per record, in ms (the zombie's runs after it wakes).
        client: both instances' client, "librdkafka" or "java" (:data:`labkit.crashlab.registry.CLIENTS`);
            default ``$LABKIT_CLIENT``, else librdkafka.
        **options: more processor options for both instances (e.g. ``rebalance_listener=False``).
    Returns:
        ``{"input", "output", "instance-1", "instance-2", "epochs"}``; epochs: producer epoch of
        the shared ``transactional.id`` before and after instance 2 started (only with
        "transactional.id", else ``None``). Final reads are recorded.
    Raises:
        ValueError: unknown ``fencing`` (the message lists them).
        TimeoutError: a step (a record taken, instance 2's output or commit, a participant's end) did not come within
            :data:`STEP_S` seconds; the message names it.
    """
    if fencing not in FENCING:
        raise ValueError(f"unknown fencing {fencing!r}; choose one of {', '.join(FENCING)}")
    src, out = exp.topic("input"), exp.topic("output")
    exp.participant("source", "producer", topic=src, iterations=2).start().wait(STEP_S)
    tid = f"{exp.name}-{uuid.uuid4().hex[:6]}"
    common = dict(client=client, topic=src, output_topic=out, group_id=f"{tid}-group", batch=1, per_record_ms=per_record_ms,
                  idle_ms=per_record_ms + 8000, transactional=fencing != "none",
                  config={"transaction.timeout.ms": 10000} if fencing != "none" else {}, **options)
    tids = [tid] * 2 if fencing == "transactional.id" else [f"{tid}-1", f"{tid}-2"]
    one = exp.participant("instance-1", "processor", transactional_id=tids[0], sleep_at={"after_poll": 2000},
                          **common).start()
    wait_for(lambda: exp.history.first("consume", "instance-1", "source-2"), "instance-1 never took record 2", STEP_S)
    one.pause()
    epochs = {"before": describe_transaction(exp.bootstrap, tid)["producer_epoch"]} if fencing == "transactional.id" else None
    two = exp.participant("instance-2", "processor", transactional_id=tids[1], **common).start()
    wait_for(lambda: exp.history.first("ack", "instance-2"), "instance-2 never wrote its output", STEP_S)
    wait_for(lambda: exp.history.first("txn_end" if fencing != "none" else "offsets_committed", "instance-2"),
             "instance-2 never committed", STEP_S)
    if epochs is not None:
        epochs["after"] = describe_transaction(exp.bootstrap, tid)["producer_epoch"]
    one.resume()
    one.wait(STEP_S)
    two.wait(STEP_S)
    exp.final_reads(src, out)
    return {"input": src, "output": out, "instance-1": one, "instance-2": two, "epochs": epochs}


def zombies(bootstrap: str, fencing: str, variants: tuple[str, ...] = CLIENTS,
            experiments: dict[str, Experiment] | None = None) -> dict[str, dict]:
    """:func:`zombie` for each of ``variants`` (names of :data:`VARIANTS`: by default one run per client) at once,
    each in an experiment of its own: ``experiments[variant]`` if given (e.g. one a live timeline follows), else a new
    ``zombie-<fencing>-<variant>``. Takes about 30 s.

    Returns:
        ``{variant: {"exp": its Experiment, **zombie's result}}``.
    Raises:
        ValueError: unknown ``fencing`` or variant; what :func:`zombie` raises.
    """
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown variants {', '.join(sorted(unknown))}; the variants are {', '.join(VARIANTS)}")
    label = {"none": "plain", "transactional.id": "tid", "group metadata": "group"}.get(fencing)
    if label is None:
        raise ValueError(f"unknown fencing {fencing!r}; choose one of {', '.join(FENCING)}")

    def run(variant: str) -> dict:
        client, options = VARIANTS[variant]
        slug = variant.replace(", ", "-").replace(" ", "-")
        exp = (experiments or {}).get(variant) or Experiment(f"zombie-{label}-{slug}", bootstrap)
        return {"exp": exp, **zombie(exp, fencing, client=client, **options)}

    with ThreadPoolExecutor(len(variants)) as pool:
        return dict(zip(variants, pool.map(run, variants)))


def zombie_errors(run: dict) -> list[tuple[str, str]]:
    """The errors instance 1 (the zombie) of a :func:`zombie` run met, as its history records them, in order:
    ``[(event kind, error name), ...]`` (kinds ``send_failed``, ``fenced``, ``txn_end``: the error names are the
    client's, e.g. librdkafka's ``_FENCED``, or Kafka's ``org.apache.kafka.common.protocol.Errors`` names from
    the Java client)."""
    zombie_, exp = run["instance-1"], run["exp"]
    return [(e.kind, e.error) for e in exp.history.events() if e.participant == zombie_.name and e.error]


def epochs_per_transaction(bootstrap: str, clients: tuple[str, ...] = CLIENTS, transactions: int = 4) -> pd.DataFrame:
    """The producer epoch of one transactional producer after each of its ``transactions`` commits, on each of
    ``clients`` (at once, an experiment each). After each commit the producer is paused (SIGSTOP, in a 1.5 s hold at
    its ``after_commit`` step) while the lab asks the partition leader (DescribeProducers, KIP-664: the epoch of the
    producer's last batch or marker on the partition) and the transaction coordinator (DescribeTransactions), once the
    coordinator says CompleteCommit: a commit returns when the coordinator has logged PrepareCommit, and writes the
    markers after that (``TransactionCoordinator``, ``TransactionMarkerChannelManager``), so until then the leader's
    last batch is the transaction's data, with the epoch it began with (a loaded machine showed Java's 1, 1, 3, 4).

    With transaction version 2 (KIP-890, which Kafka 4.4 formats its storage with) a client that speaks it (Kafka's
    Java client 4.x) gets a new epoch at every commit and abort: the coordinator bumps it when it ends a transaction and
    returns it in the EndTxn response (TransactionManager.EndTxnHandler), and writes the markers with it.
    librdkafka has no KIP-890 (librdkafka issue 5423): its transactions end on version 1, where a commit keeps the
    epoch. It changes at ``init_transactions``, when the coordinator fences a timed-out transaction, and at the abort
    after an abortable error that needs a bump (KIP-360: an unknown producer id, a timed-out batch;
    ``rdkafka_txnmgr.c``, ``txn_requires_epoch_bump``), as on the Java client (``TransactionManager``,
    ``clientSideEpochBumpRequired`` in 4.3 and 4.4).

    Returns:
        One row per client and transaction: client, txn (1 = the first), producer_id, producer_epoch
        (DescribeProducers), coordinator_epoch (DescribeTransactions).
    Raises:
        TimeoutError: a transaction did not commit, or its markers were not written, within 60 s (the producer is
            resumed first).
        RuntimeError: the producer began its next transaction before the lab asked (the pause came too late).
    """
    def run(client: str) -> list[dict]:
        exp = Experiment(f"epochs-{client}", bootstrap)
        topic = exp.topic("out")
        tid = f"{topic}-{uuid.uuid4().hex[:6]}"
        p = exp.participant("producer", "producer", client=client, topic=topic, mode="transactional",
                            transactional_id=tid, iterations=transactions, sleep_at={"after_commit": 1500}).start()
        rows = []
        for txn in range(1, transactions + 1):
            wait_for(lambda: any(e.kind == "txn_end" and e.txn == txn and e.outcome == "committed"
                                 for e in exp.history.events() if e.participant == p.name),
                     f"{client}: transaction {txn} never committed", 60)
            p.pause()
            try:  # the commit returned once the coordinator logged PrepareCommit; its markers come after that
                wait_for(lambda: describe_transaction(bootstrap, tid)["state"] == "CompleteCommit",
                         f"{client}: the coordinator never wrote transaction {txn}'s markers", 60, 0.5,
                         hint="the broker's server.log")
                leader = describe_producers(bootstrap, topic).iloc[0]
                coordinator = describe_transaction(bootstrap, tid)
                if any(e.kind == "txn_begin" and e.txn == txn + 1 for e in exp.history.events()):
                    raise RuntimeError(f"{client}: transaction {txn + 1} began before the lab asked")
            finally:
                p.resume()
            rows.append({"client": client, "txn": txn, "producer_id": int(leader.producer_id),
                         "producer_epoch": int(leader.producer_epoch),
                         "coordinator_epoch": coordinator["producer_epoch"]})
        p.wait(60)
        return rows

    with ThreadPoolExecutor(len(clients)) as pool:
        return pd.DataFrame([row for rows in pool.map(run, clients) for row in rows])


def epoch_figure(epochs: pd.DataFrame) -> go.Figure:
    """The producer epoch (DescribeProducers) after each commit, one line per client, from
    :func:`epochs_per_transaction`."""
    fig = px.line(epochs, x="txn", y="producer_epoch", color="client", markers=True,
                  color_discrete_map={c: participant_colour(c) for c in epochs.client.unique()},
                  title="producer epoch after each commit (DescribeProducers): one producer per client",
                  labels={"txn": "transaction", "producer_epoch": "producer epoch"})
    return fig.update_xaxes(dtick=1).update_yaxes(dtick=1, range=[-0.5, epochs.producer_epoch.max() + 0.5])


class NoPlannedCrash(RuntimeError):
    """:func:`offsets_step_run`'s processor (``processor``, the :class:`~labkit.crashlab.participant.Participant`)
    ended without the crash planned after the learner's step."""

    def __init__(self, processor: Participant, message: str) -> None:
        super().__init__(message)
        self.processor = processor


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
        NoPlannedCrash: the processor did not crash where planned (e.g. ``step`` raised: its stderr is quoted).
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
        raise NoPlannedCrash(p, f"{p.name} ended {p.status}, not crashed after your step: "
                                f"{p.stderr_log.read_text()[-1500:]}")
    # its crashed self holds the partition until its session times out; idle_ms counts from the assignment after that
    p.restart(crash_at=None).wait(120)
    exp.final_reads(src, out)
    return {"input": src, "output": out, "processor": p, "check": exp.check(out, src)}


@marked
def check_offsets_step(exp: Experiment, answer: object) -> Verdict:
    """Notebook 02's exercise: ``answer``, a function ``(producer, consumer, offsets)`` that commits a batch's
    input offsets, must make the read-process-write loop exactly-once through a crash between it and
    ``commit_transaction`` (:func:`offsets_step_run`, a real run): no duplicate, nothing unprocessed. A run that did
    not get through because of the step is a wrong answer: the step raised (a traceback through its code), a client
    call of it failed, or the processor failed after the step had run (e.g. a step that committed the transaction
    itself).

    Raises:
        NoPlannedCrash: the processor failed before the step ever ran (the broker or the lab, not the answer).
        TimeoutError, confluent_kafka.KafkaException: the broker did not answer (what :func:`offsets_step_run`
            raises).
    """
    if (v := unanswered(answer, "a function def finish_batch(producer, consumer, offsets): ...")):
        return v
    if not callable(answer):
        return Verdict("wrong", "The answer is a function: def finish_batch(producer, consumer, offsets): ...")
    try:  # the processor runs the function's source: a lambda, a built-in or a function typed elsewhere has none
        inspect.getsource(answer)
        named = answer.__name__.isidentifier()
    except (OSError, TypeError, AttributeError):
        named = False
    if not named:
        return Verdict("wrong", "Define your step with def in a notebook cell: def finish_batch(producer, consumer, "
                                "offsets): ...")
    try:
        run = offsets_step_run(exp, answer)
    except NoPlannedCrash as exc:  # the processor did not crash after the step: by the step's doing, or the lab's?
        p = exc.processor
        ran = any(e.participant == p.name and (e.kind == "offsets_sent" or e.kind in ("failed", "fenced")
                  and e.step == f"your {answer.__name__}") for e in exp.history.events())
        if not ran and 'File "<string>"' not in p.stderr_log.read_text(errors="replace"):
            raise  # it failed before the step ever ran
        return Verdict("wrong", f"The processor ended {p.status} after running your {answer.__name__}, before the "
                                f"planned crash (see {p.stderr_log}). The step runs inside the batch's transaction, "
                                "after its outputs are flushed and before the loop's commit_transaction.")
    counts = run["check"].counts()
    if counts["unprocessed"]:
        return Verdict("wrong", f"{counts['unprocessed']} input record(s) never reached the output: their offsets were "
                                "committed, but the transaction that wrote their outputs was aborted by the crash. "
                                "The offsets must commit in the same transaction as the outputs.")
    if counts["duplicate"]:
        return Verdict("wrong", f"{counts['duplicate']} duplicate(s): after the restart the processor read inputs "
                                "whose outputs were already committed, so their offsets never committed with them. "
                                "Which producer call adds the consumer's offsets to the transaction?")
    if not run["check"].ok:
        return Verdict("wrong", f"The checker found: {counts}")
    return Verdict("right", "Every input exactly once in read_committed through a SIGKILL: the offsets committed "
                            "(or aborted) atomically with the outputs (KIP-98's send_offsets_to_transaction, "
                            "fenced by group metadata since KIP-447).")
