"""MODELLED, KIP-1289: the explorer's breadth-first search on several processes (``explore(workers=N)``).

The worker processes are forked from the caller, so each starts with the start state and the key function. Worker
``i`` owns the states whose key hashes to ``i`` (``hash(key) % N``): it alone decides whether such a state is new.
The search goes level by level, as the one-process search does (every state ``d`` steps from the start, then
``d+1``), so a counterexample's trace is still a shortest one. In a level each worker expands the states it holds
(:func:`labkit.models.explore.expand`); it decides on the successors whose keys it owns at once, sends the other
keys to their owners in one message each (a key it sent before, never again: its owner has seen it), and keeps for
the next level the successors their owners accept as new, keeping the parents of those too. A successor stays with
the worker that computed it, unless the next level is uneven: then the worker with more sends some to the one with
fewer (at the start, every state is on the start's owner). Every state is expanded once, by one worker, so the
states, steps and final states are those of the one-process search; only the order differs within a level (which
of two equally short counterexamples is reported, and which of two renamings of a state is expanded). On the lab's
2 cores, 2 workers take about two thirds of one's time: the keys they send each other, and the wait for the slower
at the end of each level, take the rest.

Workers exchange messages pairwise in one order (the lower-numbered worker of a pair sends first), so two
large messages never wait on each other. A worker that fails sends its traceback; the caller stops the rest
and raises.
"""

from __future__ import annotations

import multiprocessing
import traceback
from multiprocessing.connection import wait

from labkit.models.explore import Exploration, expand, trace_to

ELSEWHERE = ("reached first by another worker",)  # in a worker's seen keys: the trace's step is kept there


def search(start, key, max_states: int, stop_at_first: bool, target: str | None, workers: int) -> Exploration:
    """:func:`labkit.models.explore.explore`'s search of ``start`` on ``workers`` processes (2 or more).

    The state limit is checked after each level, so a stopped search may pass ``max_states`` by up to a
    level.

    Raises:
        RuntimeError: a worker failed (its traceback in the message) or died.
    """
    ctx = multiprocessing.get_context("fork")  # the workers need the start state and the key function as they are
    links = [[None] * workers for _ in range(workers)]
    for a in range(workers):
        for b in range(a + 1, workers):
            links[a][b], links[b][a] = ctx.Pipe()
    answers, procs = [], []
    for me in range(workers):
        mine, theirs = ctx.Pipe(duplex=False)
        answers.append(mine)
        procs.append(ctx.Process(target=_worker, daemon=True, name=f"labkit-explore-{me}",
                                 args=(me, workers, start, key, links[me], theirs, max_states, stop_at_first,
                                       target)))
        procs[-1].start()
        theirs.close()
    for link in (link for row in links for link in row if link is not None):
        link.close()  # the workers hold their own ends
    try:
        reports = _collect(answers, procs)
    except BaseException:
        for p in procs:
            p.kill()  # the others wait on the one that failed
        raise
    finally:
        for p in procs:
            p.join(timeout=5)
    result = Exploration(**{n: sum(r[n] for r in reports) for n in ("states", "steps", "finals")},
                         complete=all(r["complete"] for r in reports))
    found = [r for r in reports if r["found"]]
    if found:
        parent = {k: v for r in reports for k, v in r["parent"].items()}
        k, violation, at = found[0]["found"]
        result.violation, result.trace = violation, trace_to(parent, k) + at
    return result


def _collect(answers: list, procs: list) -> list[dict]:
    """Each worker's report, in worker order; raises RuntimeError when one fails or dies without one."""
    reports: dict[int, dict] = {}
    pending = dict(enumerate(answers))
    while pending:
        ready = wait(list(pending.values()) + [procs[i].sentinel for i in pending])
        for i, conn in list(pending.items()):
            if conn in ready or (procs[i].sentinel in ready and conn.poll()):
                report = conn.recv()
                if "error" in report:
                    raise RuntimeError(f"explorer worker {i} failed:\n{report['error']}")
                reports[i] = report
                del pending[i]
            elif procs[i].sentinel in ready:
                raise RuntimeError(f"explorer worker {i} died (exit code {procs[i].exitcode}) without a report")
    return [reports[i] for i in range(len(procs))]


def _worker(me: int, n: int, start, key, links: list, answer, max_states: int, stop_at_first: bool,
            target: str | None) -> None:
    try:
        answer.send(_level_by_level(me, n, start, key, links, max_states, stop_at_first, target))
    except BaseException:  # noqa: BLE001 - the caller raises it, with the traceback
        answer.send({"error": traceback.format_exc()})


