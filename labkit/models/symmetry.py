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
  they are (state, delivery count, decision, outputs, pending acknowledgements) and by the instances that
  still hold them (one whose acquisition lock expired keeps a record that another instance then
  finished); two finished records alike in all of that are interchangeable. A record carries its
  application decision (ACCEPT/REJECT) with it. Which producer committed a finished record's outputs does
  not matter either: no step changes a committed output, and the invariants only count a finished
  record's committed outputs.

The key is the least of the state's encodings under the consumer and share-partition permutations that
order consumers and share partitions by what they are, names aside (usually one: one encoding per
state); records are renumbered within each encoding. Clock, history and the logs' past are left out, as
in :meth:`~labkit.models.kip1289.World.key` (the logs are what the state says they are: the
coordinators reload to it).
"""

from __future__ import annotations

from itertools import permutations

from labkit.models.share_partition import TERMINAL
from labkit.models.txn_coordinator import ONGOING, PREPARE_ABORT, PREPARE_COMMIT

#: A transaction's state as it matters: EMPTY, COMPLETE_COMMIT and COMPLETE_ABORT behave alike (the next
#: AddPartitionsToTxn begins a new transaction), so they are one.
OPEN = {ONGOING: ONGOING, PREPARE_COMMIT: PREPARE_COMMIT, PREPARE_ABORT: PREPARE_ABORT}


class _Names(dict):
    """Instance name to its new name under the consumer permutation ``s`` (new number of each family):
    ``c2.3`` is (s[1], 3), no instance (None) is (). Filled on first use."""

    def __init__(self, family: dict[str, int], s: tuple) -> None:
        super().__init__({None: ()})
        self._family, self._s = family, s

    def __missing__(self, name: str) -> tuple[int, int]:
        family, _, n = name.partition(".")
        got = self[name] = (self._s[self._family[f"tx-{family}"]], int(n or 1))
        return got


class _Partitions(dict):
    """A transaction's partitions (a frozenset of names) under the share-partition permutation ``p`` (new
    index of each): the output as -1, a ``__share_group_state`` partition by the least new index of its
    share partitions. Filled on first use."""

    def __init__(self, out_name: str, state_index: dict[str, int], state_of: list[int], p: tuple) -> None:
        super().__init__()
        self._out_name, self._state_index, self._state_of, self._p = out_name, state_index, state_of, p

    def __missing__(self, partitions: frozenset) -> tuple:
        index, state, p = self._state_index, self._state_of, self._p
        got = self[partitions] = tuple(sorted(-1 if n == self._out_name else
                                              min(p[i] for i, k in enumerate(state) if k == index[n])
                                              for n in partitions))
        return got


class Canon:
    """Canonical keys for the worlds reachable from ``start`` (a :class:`~labkit.models.kip1289.World`, its
    topology and consumers fixed). A permutation of consumers gives the new number of each consumer family
    (``transactional.id``), one of share partitions the new index of each."""

    def __init__(self, start) -> None:
        families = sorted({c.tid for c in start.clients.values()})
        self._family = {tid: n for n, tid in enumerate(families)}
        state_index = {s: n for n, s in enumerate(sorted(set(start.state_names)))}
        self._state_of = [state_index[s] for s in start.state_names]
        self._decisions = [[start.decisions.get((i, o), "ACCEPT") for o in range(sp.records)]
                           for i, sp in enumerate(start.sps)]
        n, state = len(start.sps), self._state_of
        same = [state[a] == state[b] for a in range(n) for b in range(n)]
        self._parts = [p for p in permutations(range(n))
                       if same == [state[p[a]] == state[p[b]] for a in range(n) for b in range(n)]]
        self._sigmas = list(permutations(range(len(families))))
        pid_family = {t.pid: self._family[t.tid] for t in start.tc.txns.values()}
        self._names = {s: _Names(self._family, s) for s in self._sigmas}
        self._pids = {s: {None: -1, **{pid: s[f] for pid, f in pid_family.items()}} for s in self._sigmas}
        self._named = {p: _Partitions(start.out.name, state_index, self._state_of, p) for p in self._parts}

    def key(self, world) -> tuple:
        """The canonical key of ``world``: equal for two states that are renamings of each other."""
        tc = world.tc
        persisted = tc.persisted
        txns = (persisted if tc.down else tc.txns).values()
        sigmas, family = self._sigmas, self._family
        if len(family) > 1:  # families ordered by their transaction, then by their instances
            sigs: list = [()] * len(family)
            for t in txns:
                sigs[family[t.tid]] = (OPEN.get(t.state, "DONE"), len(t.partitions), len(t.marked))
            if len(set(sigs)) < len(sigs):  # a tie (one in seven states of 2 consumers x 2 records)
                names, instances = self._names[sigmas[0]], [[] for _ in family]
                for c in world.clients.values():
                    f, n = names[c.name]
                    instances[f].append((n, c.epoch == persisted[c.tid].epoch, c.alive, c.pc, len(c.held)))
                sigs = [(sig, sorted(mine)) for sig, mine in zip(sigs, instances)]
            sigmas = _ordering(sigs, sigmas)
        parts = self._parts
        if len(parts) > 1:
            parts = _ordering([tuple((r.state, r.count) for r in sp.offsets if r.state not in TERMINAL) +
                               tuple(sorted((r.state, -1) for r in sp.offsets if r.state in TERMINAL))
                               for sp in world.sps], parts)
        budget = world.budget
        tail = (tc.down, tuple(budget.values()) if budget["any"] else budget["abort"])
        if len(sigmas) == 1 and len(parts) == 1:
            return self._encode(world, txns, sigmas[0], parts[0]) + tail
        return min(self._encode(world, txns, s, p) for s in sigmas for p in parts) + tail

    def _encode(self, world, txns, s: tuple, p: tuple) -> tuple:
        """The state with consumer family f named ``s[f]`` and share partition i named ``p[i]``: each
        partition's records (those that may be delivered again in offset order, then ``()``, then the
        finished ones sorted), the instances, the transactions. A finished record's committed outputs are
        counted, not named: no step can change them, and the invariants only count them."""
        names, pids = self._names[s], self._pids[s]
        extra: dict[tuple, tuple] = {}  # (partition, offset) -> its outputs and pending acknowledgements
        for source, pid, outcome in world.out.records:
            if outcome != "aborted":
                x = (0, pids[pid], outcome)
                extra[source] = extra[source] + (x,) if source in extra else (x,)
        sps = world.sps
        for i, sp in enumerate(sps):
            for pid, acks in sp.pending.items():
                for o, ack in acks.items():
                    x = (1, pids[pid], ack)
                    extra[i, o] = extra[i, o] + (x,) if (i, o) in extra else (x,)
        holders: dict[tuple, tuple] = {}  # (partition, offset) -> the instances that hold it
        for c in world.clients.values():
            for r in c.held:
                holders[r] = holders.get(r, ()) + (names[c.name],)
        parts, renumber = [None] * len(sps), {}
        for i, sp in enumerate(sps):
            decisions, live, done, to = self._decisions[i], [], [], p[i]
            for o, (state, count, holder, pid) in enumerate(sp.offsets):
                x = extra.get((i, o), ())
                if state in TERMINAL:
                    if x:
                        x = tuple(sorted([(k, -1 if outcome == "committed" else who, outcome)
                                          for k, who, outcome in x]))
                    held = holders.get((i, o), ())
                    done.append(((state, -1, names[holder], pids[pid], decisions[o], x),
                                 tuple(sorted(held)) if len(held) > 1 else held, o))
                else:
                    renumber[i, o] = (to, len(live))
                    live.append((state, count, names[holder], pids[pid], decisions[o],
                                 tuple(sorted(x)) if len(x) > 1 else x))
            live.append(())
            if done:
                done.sort()
                for e, _, o in done:
                    renumber[i, o] = (to, len(live) - 1)
                    live.append(e)
            parts[to] = tuple(live)
        persisted, named, family = world.tc.persisted, self._named[p], self._family
        cs = sorted([(names[c.name], c.epoch == persisted[c.tid].epoch, c.alive, c.pc,
                      tuple(sorted([renumber[r] for r in c.held])) if c.held else ()) for c in world.clients.values()])
        ts = sorted([(s[family[t.tid]], OPEN.get(t.state, "DONE"), named[t.partitions], names[t.owner],
                      named[t.marked]) for t in txns])
        return tuple(parts), tuple(cs), tuple(ts)


def _ordering(sigs: list, allowed: list) -> list:
    """The permutations of ``allowed`` (each the new index of every item) that put the items in the order
    of their signatures ``sigs`` (one when the signatures differ, all orders of the tied ones otherwise),
    or all of ``allowed`` when none does (the topology forbids that order): a set that renaming the
    state renames alike, so the least encoding over it is canonical."""
    if len(sigs) == 2:  # the usual case (two consumer families, two share partitions), in one comparison
        if sigs[0] == sigs[1]:
            return allowed
        order = (0, 1) if sigs[0] < sigs[1] else (1, 0)
        return [order] if order in allowed else allowed
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
