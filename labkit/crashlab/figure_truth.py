"""Does a timeline figure agree with the broker? Its rows, read back from the plotly figure
(:func:`labkit.crashlab.timeline.timeline_figure`), against the final read_committed read the history recorded (one
output topic, one partition). Notebooks assert it on the figures they draw; ``tests/test_timeline.py`` shows it
catches each kind of contradiction."""

from __future__ import annotations

import re

from labkit.crashlab.timeline import STATE_COLOURS

SURVIVING = ("committed", "written")


def last_drawn_states(fig) -> dict[str, str]:
    """Each write row's state at its right end, as drawn (the state trace whose segment ends last):
    ``{row label: state}`` (states: committed, written, aborted, uncommitted ...)."""
    last = {}
    for trace in fig.data:
        if trace.mode != "lines" or trace.name not in STATE_COLOURS:  # not a state: e.g. an action's legend entry
            continue
        for i in range(0, len(trace.x), 3):  # segments are [start, end, None]
            row, end = trace.y[i], trace.x[i + 1]
            if row not in last or end >= last[row][0]:
                last[row] = (end, trace.name)
    return {row: state for row, (_, state) in last.items()}


def contradictions(fig, events, topic: str) -> list[str]:
    """What the plotly figure ``fig`` (drawn from the history ``events``) shows of the writes to ``topic`` that
    read_committed contradicts: a write drawn committed or written whose offset read_committed does not return, one
    drawn otherwise whose offset it does, and an offset it returns with no row. One message per contradiction."""
    visible = {e.offset for e in events if e.kind == "final_read" and e.topic == topic and e.offset is not None
               and e.isolation_level == "read_committed"}
    wrong, drawn = [], set()
    for row, state in last_drawn_states(fig).items():
        m = re.search(r" @(\d+)", row)
        offset = int(m.group(1)) if m else None
        drawn.add(offset)
        if (state in SURVIVING) != (offset in visible):
            wrong.append(f"{row!r} drawn {state}, but read_committed {'returns' if offset in visible else 'has no'} "
                         f"offset {offset}")
    wrong += [f"offset {o} is returned by read_committed but drawn nowhere" for o in sorted(visible - drawn)]
    return wrong
