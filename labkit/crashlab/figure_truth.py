"""Does a timeline figure agree with the broker? Its rows, read back from the plotly figure
(:func:`labkit.crashlab.timeline.timeline_figure`), against the final read_committed read the history recorded (one
output topic, one partition), and against the lab's readings of the partition's log end offset (``log_end`` events):
no write drawn in the log at a reading that had not reached it. Notebooks assert it on the figures they draw;
``tests/test_timeline.py`` shows it catches each kind of contradiction."""

from __future__ import annotations

import re

from labkit.crashlab.timeline import STATE_COLOURS, writes

SURVIVING = ("committed", "written")


def drawn_segments(fig) -> dict[str, list[tuple[str, float, float]]]:
    """Each write row's states as drawn: ``{row label: [(state, start_s, end_s)]}``, read from the state traces."""
    drawn: dict[str, list[tuple[str, float, float]]] = {}
    for trace in fig.data:
        if trace.mode != "lines" or trace.name not in STATE_COLOURS:  # not a state: e.g. an action's legend entry
            continue
        for i in range(0, len(trace.x), 3):  # segments are [start, end, None]
            drawn.setdefault(trace.y[i], []).append((trace.name, trace.x[i], trace.x[i + 1]))
    return drawn


def last_drawn_states(fig) -> dict[str, str]:
    """Each write row's state at its right end, as drawn (the state trace whose segment ends last):
    ``{row label: state}`` (states: committed, written, aborted, uncommitted ...)."""
    return {row: max(segs, key=lambda s: s[2])[0] for row, segs in drawn_segments(fig).items()}


def contradictions(fig, events, topic: str) -> list[str]:
    """What the plotly figure ``fig`` (drawn from the history ``events``) shows of the writes to ``topic`` that
    read_committed contradicts: a write drawn committed or written whose record (value id at its offset)
    read_committed does not return, one drawn otherwise whose record it does, and a record it returns with no row;
    and a write drawn in any state but "not in the log" at the time of a ``log_end`` reading of ``topic`` that had not
    reached its offset (the log ended at or below it). Rows of writes to other topics (a processor's input) are left
    out. One message per contradiction."""
    base = lambda row: row.split(" — ")[0]  # noqa: E731  (a row's label without its duplicate / lost mark)
    of_topic = {base(w["row"]) for w in writes(events) if w["topic"] == topic}
    visible = {(e.offset, e.value_id) for e in events if e.kind == "final_read" and e.topic == topic
               and e.offset is not None and e.isolation_level == "read_committed"}
    wrong, drawn = [], set()
    for row, state in last_drawn_states(fig).items():
        if base(row) not in of_topic:
            continue
        m = re.search(r" @(\d+)", row)
        record = (int(m.group(1)) if m else None, row.split(" by ")[0])
        drawn.add(record)
        if (state in SURVIVING) != (record in visible):
            wrong.append(f"{row!r} drawn {state}, but read_committed {'returns' if record in visible else 'has no'} "
                         f"{record[1]} at offset {record[0]}")
    wrong += [f"{vid} at offset {o} is returned by read_committed but drawn nowhere" for o, vid in sorted(visible - drawn)]
    t0 = events[0].mono_ns if events else 0
    readings = [((e.mono_ns - t0) / 1e9, e.offset) for e in events if e.kind == "log_end" and e.topic == topic]
    for row, segs in drawn_segments(fig).items():
        m = re.search(r" @(\d+)", row)
        if base(row) not in of_topic or not m:
            continue
        wrong += [f"{row!r} drawn {state} at {at:.2f} s, when the log ended at offset {end}"
                  for at, end in readings if end <= int(m.group(1))
                  for state, a, b in segs if a < at < b and state != "not in the log"]
    return wrong
