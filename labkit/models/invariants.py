"""MODELLED, KIP-1289: what "exactly once" means for a :class:`~labkit.models.kip1289.World`, checked by the
explorer in every state and on every step, and by the tests on hand-made bad states.

A transaction's markers reach its partitions one by one ([KIP-98]: the coordinator writes
PREPARE_COMMIT, then WriteTxnMarkers to each partition), so between two markers an output may be
visible while its acknowledgement is still pending on another ``__share_group_state`` partition, or
the other way round: that is in flight, not broken, as long as the decision in ``__transaction_state``
is COMMIT. Broken, per input record (``share partition:offset``):

* [exactly once] its output committed twice (duplicate); its output committed while the record is
  neither ACKNOWLEDGED nor still pending in the transaction that committed the output (the
  acknowledgement discarded or never made); ACKNOWLEDGED with no committed output and none decided
  (loss).
* [KIP-1289, atomicity across partitions] a transaction that completed (COMPLETE_COMMIT/ABORT, every
  marker written) or is not open still has an acknowledgement pending on a partition; an open one has
  one on a ``__share_group_state`` partition that is not in it, or that already had its marker. On a
  step: a COMMIT marker leaves one of the transaction's acknowledgements on that partition unapplied,
  an ABORT marker makes a record ACKNOWLEDGED, or ARCHIVED below the delivery limit (at the limit, the
  released record is archived: KIP-932).
* [KIP-932] a delivery count above ``share.delivery.count.limit``; ACKNOWLEDGED and ARCHIVED are
  terminal (a step that leaves one); at the end, a record neither.
"""

from __future__ import annotations

from labkit.models.share_partition import ACKNOWLEDGED, ARCHIVED, PENDING, TERMINAL
from labkit.models.txn_coordinator import ONGOING, PREPARE_ABORT, PREPARE_COMMIT

APPLIED = {"ACCEPT": ACKNOWLEDGED, "REJECT": ARCHIVED}


def state_violations(world, final: bool = False) -> list[str]:
    """The invariants ``world`` (a :class:`~labkit.models.kip1289.World`) breaks now, in words (empty:
    none); with ``final`` (nothing but a fault can happen), also a record that is not terminal."""
    committed: dict[tuple, list[int]] = {}
    open_: dict[tuple, list[int]] = {}
    for r in world.out.records:
        if r.outcome != "aborted":
            (committed if r.outcome == "committed" else open_).setdefault(r.source, []).append(r.pid)
    tc, found = world.tc, []
    for i, sp in enumerate(world.sps):
        for o, r in enumerate(sp.offsets):
            where, outs = world.label((i, o)), committed.get((i, o), ())
            if len(outs) > 1:
                found.append(f"duplicate: {where}'s output committed {len(outs)} times")
            if outs and r.state != ACKNOWLEDGED and not (r.state == PENDING and r.pid in outs):
                found.append(f"{where}'s output is committed but the record is {r.state}: its acknowledgement "
                             "was discarded or never made")
            if not outs and r.state == ACKNOWLEDGED and not any(tc.decision(p) == PREPARE_COMMIT
                                                                for p in open_.get((i, o), ())):
                found.append(f"loss: {where} is ACKNOWLEDGED with no committed output")
            if r.count > sp.limit:
                found.append(f"{where} delivered {r.count} times, over the limit {sp.limit}")
            if final and r.state not in TERMINAL:
                found.append(f"{where} ended {r.state}")
    return found + _leftovers(world)


def _leftovers(world) -> list[str]:
    """Pending acknowledgements that no marker will ever settle (see the module's doc)."""
    tc, found = world.tc, []
    txns = {t.pid: t for t in (tc.persisted if tc.down else tc.txns).values()}
    for i, sp in enumerate(world.sps):
        partition = world.state_names[i]
        for pid, acks in sp.pending.items():
            t = txns.get(pid)
            settles = t is not None and t.state in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT) and \
                partition in t.partitions and (tc.down or partition not in t.marked)
            if not settles:
                found.append(f"{t.tid if t else pid}'s transaction is {t.state if t else 'unknown'} but its "
                             f"acknowledgement of {', '.join(world.label((i, o)) for o in sorted(acks))} is still "
                             f"pending on {partition}")
    return found


def step_violations(before, after, action: tuple) -> list[str]:
    """The invariants broken by the step ``action`` from ``before`` to ``after`` (two
    :class:`~labkit.models.kip1289.World`), in words: a terminal record that changed; a marker that
    did not apply (COMMIT) or did apply (ABORT) the transaction's acknowledgements on its partition."""
    found = []
    for i, (sp0, sp1) in enumerate(zip(before.sps, after.sps)):
        if sp0.offsets == sp1.offsets:  # most steps change no record of a share partition
            continue
        for o, (a, b) in enumerate(zip(sp0.offsets, sp1.offsets)):
            if a.state in TERMINAL and b.state != a.state:
                found.append(f"{before.label((i, o))} left the terminal state {a.state} for {b.state}")
    if action[0] != "markers" or action[2] == before.out.name:
        return found
    t = before.tc.txns[action[1]]
    for i in before.hosted[action[2]]:
        offsets = after.sps[i].offsets
        for o, ack_type in sorted(before.sps[i].pending.get(t.pid, {}).items()):
            if t.state == PREPARE_COMMIT and offsets[o].state != APPLIED.get(ack_type):
                found.append(f"{t.tid}'s COMMIT marker left its {ack_type} of {before.label((i, o))} "
                             f"{offsets[o].state}")
        for o, (a, b) in enumerate(zip(before.sps[i].offsets, offsets)):  # ARCHIVED at the limit is KIP-932's
            if t.state == PREPARE_ABORT and a.state != b.state and \
                    (b.state == ACKNOWLEDGED or (b.state == ARCHIVED and b.count < after.sps[i].limit)):
                found.append(f"{t.tid}'s ABORT marker made {before.label((i, o))} {b.state}")
    return found
