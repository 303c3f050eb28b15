"""MODELLED, KIP-1289: canonical state keys for the explorer (symmetry reduction).

Many states of a :class:`~labkit.models.kip1289.World` are one state under other names, and behave the
same from there on, renamed. :meth:`Canon.key` gives every state of one such class the same key, a
compact tuple of small ints and short strings, so that :func:`~labkit.models.explore.explore` visits
the class once. The renamings, and why each is a symmetry of the model (same steps, renamed; same
invariants, which never look at a name):

* consumers: ``c1``, ``c2``... run the same loop with the same options; a permutation renames every
  instance (``c1.2`` follows ``c1``), its ``transactional.id`` and producer id.
* share partitions: with equal record counts and a ``__share_group_state`` mapping that the permutation
  keeps (two partitions sharing a state partition stay sharing), nothing tells them apart.
* records of a share partition: a poll takes the lowest AVAILABLE offsets, so the order of records that
  may still be delivered matters and is kept; a record that is ACKNOWLEDGED or ARCHIVED is never
  delivered again (KIP-932: terminal), so where it sits does not: finished records are sorted by what
  they are (state, delivery count, decision, outputs, pending acknowledgements). A record carries its
  application decision (ACCEPT/REJECT) with it.

The key is the least of the state's encodings under every consumer and share-partition permutation;
records are renumbered within each encoding. Clock, history and the logs' past are left out, as in
:meth:`~labkit.models.kip1289.World.key` (the logs are what the state says they are: the coordinators
reload to it).
"""

from __future__ import annotations

from itertools import permutations

from labkit.models.share_partition import TERMINAL
from labkit.models.txn_coordinator import ONGOING, PREPARE_ABORT, PREPARE_COMMIT

#: A transaction's state as it matters: EMPTY, COMPLETE_COMMIT and COMPLETE_ABORT behave alike (the next
#: AddPartitionsToTxn begins a new transaction), so they are one.
OPEN = {ONGOING: ONGOING, PREPARE_COMMIT: PREPARE_COMMIT, PREPARE_ABORT: PREPARE_ABORT}


