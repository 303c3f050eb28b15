"""Record-state timelines: one row per write of a record (value id, writer, offset), time on x, a coloured
segment per state; a second surviving write of a value id is marked a duplicate.

States, from the history alone: *uncommitted* (sent, its transaction not yet ended), *written*
(acked, no transaction), *committed*, *aborted* (also a fenced producer's transaction, from the fence on),
*send failed*, and *not in the log*: a write never acknowledged of which the log holds no copy, when the history
holds the log's read (the read_uncommitted ``final_read`` of its topic, :meth:`Experiment.final_reads`); without that
read an unacknowledged write keeps its transaction's state, since a crashed producer's write may be in the log
unacknowledged. Markers: consumed (per consumer),
and the lab's actions (crash, pause, resume, fenced, stalled, a supervisor's restart, a restart's
init_transactions, the broker's crash and return) as vertical lines. Lines are drawn with
``Scattergl`` (WebGL), one trace per state, so 100 000 events still render.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import nullcontext

import plotly.graph_objects as go

from labkit.background import Periodic
from labkit.crashlab.colours import participant_colour
from labkit.history import Event, History

STATE_COLOURS = {"uncommitted": "#f2b447", "written": "#4c78a8", "committed": "#54a24b", "aborted": "#e45756",
                 "send failed": "#b279a2", "not in the log": "#bab0ac"}
DUPLICATE = " — duplicate"  # the end of a surviving write's row when the value id already survived once
ACTION_COLOURS = {"crash": "#d62728", "pause": "#7f7f7f", "resume": "#17becf", "fenced": "#8c564b", "failed": "#e377c2",
                  "stalled": "#ff7f0e", "restart": "#9467bd", "txn_init": "#2ca02c", "broker back": "#1f77b4"}


def writes(events: list[Event]) -> list[dict]:
    """Every write of every record, in send order, as ``{"row", "writer", "topic", "partition", "offset",
    "states"}``:
    ``offset`` is None until the write is acknowledged (a fenced zombie's write may never be); ``states`` is
    ``[(state, start_s, end_s)]``, times in seconds since the first event. Each write has a row of its own,
    ``"<value id> by <writer> @<offset>"`` (``#<n>`` added if that is taken), so no write hides another; a
    second write of a value id that also survives (committed, or written without a transaction) is marked
    ``"— duplicate"``."""
    if not events:
        return []
    t0, t_end = events[0].mono_ns, _drawn_end(events)
    sec = lambda ns: (ns - t0) / 1e9  # noqa: E731
    by_vid: dict[str, list[dict]] = {}  # value id -> its writes in send order
    txn_end = {}
    logged: dict[str, list[tuple]] = defaultdict(list)  # value id -> where the log holds a copy
    log_read = set()  # the topics whose log the history holds
    for e in events:
        if e.kind == "final_read" and e.isolation_level == "read_uncommitted":
            log_read.add(e.topic)
            if e.value_id is not None:
                logged[e.value_id].append((e.topic, e.partition, e.offset))
        if e.kind == "send":
            by_vid.setdefault(e.value_id, []).append({"writer": e.participant, "sent": e.mono_ns, "topic": e.topic,
                                                      "partition": e.partition, "offset": None,
                                                      "txn": (e.participant, e.txn) if e.txn is not None else None})
        elif e.kind in ("ack", "send_failed") and e.value_id in by_vid:  # its writer's oldest write still unanswered
            pending = next((w for w in by_vid[e.value_id] if w["writer"] == e.participant and "acked" not in w
                            and "failed" not in w), None)
            if pending is not None:
                pending["acked" if e.kind == "ack" else "failed"] = e.mono_ns
                pending["offset"] = e.offset if e.kind == "ack" else None
        elif e.kind == "txn_end" and e.outcome:
            txn_end[e.participant, e.txn] = (e.outcome, e.mono_ns)
        elif e.kind == "fenced" and e.txn is not None:  # a fenced producer's transaction never commits
            txn_end.setdefault((e.participant, e.txn), ("aborted", e.mono_ns))
    out, taken = [], Counter()
    for vid, its in by_vid.items():
        survivors = 0
        acked_at = {(w["topic"], w["partition"], w["offset"]) for w in its if "acked" in w}
        unclaimed = [where for where in logged[vid] if where not in acked_at]  # in the log, acknowledged to no one
        for w in its:
            if w["txn"]:
                outcome, at = txn_end.get(w["txn"], (None, t_end))
                w["states"] = [("uncommitted", sec(w["sent"]), sec(at))] + ([(outcome, sec(at), sec(t_end))] if outcome else [])
            elif "acked" in w:
                w["states"] = [("written", sec(w["acked"]), sec(t_end))]
            elif "failed" in w:
                w["states"] = [("send failed", sec(w["failed"]), sec(t_end))]
            else:
                w["states"] = []
            if "acked" not in w and w["topic"] in log_read:
                if unclaimed:
                    unclaimed.pop(0)  # this write's copy, as far as the log tells
                else:
                    w["states"] = [st for st in w["states"] if st[0] == "uncommitted"]
                    w["states"].append(("not in the log", w["states"][-1][2] if w["states"] else sec(w["sent"]),
                                        sec(t_end)))
            row = f"{vid} by {w['writer']}" + (f" @{w['offset']}" if w["offset"] is not None else "")
            taken[row] += 1
            row += f" #{taken[row]}" if taken[row] > 1 else ""
            if w["states"] and w["states"][-1][0] in ("committed", "written"):
                survivors += 1
                row += DUPLICATE if survivors > 1 else ""
            out.append({"row": row, **{k: w[k] for k in ("writer", "topic", "partition", "offset", "states")}})
    return out


def _drawn_end(events: list[Event]) -> int:
    """Where the time axis ends (ns): a little after the last event that is not a final read (4 % of the span, at
    least 0.3 s), so the writes of the last moment are drawn with a width, not as a line on the edge."""
    last = next((e for e in reversed(events) if e.kind != "final_read"), events[-1])  # the lab's reads come later
    span = last.mono_ns - events[0].mono_ns
    return last.mono_ns + max(span // 25, 300_000_000)


def segments(events: list[Event]) -> list[tuple[str, str, float, float]]:
    """``(row, state, start_s, end_s)`` for every write of every record (:func:`writes`), times in seconds
    since the first event."""
    return [(w["row"], state, a, b) for w in writes(events) for state, a, b in w["states"]]


def timeline_figure(events: list[Event], title: str = "", figure: go.Figure | None = None) -> go.Figure:
    """Draw the timeline of ``events`` into ``figure`` (a new static ``go.Figure`` by default, or a
    ``go.FigureWidget`` to update live). Returns the figure."""
    fig = figure if figure is not None else go.Figure()
    t0 = events[0].mono_ns if events else 0
    by_state = defaultdict(lambda: ([], [], []))
    rows = {}  # rows in order of first write (a dict: a list lookup made 50 000 records quadratic)
    at = {}  # (topic, partition, offset) -> the row of the write acknowledged there
    drawn = writes(events)
    for w in drawn:
        rows.setdefault(w["row"], None)
        at[w["topic"], w["partition"], w["offset"]] = w["row"]
        for state, a, b in w["states"]:
            xs, ys, hover = by_state[state]
            xs += [a, b, None]
            ys += [w["row"], w["row"], None]
            hover += [f"{w['row']}: {state}"] * 2 + [None]
    consumed = defaultdict(lambda: ([], []))
    for e in events:
        if e.kind == "consume":  # on the row of the write it read (the value id's if that write is not drawn)
            xs, ys = consumed[e.participant]
            xs.append((e.mono_ns - t0) / 1e9)
            ys.append(at.get((e.topic, e.partition, e.offset), e.value_id))
    traces = [go.Scattergl(x=xs, y=ys, mode="lines", name=state, hovertext=hover, hoverinfo="text+x",
                           line=dict(width=10, color=STATE_COLOURS[state]))
              for state, (xs, ys, hover) in by_state.items()]
    traces += [go.Scattergl(x=xs, y=ys, mode="markers", name=f"consumed by {who}",
                            marker=dict(symbol="diamond", size=9, color=participant_colour(who),
                                        line=dict(width=1, color="#222")))
               for who, (xs, ys) in consumed.items()]
    dupes = [(w["states"][-1][1], w["row"]) for w in drawn if w["row"].endswith(DUPLICATE)]
    if dupes:  # a cross where each duplicate begins to count, visible even when its bar is short
        traces.append(go.Scattergl(x=[x for x, _ in dupes], y=[r for _, r in dupes], mode="markers", name="duplicate",
                                   marker=dict(symbol="x", size=13, color="#d62728", line=dict(width=1, color="#fff"))))
    shapes, actions = [], []
    crashed = set()  # participants crashed and not yet restarted: their next start is drawn as a restart
    for e in events:
        kind = "broker back" if (e.kind, e.participant) == ("start", "broker") else e.kind
        if kind == "crash":
            crashed.add(e.participant)
        elif kind == "restart" or (kind == "start" and e.participant in crashed):
            kind = "restart"
            crashed.discard(e.participant)
        if kind in ACTION_COLOURS:
            x = (e.mono_ns - t0) / 1e9
            shapes.append(dict(type="line", x0=x, x1=x, yref="paper", y0=0, y1=1,
                               line=dict(color=ACTION_COLOURS[kind], dash="dot", width=2)))
            actions.append((x, kind, kind if kind == "broker back" else f"{kind} {e.participant}"))
    notes, levels = _stagger(actions, span_s=(_drawn_end(events) - t0) / 1e9 if events else 1.0)
    with fig.batch_update() if isinstance(fig, go.FigureWidget) else nullcontext():
        fig.data = ()
        fig.add_traces(traces)
        fig.update_layout(title=dict(text=title, y=0.98, yanchor="top"), shapes=shapes, annotations=notes,
                          height=max(320, 150 + 14 * levels + 22 * len(rows)), margin=dict(t=70 + 14 * levels),
                          xaxis=dict(title="seconds since the experiment started"),
                          yaxis=dict(title="record (a write: value id by writer @offset)", categoryorder="array",
                                     categoryarray=list(reversed(rows)), type="category"),
                          legend=dict(orientation="v", x=1.01, y=1, yanchor="top"))
    return fig


def _stagger(actions: list[tuple[float, str, str]], span_s: float) -> tuple[list[dict], int]:
    """Labels of the action lines ``(x_s, kind, text)``, each on the lowest row above the plot where it does not
    overlap the previous label of that row (a label is taken as about 13 % of the time axis wide). Returns the
    annotations and the number of rows used."""
    ends: list[float] = []  # per row, the x where its last label ends
    notes = []
    for x, kind, text in sorted(actions):
        width = span_s * 0.0085 * len(text)
        row = next((i for i, end in enumerate(ends) if x >= end), len(ends))
        ends[row:row + 1] = [x + width]
        notes.append(dict(x=x, yref="paper", y=1.0, yshift=4 + 14 * row, yanchor="bottom", xanchor="left", text=text,
                          showarrow=False, font=dict(size=10, color=ACTION_COLOURS[kind])))
    return notes, len(ends)


class LiveTimeline:
    """A ``go.FigureWidget`` timeline that redraws from the history every ``interval_s`` seconds
    while an experiment runs (needs a Jupyter front end; in CI use :func:`timeline_figure`).

    Args:
        history: the experiment's :class:`~labkit.history.History`.
        interval_s: seconds between redraws.
        title: the figure's title.
        draw: ``draw(events, title=..., figure=...)`` draws the events into the widget; default
            :func:`timeline_figure` (e.g. ``functools.partial(share_timeline_figure, topic=t)`` for
            a share group, :mod:`labkit.share.timeline`).
    """

    def __init__(self, history: History, interval_s: float = 1.0, title: str = "",
                 draw: Callable[..., go.Figure] = timeline_figure) -> None:
        self.history, self.title, self.draw = history, title, draw
        self.widget = go.FigureWidget()
        self._thread = Periodic("labkit-live-timeline", self.refresh, interval_s, first_now=False)

    def refresh(self) -> None:
        """Redraw now from the history."""
        self.draw(self.history.events(), title=self.title, figure=self.widget)

    def start(self) -> go.FigureWidget:
        """Draw now, then redraw in the background; returns the widget to display.

        Raises:
            RuntimeError: already redrawing.
        """
        self.refresh()
        self._thread.start()
        return self.widget

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop redrawing (waits at most ``timeout_s`` seconds for the thread), then one last redraw.

        Raises:
            TimeoutError: a redraw still runs after ``timeout_s`` seconds.
            Exception: what ended the redrawing thread.
        """
        self._thread.stop(timeout_s)
        self.refresh()
