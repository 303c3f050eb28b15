"""Notebook 07, transactional share acknowledgements (KIP-1289), MODELLED: its opening question (:data:`QUESTION`,
answered by :func:`fixes_outcome` from notebook 06's two crash points replayed on the model); the seed's corner cases as
scenarios on :mod:`labkit.models.kip1289`, notebook 06's two crash points replayed with the proposal (with
the effect as a Kafka output: notebook 06's own effect, a SQLite write, is outside KIP-1289, which at "Voting" (as of
2026-12) is scoped to a Kafka producer's output), one transaction across two share partitions (two
``__share_group_state`` partitions, two share coordinators), the open questions of the draft as options, the seed's
metrics, and the source-only two-phase commit with an external SQLite database.

No Kafka release has KIP-1289, so nothing here runs on a broker but the look-up of the draft's wire numbers
(:data:`draft_collisions`, the broker's ApiVersions answer). The model's share partition is checked against the real
broker in ``tests/test_share_partition.py``.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path

import pandas as pd

from labkit.core.errors import LabkitError
from labkit.core.history import Event
from labkit.kafka import protocol
from labkit.learn.exercise import Verdict, marked, unanswered
from labkit.learn.predictions import Question
from labkit.models import share_partition, stepper
from labkit.models.explore import Exploration, explore, replay
from labkit.models.kip1289 import INPUT, World
from labkit.share.check import check_share
from labkit.share.timeline import share_timeline_figure

# Notebook 07 drives parts of the model itself, through this module (with ``replay``, ``INPUT`` and ``World``
# above): the stepper (drawing notebook 06's timelines) and its transactions table, and the share partition
# that replays what real consumers did.
Stepper, transactions = partial(stepper.Stepper, draw=share_timeline_figure), stepper.transactions
replay_client_events = share_partition.replay_client_events

FLOW = [("poll", "c1"), ("produce", "c1"), ("send_acks", "c1")]
OUT, STATE_0, STATE_1 = "output-0", "__share_group_state-0", "__share_group_state-1"

#: The drafts' wire numbers against the running release, as its broker answers ApiVersions (notebook 07 shows the
#: API key and the TxnOffsetCommit version, ``error_codes=False``: no jar, no JVM; notebook 05 adds the error code).
draft_collisions = protocol.draft_collisions


def markers(tid: str = "tx-c1", *partitions: str) -> list[tuple]:
    """The coordinator's WriteTxnMarkers for ``tid``, one step per partition (default: the output, then
    ``__share_group_state-0``)."""
    return [("markers", tid, p) for p in partitions or (OUT, STATE_0)]


#: The seed's scenarios (§2.1 and §6): the steps up to the interesting point; :func:`finish` runs the rest.
SCENARIOS = {
    "commit": FLOW + [("commit", "c1")] + markers(),
    "abort": FLOW + [("abort", "c1")] + markers(),
    "crash before send_share_acks": FLOW[:2] + [("crash", "c1"), ("restart", "c1")] + markers("tx-c1", OUT),
    "crash after send_share_acks (critical case)": FLOW + [("crash", "c1"), ("restart", "c1")] + markers(),
    "zombie fenced": FLOW + [("zombie", "c1")] + markers() + [("commit", "c1")],
    "transaction timeout": FLOW + [("timeout", "tx-c1")] + markers() + [("commit", "c1")],
    "coordinator crash after PREPARE_COMMIT": FLOW + [("commit", "c1"), ("tc_crash",), ("tc_recover",)] + markers(),
    "share coordinator crash while pending": FLOW + [("sc_crash", STATE_0), ("commit", "c1")] + markers(),
}
#: Notebook 06's two crash points of a framework sink, in the proposal's loop (records + acks in one transaction),
#: with the effect as a Kafka output: 06's own effect was a SQLite write, which needs :func:`two_phase_commit`.
NOTEBOOK_06 = {"ack_first (06: acknowledged, then crashed before the sink: lost)": SCENARIOS[
                   "crash after send_share_acks (critical case)"],
               "sink_first (06: written, then crashed before acknowledging: duplicated)": SCENARIOS[
                   "crash before send_share_acks"]}
#: The notebook's opening question: which of notebook 06's failures a transactional acknowledgement removes
#: (answered by :data:`NOTEBOOK_06`'s two scenarios on the model).
QUESTION = Question(
    "07", "if a share consumer's acknowledgement went into the same Kafka transaction as its output, which of notebook "
          "06's failures would go away: the records lost when it acknowledged first, the records duplicated when it "
          "wrote first, or both?",
    {"lost_only": "Only the lost records", "duplicated_only": "Only the duplicated records", "both": "Both",
     "neither": "Neither"},
    {"lost_only": "The duplicate goes too: a crash before the commit discards the output written in the open "
                  "transaction and returns the record to AVAILABLE, so its redelivery writes the only committed copy.",
     "duplicated_only": "The loss goes too: an acknowledgement in an open transaction is only pending (TX_PENDING in "
                        "the draft); a crash aborts it and the record is delivered again.",
     "neither": "Output and acknowledgement commit together or not at all, so neither half can outlive the other "
                "(for an output that is a Kafka record; notebook 06's SQLite write is outside a Kafka transaction)."},
    answered_by="the model (MODELLED: KIP-1289 is in no Kafka release)")


def fixes_outcome(replayed: pd.DataFrame) -> str:
    """Which choice of :data:`QUESTION` the model bore out, from :func:`scenario_table` of :data:`NOTEBOOK_06`
    (``replayed``): the loss is gone if the acknowledge-first crash left every record's output committed at least
    once and the share checker found no lost effect; the duplicate is gone if the write-first crash left none
    committed twice and no duplicate effect.

    Raises:
        LabkitError: ``replayed`` lacks either scenario (the lab's failure, named).
    """
    rows = {name.split(" ", 1)[0]: row for name, row in zip(replayed.scenario, replayed.to_dict("records"))}
    if set(rows) != {"ack_first", "sink_first"}:
        raise LabkitError(f"give notebook 06's two scenarios (NOTEBOOK_06), not {sorted(rows)}")
    lost_gone = min(rows["ack_first"]["outputs"]) >= 1 and rows["ack_first"]["check"]["lost effect"] == 0
    dup_gone = max(rows["sink_first"]["outputs"]) <= 1 and rows["sink_first"]["check"]["duplicate effect"] == 0
    return {(True, True): "both", (True, False): "lost_only", (False, True): "duplicated_only",
            (False, False): "neither"}[(lost_gone, dup_gone)]


#: Two share partitions (``input-0``, ``input-1``, one record each), each with its state on its own
#: ``__share_group_state`` partition: c1's one poll gets both records, one transaction acknowledges both.
MULTI = dict(partitions=2, records=1)
MULTI_SCENARIOS = {
    "commit across two share partitions": FLOW + [("commit", "c1")] + markers("tx-c1", OUT, STATE_0, STATE_1),
    "coordinator crash between two markers": FLOW + [("commit", "c1")] + markers("tx-c1", STATE_0)
    + [("tc_crash",), ("tc_recover",)],
    "share coordinator of input-1 crashes while pending": FLOW + [("commit", "c1")] + markers("tx-c1", OUT, STATE_0)
    + [("sc_crash", STATE_1)],
    "share coordinator of input-1 crashes before send_share_acks": FLOW[:2] + [("sc_crash", STATE_1), ("send_acks", "c1")],
    "crash after send_share_acks": FLOW + [("crash", "c1"), ("restart", "c1")],
}


def finish(world: World, max_steps: int = 200) -> list[str]:
    """Run the consumers' loops, with no more faults, until nothing is left to do: always the first
    possible step (deterministic). Returns what each step did.

    Raises:
        RuntimeError: still not done after ``max_steps`` steps (a loop: say which state it is in).
    """
    said = []
    for _ in range(max_steps):
        actions = world.actions(faults=False)
        if not actions:
            world.observe()
            return said
        said.append(world.step(actions[0]))
    raise RuntimeError(f"the model did not settle in {max_steps} steps: {world.sp.offsets}")


def run(steps: list[tuple], records: int = 2, **options: object) -> tuple[World, list[str]]:
    """A world of ``records`` input records (of each share partition) and two consumers: ``steps``, then
    :func:`finish`. Returns the world (its ``events`` are the history) and what each step did."""
    world, said = replay(steps, records=records, **options)
    return world, said + finish(world)


def outcome(world: World) -> dict:
    """What a scenario left, for each input record (share partition by share partition, offset by offset):
    its final state and delivery count, how many times its output was committed; what read_committed
    returns (``input-0:1``: the output of that record), the invariants broken, and the share checker's
    counts (:func:`~labkit.share.check.check_share`, as for the real runs of notebook 06)."""
    committed = [r.source for r in world.out.records if r.outcome == "committed"]
    records = [r for sp in world.sps for r in sp.offsets]
    check = check_share(world.events, topic=INPUT, delivery_limit=world.sp.limit, lock_ms=world.lock_ms,
                        slack_ms=0, sink=True)
    return {"states": [r.state for r in records], "delivery_counts": [r.count for r in records],
            "outputs": [committed.count((i, o)) for i, sp in enumerate(world.sps) for o in range(sp.records)],
            "read_committed": [world.label(r) for r in world.out.read_committed()],
            "violations": world.violations(final=True), "check": check.counts()}


def scenario_table(scenarios: dict[str, list[tuple]] = SCENARIOS, **options: object) -> pd.DataFrame:
    """One row per scenario: its :func:`outcome` after :func:`run`."""
    return pd.DataFrame([{"scenario": name, **outcome(run(steps, **options)[0])} for name, steps in scenarios.items()])


def lock_question(**world: object) -> dict[str, Exploration]:
    """Open question (a): explore every interleaving (:func:`~labkit.models.explore.explore`) with each
    answer to "the acquisition lock expires while the acknowledgement is pending": freeze, abort, release."""
    return {option: explore(lock_while_pending=option, **world) for option in ("freeze", "abort", "release")}


def first_duplicate(**world: object) -> Exploration:
    """The shortest interleaving of ``World(**world)`` that commits a record's output twice (the
    explorer passing by every other violation on its way)."""
    return explore(target="duplicate", **world)


def poison_pill(count_on_abort: str, limit: int = 3, rounds: int = 10) -> World:
    """Open question (b): one record whose transaction always aborts (the application fails on it),
    ``rounds`` times or until it cannot be polled any more. "keep": archived at the delivery limit;
    "revert": it comes back for ever."""
    world = World(records=1, consumers=1, limit=limit, count_on_abort=count_on_abort, faults={})
    for _ in range(rounds):
        if ("poll", "c1") not in world.actions():
            break
        for step in FLOW + [("abort", "c1")] + markers():
            world.step(step)
    return world


def release_question(allow: bool) -> World:
    """Open question (c): the application RELEASEs offset 0 inside its transaction, after writing its
    output. Forbidden (the draft): TxnShareAcknowledge fails, the transaction aborts. Allowed: the
    commit makes the output visible *and* the record AVAILABLE: it is processed again."""
    steps = FLOW + ([("commit", "c1")] if allow else []) + markers()  # refused: the client aborted
    return run(steps, records=1, release_in_txn=allow, decisions={0: "RELEASE"}, limit=2)[0]


def metrics(events: list[Event]) -> dict:
    """The seed's metrics (§3.5), from a history: ``share-transaction-active`` (most transactions with
    share acknowledgements open at once), ``share-transaction-prepare-time-ms`` (our reading: first
    TxnShareAcknowledge to ``commit_transaction``), ``share-transaction-commit-time-ms``
    (``commit_transaction`` to the COMMIT markers), ``share-transaction-abort-total``,
    ``share-transaction-timeout-total``. Times are lists (one per transaction), ms."""
    acked, start, open_, active, out = {}, {}, set(), 0, {"prepare": [], "commit": [], "aborts": 0, "timeouts": 0}
    for e in events:
        key = (e.participant.split(".")[0], e.txn)
        if e.kind == "acknowledged":
            acked.setdefault(key, e.mono_ns)
            open_.add(key)
            active = max(active, len(open_))
        elif e.kind == "txn_commit_start" and key in acked:
            start[key] = e.mono_ns
            out["prepare"].append((e.mono_ns - acked[key]) / 1e6)
        elif e.kind == "txn_end" and key in acked:
            open_.discard(key)
            if e.outcome == "committed":
                out["commit"].append((e.mono_ns - start[key]) / 1e6)
            else:
                out["aborts"] += 1
                out["timeouts"] += e.step == "transaction.timeout.ms"
    return {"share-transaction-active": active, "share-transaction-prepare-time-ms": out["prepare"],
            "share-transaction-commit-time-ms": out["commit"], "share-transaction-abort-total": out["aborts"],
            "share-transaction-timeout-total": out["timeouts"]}


def two_phase_commit(db: str | Path, crash: str | None = None) -> dict:
    """The seed's source-only case (§2.2, and the KIP-1310 sketch of §3): a consumer writes a record's
    effect to an external SQLite database, and Kafka decides. (Outside KIP-1289, at Voting as of 2026-12; KIP-939,
    accepted, arranges it the other way round: Kafka prepares, the database stores the decision.) Phase 1: the effect
    goes into SQLite as *prepared* (a table keyed by the transaction), the acknowledgement into the Kafka transaction
    (MODELLED), then ``commit_transaction`` writes PREPARE_COMMIT: the decision. Phase 2: SQLite moves
    the prepared row to ``effects``. Recovery after a crash asks the coordinator's log for the decision
    and finishes phase 2, or rolls back (and the record, back to AVAILABLE, is processed again).

    Args:
        db: the SQLite file.
        crash: None, "after_prepare" (dies before ``commit_transaction``) or "between" (dies after
            it, before SQLite's commit); only in the first round.
    Returns:
        ``{"effects": [offsets in SQLite's effects], "states": [final record states], "rounds": int}``.
    Raises:
        ValueError: an unknown ``crash``.
    """
    if crash not in (None, "after_prepare", "between"):
        raise ValueError(f"crash must be None, 'after_prepare' or 'between', not {crash!r}")
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE IF NOT EXISTS prepared (txn TEXT, source INTEGER);"
                      "CREATE TABLE IF NOT EXISTS effects (source INTEGER PRIMARY KEY);")
    world, rounds = World(records=1, consumers=1, faults={"crash": 1}), 0
    while ("poll", "c1") in world.actions():
        rounds += 1
        world.step(("poll", "c1"))
        txn = f"tx-c1:{world.clients['c1'].epoch}"
        with con:
            con.executemany("INSERT INTO prepared VALUES (?, ?)", [(txn, o) for _, o in world.clients["c1"].held])
        for step in [("produce", "c1"), ("send_acks", "c1")] + ([] if crash == "after_prepare" and rounds == 1
                                                                  else [("commit", "c1")]):
            world.step(step)
        if crash and rounds == 1:
            world.step(("crash", "c1"))
        while recovery := [a for a in world.actions(faults=False) if a[0] in ("restart", "markers")]:
            world.step(recovery[0])  # InitProducerId aborts an open transaction; markers
        decided = any(t.state == "PREPARE_COMMIT" and f"{t.tid}:{t.epoch}" == txn for t in world.tc.log)
        with con:  # phase 2, or recovery: the coordinator's log decides
            if decided:
                con.execute("INSERT OR IGNORE INTO effects SELECT source FROM prepared WHERE txn = ?", (txn,))
            con.execute("DELETE FROM prepared WHERE txn = ?", (txn,))
    effects = [o for (o,) in con.execute("SELECT source FROM effects ORDER BY source")]
    con.close()
    return {"effects": effects, "states": [r.state for r in world.sp.offsets], "rounds": rounds}


@marked
def check_abort_prediction(answer: object) -> Verdict:
    """Notebook 07's exercise (MODELLED): the seed's "abort" scenario on one record (poll, produce,
    send_share_acks, abort, then the loop carries on). ``answer`` predicts ``{"state": ..., "delivery_count": n,
    "outputs_committed": n}`` for that record at the end; checked by running the scenario on the model."""
    keys = ("state", "delivery_count", "outputs_committed")
    if (v := unanswered(answer, f"a dict with keys {', '.join(keys)}")):
        return v
    if not isinstance(answer, dict) or set(answer) != set(keys):
        return Verdict("wrong", f"The answer is a dict with exactly the keys {', '.join(keys)}.")
    got = outcome(run(SCENARIOS["abort"], records=1)[0])
    real = {"state": got["states"][0], "delivery_count": got["delivery_counts"][0],
            "outputs_committed": got["outputs"][0]}
    if answer == real:
        return Verdict("right", f"{real}: the abort discarded the output and returned the record to AVAILABLE; it was "
                                "delivered again (the count went up: the model's default for open question (b)) and "
                                "committed once, output and acknowledgement together.")
    hints = {"state": "Does the loop stop after the abort, or does it poll again?",
             "delivery_count": "An abort returns the record to AVAILABLE, and every acquisition counts a delivery.",
             "outputs_committed": "An aborted transaction's output is never committed; what about the retry's?"}
    return Verdict("wrong", " ".join(h for k, h in hints.items() if answer.get(k) != real[k]) + " (MODELLED)")