class Canon:
    """Canonical keys for the worlds reachable from ``start`` (a :class:`~labkit.models.kip1289.World`, its
    topology and consumers fixed). ``orders``: the consumer and share-partition permutations that may
    rename a state (each a pair: new number of each consumer, new index of each share partition)."""

    def __init__(self, start) -> None:
        families = sorted({c.tid for c in start.clients.values()})
        self._family = {tid: n for n, tid in enumerate(families)}
        self._pid = {t.pid: self._family[t.tid] for t in start.tc.txns.values()}
        self._instance: dict[str, tuple[int, int]] = {}
        self._renamed: dict[tuple, tuple] = {}
        self._state_index = {s: n for n, s in enumerate(sorted(set(start.state_names)))}
        self._state_of = [self._state_index[s] for s in start.state_names]
        self._decisions = start.decisions
        self.out_name = start.out.name
        n = len(start.sps)
        same = [self._state_of[a] == self._state_of[b] for a in range(n) for b in range(n)]
        self._parts = [p for p in permutations(range(n))
                       if same == [self._state_of[p[a]] == self._state_of[p[b]] for a in range(n) for b in range(n)]]
        self._sigmas = list(permutations(range(len(families))))
        self.orders = [(s, p) for s in self._sigmas for p in self._parts]

    def instance(self, name: str) -> tuple[int, int]:
        """``c2.3`` as (family 1, instance 3); ``c1`` is (0, 1)."""
        if name not in self._instance:
            family, _, n = name.partition(".")
            self._instance[name] = (self._family[f"tx-{family}"], int(n or 1))
        return self._instance[name]

    def key(self, world) -> tuple:
        """The canonical key of ``world``: equal for two states that are renamings of each other."""
        inst, pidfam, tc = self.instance, self._pid, world.tc
        extra: dict[tuple, tuple] = {}
        for r in world.out.records:
            if r.outcome != "aborted":
                extra[r.source] = extra.get(r.source, ()) + ((0, pidfam[r.pid], r.outcome),)
        for i, sp in enumerate(world.sps):
            for pid, acks in sp.pending.items():
                for o, ack in acks.items():
                    extra[i, o] = extra.get((i, o), ()) + ((1, pidfam[pid], ack),)
        decisions = self._decisions
        raw = [tuple((r.state, r.count if r.state not in TERMINAL else -1, inst(r.holder) if r.holder else (),
                      -1 if r.pid is None else pidfam[r.pid], decisions.get((i, o), "ACCEPT"), extra.get((i, o), ()))
                     for o, r in enumerate(sp.offsets)) for i, sp in enumerate(world.sps)]
        persisted = tc.persisted
        clients = [(inst(c.name), c.epoch == persisted[c.tid].epoch, c.alive, c.pc, c.held) for c in world.clients.values()]
        txns = [(self._family[t.tid], OPEN.get(t.state, "DONE"), t.partitions, inst(t.owner), t.marked)
                for t in (persisted if tc.down else tc.txns).values()]
        budget = world.budget
        tail = (tc.down, tuple(budget.values()) if budget["any"] else budget["abort"])
        sigmas, parts = self._candidates(raw, clients, txns)
        if len(sigmas) == 1 and len(parts) == 1:
            return self._encode(raw, clients, txns, sigmas[0], parts[0]) + tail
        return min(self._encode(raw, clients, txns, s, p) for s in sigmas for p in parts) + tail

    def _candidates(self, raw: list, clients: list, txns: list) -> tuple[list, list]:
        """The permutations that order consumers and share partitions by what they are, names aside (ties:
        all their orders): the least encoding under those is the least under all of them."""
        fam = [[] for _ in self._sigmas[0]]
        for (f, n), current, alive, pc, held in clients:
            fam[f].append((n, current, alive, pc, len(held)))
        txn = {f: (st, len(partitions), len(marked)) for f, st, partitions, _, marked in txns}
        sigmas = _ordering([(tuple(sorted(x)), txn.get(f, ())) for f, x in enumerate(fam)], self._sigmas)
        if len(self._parts) == 1:
            return sigmas, self._parts
        psigs = [tuple(r[:2] for r in records if r[0] not in TERMINAL) + tuple(sorted(r[:2] for r in records
                                                                                      if r[0] in TERMINAL))
                 for records in raw]
        return sigmas, _ordering(psigs, self._parts)

    def _encode(self, raw: list, clients: list, txns: list, s: tuple, p: tuple) -> tuple:
        """The state with consumer family f named ``s[f]`` and share partition i named ``p[i]``."""
        parts, renumber, rename = [None] * len(raw), {}, self._rename
        for i, records in enumerate(raw):
            sigs = [rename(r, s) for r in records]
            live = [o for o, r in enumerate(records) if r[0] not in TERMINAL]
            done = sorted((o for o, r in enumerate(records) if r[0] in TERMINAL), key=sigs.__getitem__)
            for n, o in enumerate(live + done):
                renumber[i, o] = (p[i], n)
            parts[p[i]] = tuple(sigs[o] for o in live) + ((),) + tuple(sigs[o] for o in done)
        named = self._partitions
        cs = tuple(sorted(((s[f], n), current, alive, pc, tuple(sorted(renumber[r] for r in held)))
                          for (f, n), current, alive, pc, held in clients))
        ts = tuple(sorted((s[f], st, named(tp, p), (s[o[0]], o[1]), named(mk, p)) for f, st, tp, o, mk in txns))
        return tuple(parts), cs, ts

    def _rename(self, record: tuple, s: tuple) -> tuple:
        """One record's encoding, its consumer references renamed by ``s`` (remembered: records repeat)."""
        got = self._renamed.get((record, s))
        if got is None:
            st, count, holder, pid, decision, extra = record
            got = self._renamed[record, s] = (
                st, count, (s[holder[0]], holder[1]) if holder else (), s[pid] if pid >= 0 else -1, decision,
                tuple(sorted((kind, s[f], what) for kind, f, what in extra)))
        return got

    def _partitions(self, names: frozenset, p: tuple) -> tuple:
        """A transaction's partitions: the output as -1, a ``__share_group_state`` partition by the least new
        index of its share partitions (remembered)."""
        got = self._renamed.get((names, p))
        if got is None:
            index, state = self._state_index, self._state_of
            got = self._renamed[names, p] = tuple(sorted(
                -1 if n == self.out_name else min(p[i] for i, k in enumerate(state) if k == index[n]) for n in names))
        return got


def _ordering(sigs: list, allowed: list) -> list:
    """The permutations of ``allowed`` (each the new index of every item) that put the items in the order
    of their signatures ``sigs`` (one when the signatures differ, all orders of the tied ones otherwise),
    or all of ``allowed`` when none does (the topology forbids that order): a set that renaming the
    state renames alike, so the least encoding over it is canonical."""
    rank = sorted(range(len(sigs)), key=sigs.__getitem__)
    if all(sigs[a] != sigs[b] for a, b in zip(rank, rank[1:])):
        order = [0] * len(sigs)
        for n, item in enumerate(rank):
            order[item] = n
        if tuple(order) in allowed:
            return [tuple(order)]
    return [p for p in allowed if _respects(sigs, p)] or allowed


def _respects(sigs: list, order: tuple) -> bool:
    """Whether ``order`` (new index of each item) puts the items in the order of their signatures."""
    return all(order[a] < order[b] for a in range(len(sigs)) for b in range(len(sigs)) if sigs[a] < sigs[b])
