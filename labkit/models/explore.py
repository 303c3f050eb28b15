"""MODELLED, KIP-1289: every interleaving of a small world's steps and faults, breadth first.

:func:`explore` visits each state of a :class:`~labkit.models.kip1289.World` once, checks the
invariants of :mod:`labkit.models.invariants` in every state (the final ones also for "every record
ends ACKNOWLEDGED or ARCHIVED") and on every step, and returns the first violation found with the
shortest trace that reaches it (breadth first), which :func:`replay` turns back into a world with a
history to draw.

Two states are the same state when their keys are equal. With ``reduce`` (the default) the key is
the canonical one of :meth:`labkit.models.symmetry.Canon.key`: states that differ only in the
names of interchangeable consumers, share partitions or finished records are visited once. That
cannot hide a counterexample: the invariants do not depend on names, and a renamed state has the
same futures under the same renaming (see :mod:`labkit.models.symmetry`). Each state's enabled
steps are computed once, and a step from there is applied without checking them again; each successor's
key is computed once and looked up once; Python's cyclic garbage collector is off during the search
(it makes no reference cycles, and the collector would walk every key kept so far, again and again).
With ``workers`` > 1 the same breadth-first search runs on that many processes
(:mod:`labkit.models.parallel`).
"""

from __future__ import annotations

import gc
import re
import time
from collections import deque
from dataclasses import dataclass, field

from labkit.models.invariants import step_violations
from labkit.models.kip1289 import FAULTS, World
from labkit.models.symmetry import Canon


@dataclass
class Exploration:
    """What :func:`explore` found: ``states`` (distinct states, canonical ones with reduction),
    ``steps`` (transitions tried), ``finals`` (states where nothing but a fault can happen),
    ``seconds``, whether the whole space was seen (``complete``), whether symmetry reduction was on
    (``reduced``), the processes it ran on (``workers``), and the first ``violation`` with its ``trace``
    (steps from the start)."""

    states: int = 0
    steps: int = 0
    finals: int = 0
    seconds: float = 0.0
    complete: bool = True
    reduced: bool = True
    workers: int = 1
    violation: str | None = None
    trace: list[tuple] = field(default_factory=list)

    @property
    def states_per_s(self) -> float:
        return self.states / self.seconds if self.seconds else 0.0

    @property
    def verdict(self) -> str:
        """"holds", "broken: <the violation, names left out>", or "unknown (state limit)": what two searches
        of one configuration must agree on (a search under other names may find the same break on another
        record or consumer)."""
        if self.violation:
            return "broken: " + re.sub(r"\b(tx-)?c\d+(\.\d+)?\b|[\w.]+-\d+:\d+", "_", self.violation)
        return "holds" if self.complete else "unknown (state limit)"

    def __str__(self) -> str:
        head = (f"{self.states:,} {'canonical ' if self.reduced else ''}states, {self.steps:,} steps, "
                f"{self.finals:,} final states in {self.seconds:.2f} s ({self.states_per_s:,.0f} states/s"
                f"{f' on {self.workers} processes' if self.workers > 1 else ''})"
                f"{'' if self.complete else ', stopped at the state limit'}")
        return head + (f"; counterexample in {len(self.trace)} steps: {self.violation}" if self.violation else
                       "; no counterexample")


def explore(max_states: int = 2_000_000, stop_at_first: bool = True, reduce: bool = True, target: str | None = None,
            workers: int = 1, **world: object) -> Exploration:
    """Breadth-first search over every state of ``World(history=False, **world)``.

    Args:
        max_states: stop after this many distinct states (``complete`` is then False).
        stop_at_first: stop at the first violation (its trace is a shortest one).
        reduce: identify states that differ only by names (symmetry reduction; False: every state).
        target: look for a violation whose text contains this (e.g. "duplicate"): others are passed by.
        workers: processes to search on (:mod:`labkit.models.parallel`; 1: this one): the same states, steps
            and verdict, in less time when the machine has the cores.
        world: :class:`~labkit.models.kip1289.World` arguments (records, consumers, partitions, faults, options).
    Returns:
        An :class:`Exploration`.
    Raises:
        ValueError: ``workers`` < 1. RuntimeError: a worker process failed (:mod:`labkit.models.parallel`).
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1 (this process), not {workers}")
    start = World(history=False, **world)
    key = Canon(start).key if reduce else World.key
    began, collecting = time.perf_counter(), gc.isenabled()
    gc.disable()
    try:
        if workers == 1:
            result = _search(start, key, max_states, stop_at_first, target)
        else:
            from labkit.models import parallel  # it builds on this module's search step

            result = parallel.search(start, key, max_states, stop_at_first, target, workers)
    finally:
        if collecting:
            gc.enable()
    result.reduced, result.workers, result.seconds = reduce, workers, time.perf_counter() - began
    return result


def _search(start: World, key, max_states: int, stop_at_first: bool, target: str | None) -> Exploration:
    """:func:`explore`'s breadth-first search on one process: ``parent`` maps each state's key to the key it
    was first reached from and the step (None for ``start``)."""
    k0 = key(start)
    parent: dict[tuple, tuple | None] = {k0: None}
    queue, result = deque([(start, k0)]), Exploration()

    def claim(nxt: World, k2: tuple, came: tuple) -> None:
        if parent.setdefault(k2, came) is came:
            queue.append((nxt, k2))

    while queue:
        w, k = queue.popleft()
        found = expand(w, k, key, result, target, claim)
        if found and result.violation is None:
            result.violation, result.trace = found[0], trace_to(parent, k) + found[1]
            if stop_at_first:
                break
        if len(parent) >= max_states:
            result.complete = False
            break
    result.states = len(parent)
    return result


def expand(w: World, k: tuple, key, result: Exploration, target: str | None, claim) -> tuple | None:
    """One state's turn in a search: ``w`` (key ``k``)'s steps and final state are counted in ``result``, each
    successor goes to ``claim(successor, its key, (k, step))``, and the invariants are checked on ``w`` and
    on every step. Returns None, or the first broken invariant whose text contains ``target`` (any, when
    None) and the step that broke it (``[]``: ``w`` itself breaks it)."""
    actions = w.actions()
    final = all(a[0] in FAULTS for a in actions)
    result.finals += final
    result.steps += len(actions)
    problems = [p for p in w.violations(final=final) if target is None or target in p]
    at = []
    for action in actions:
        nxt = w.clone()
        nxt.apply(action)
        claim(nxt, key(nxt), (k, action))
        if not problems and (bad := [p for p in step_violations(w, nxt, action) if target is None or target in p]):
            problems, at = bad, [action]
    return (problems[0], at) if problems else None


def trace_to(parent: dict, key: tuple) -> list[tuple]:
    """The steps from the start to the state ``key``, following ``parent`` (key -> (key before, step), None
    for the start)."""
    steps = []
    while parent[key] is not None:
        key, action = parent[key]
        steps.append(action)
    return steps[::-1]


def replay(trace: list[tuple], **world: object) -> tuple[World, list[str]]:
    """Run ``trace`` on a fresh ``World(**world)`` that records its history. Returns the world and
    what each step did, in words.

    Raises:
        ValueError: a step of the trace is not possible (the trace belongs to other options).
    """
    w = World(**world)
    return w, [w.step(tuple(a)) for a in trace]