def _level_by_level(me: int, n: int, start, key, links: list, max_states: int, stop_at_first: bool,
                    target: str | None) -> dict:
    """Worker ``me``'s part of the search; returns its report (states it owns, steps and final states it
    expanded, its first violation as ``(key, violation, step)``, and its parents when any worker found one)."""
    k0 = key(start)
    owned = hash(k0) % n == me
    # The keys this worker owns that some worker reached, each to where it came from when this worker reached it
    # first, else to ELSEWHERE; and the keys other workers own that this one reached first, to where from.
    seen: dict[tuple, tuple | None] = {k0: None} if owned else {}
    won: dict[tuple, tuple] = {}
    asked: set[tuple] = set()  # the other workers' keys this one sent: they are seen, whatever the answer was
    level, result, found = [(start, k0)] if owned else [], Exploration(), None
    while True:
        following: list = []
        sent: list[list] = [[] for _ in range(n)]  # keys for each owner to decide on
        kept: list[list] = [[] for _ in range(n)]  # and their successors, with where they came from

        def claim(nxt, k2: tuple, came: tuple) -> None:
            owner = hash(k2) % n
            if owner != me:
                if k2 in asked:
                    return
                asked.add(k2)
                sent[owner].append(k2)
                kept[owner].append((nxt, came))
            elif seen.setdefault(k2, came) is came:
                following.append((nxt, k2))

        for w, k in level:
            got = expand(w, k, key, result, target, claim)
            if got and found is None:
                found = (k, *got)
                if stop_at_first:
                    break
        claims = _exchange(me, links, sent)
        verdicts = _exchange(me, links, [_decide(seen, ks) for ks in claims])
        for o in range(n):
            for (nxt, came), k2, new in zip(kept[o], sent[o], verdicts[o]):
                if new:
                    won[k2] = came
                    following.append((nxt, k2))
        mine = (len(following), found is not None, len(seen))
        totals = _exchange(me, links, [mine] * n)
        totals[me] = mine
        if any(t[1] for t in totals) and stop_at_first or not any(t[0] for t in totals):
            complete = True
            break
        if sum(t[2] for t in totals) >= max_states:
            complete = False
            break
        level = _shared(me, links, following, [t[0] for t in totals])
    anyone = any(t[1] for t in totals)
    parent = {k: came for k, came in seen.items() if came is not ELSEWHERE} | won if anyone else {}
    return {"states": len(seen), "steps": result.steps, "finals": result.finals, "complete": complete,
            "found": found, "parent": parent}


def _decide(seen: dict, keys: list) -> list[bool]:
    """For each of ``keys`` (another worker's successors that this one owns), whether it is new: it is then
    marked seen, its parent kept by the worker that reached it."""
    new = []
    for k2 in keys:
        size = len(seen)
        seen.setdefault(k2, ELSEWHERE)
        new.append(len(seen) > size)
    return new


def _shared(me: int, links: list, following: list, counts: list[int]) -> list:
    """The next level's states of worker ``me``, evened out: a worker with more than its share
    (``counts``: each worker's next level) gives the rest to one with less. Every state stays with the
    worker that computed it unless the levels are uneven (at the start, all of them are on the start's
    owner), so few states travel."""
    n = len(counts)
    if max(counts) - min(counts) < 2:
        return following
    share = [sum(counts) // n + (i < sum(counts) % n) for i in range(n)]
    takers = [[i, share[i] - c] for i, c in enumerate(counts) if c < share[i]]
    outgoing: list[list] = [[] for _ in range(n)]
    for giver, c in enumerate(counts):
        surplus = c - share[giver]
        while surplus > 0:
            taker = takers[0]
            many = min(surplus, taker[1])
            if giver == me:
                outgoing[taker[0]] += following[len(following) - many:]
                del following[len(following) - many:]
            surplus, taker[1] = surplus - many, taker[1] - many
            if not taker[1]:
                takers.pop(0)
    for got in _exchange(me, links, outgoing):
        following += got
    return following


def _exchange(me: int, links: list, outgoing: list) -> list:
    """Sends ``outgoing[o]`` to every other worker ``o`` and returns what each sent back (``[]`` for
    ``me``): pair by pair in one global order, the lower-numbered worker sending first."""
    incoming: list = [[] for _ in outgoing]
    for o, link in enumerate(links):
        if link is None:
            continue
        if me < o:
            link.send(outgoing[o])
            incoming[o] = link.recv()
        else:
            incoming[o] = link.recv()
            link.send(outgoing[o])
    return incoming
