"""MODELLED, KIP-1289: every interleaving of a small world's steps and faults, breadth first.

:func:`explore` visits each canonical state of a :class:`~labkit.models.kip1289.World` once (a visited
set of :meth:`~labkit.models.kip1289.World.key`), checks the invariants of
:meth:`~labkit.models.kip1289.World.violations` in every state (the final ones also for "every record
ends ACKNOWLEDGED or ARCHIVED") and on every step (KIP-932: ACKNOWLEDGED and ARCHIVED are terminal),
and returns the first violation found with the shortest trace that reaches it (breadth first), which
:func:`replay` turns back into a world with a history to draw.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from labkit.models.kip1289 import World
from labkit.models.share_partition import TERMINAL


@dataclass
class Exploration:
    """What :func:`explore` found: ``states`` (distinct canonical states), ``steps`` (transitions
    tried), ``finals`` (states where nothing but a fault can happen), ``seconds``, whether the whole
    space was seen (``complete``), and the first ``violation`` with its ``trace`` (steps from the start)."""

    states: int = 0
    steps: int = 0
    finals: int = 0
    seconds: float = 0.0
    complete: bool = True
    violation: str | None = None
    trace: list[tuple] = field(default_factory=list)

    @property
    def states_per_s(self) -> float:
        return self.states / self.seconds if self.seconds else 0.0

    def __str__(self) -> str:
        head = (f"{self.states:,} states, {self.steps:,} steps, {self.finals:,} final states in {self.seconds:.2f} s "
                f"({self.states_per_s:,.0f} states/s){'' if self.complete else ', stopped at the state limit'}")
        return head + (f"; counterexample in {len(self.trace)} steps: {self.violation}" if self.violation else
                       "; no counterexample")


def _step_violation(before: World, after: World) -> str | None:
    for o, (a, b) in enumerate(zip(before.sp.offsets, after.sp.offsets)):
        if a.state in TERMINAL and b.state != a.state:
            return f"offset {o} left the terminal state {a.state} for {b.state}"
    return None


def explore(max_states: int = 2_000_000, stop_at_first: bool = True, **world: object) -> Exploration:
    """Breadth-first search over every state of ``World(history=False, **world)``.

    Args:
        max_states: stop after this many distinct states (``complete`` is then False).
        stop_at_first: stop at the first violation (its trace is a shortest one).
        world: :class:`~labkit.models.kip1289.World` arguments (records, consumers, faults, options).
    Returns:
        An :class:`Exploration`.
    """
    start = World(history=False, **world)
    began = time.perf_counter()
    parent: dict[tuple, tuple | None] = {start.key(): None}
    queue, result = deque([start]), Exploration()
    while queue:
        w = queue.popleft()
        key = w.key()
        problems = w.violations(final=not w.actions(faults=False))
        result.finals += not w.actions(faults=False)
        for action in w.actions():
            nxt = w.clone()
            nxt.step(action)
            result.steps += 1
            bad = _step_violation(w, nxt)
            k = nxt.key()
            if k not in parent:
                parent[k] = (key, action)
                queue.append(nxt)
            if bad and not problems:
                problems, key = [bad], k
        if problems and result.violation is None:
            result.violation, result.trace = problems[0], _trace(parent, key)
            if stop_at_first:
                break
        if len(parent) >= max_states:
            result.complete = False
            break
    result.states, result.seconds = len(parent), time.perf_counter() - began
    return result


def _trace(parent: dict, key: tuple) -> list[tuple]:
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
