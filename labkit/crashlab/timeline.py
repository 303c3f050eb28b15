"""Record-state timelines: one row per record, time on x, a coloured segment per state.

States, from the history alone: *uncommitted* (sent, its transaction not yet ended), *written*
(acked, no transaction), *committed*, *aborted* (also a fenced producer's transaction, from the fence on),
*send failed*. Markers: consumed (per consumer),
and the lab's actions (crash, pause, resume, fenced, stalled, a supervisor's restart, a restart's
init_transactions, the broker's crash and return) as vertical lines. Lines are drawn with
``Scattergl`` (WebGL), one trace per state, so 100 000 events still render.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from contextlib import nullcontext

import plotly.graph_objects as go

from labkit.crashlab.history import Event, History

STATE_COLOURS = {"uncommitted": "#f2b447", "written": "#4c78a8", "committed": "#54a24b", "aborted": "#e45756",
                 "send failed": "#b279a2"}
ACTION_COLOURS = {"crash": "#d62728", "pause": "#7f7f7f", "resume": "#17becf", "fenced": "#8c564b", "stalled": "#ff7f0e",
                  "restart": "#9467bd", "txn_init": "#2ca02c", "broker back": "#1f77b4"}


def segments(events: list[Event]) -> list[tuple[str, str, float, float]]:
    """``(row, state, start_s, end_s)`` for every write of every record, times in seconds since the first event.
    A record written once has its value id as its row; each further write of the same value id (a replay, a
    zombie's, a duplicate) gets a row of its own, ``"<value id> #<n>"``, so no write hides another."""
    if not events:
        return []
    t0, t_end = events[0].mono_ns, events[-1].mono_ns
    sec = lambda ns: (ns - t0) / 1e9  # noqa: E731
    writes: dict[str, list[dict]] = {}  # value id -> its writes in send order
    txn_end = {}
    for e in events:
        if e.kind == "send":
            writes.setdefault(e.value_id, []).append(
                {"sent": e.mono_ns, "txn": (e.participant, e.txn) if e.txn is not None else None})
        elif e.kind in ("ack", "send_failed") and e.value_id in writes:  # the oldest write still unanswered
            pending = next((w for w in writes[e.value_id] if "acked" not in w and "failed" not in w), None)
            if pending is not None:
                pending["acked" if e.kind == "ack" else "failed"] = e.mono_ns
        elif e.kind == "txn_end" and e.outcome:
            txn_end[e.participant, e.txn] = (e.outcome, e.mono_ns)
        elif e.kind == "fenced" and e.txn is not None:  # a fenced producer's transaction never commits
            txn_end.setdefault((e.participant, e.txn), ("aborted", e.mono_ns))
    out = []
    for vid, its in writes.items():
        for n, w in enumerate(its, 1):
            row = vid if n == 1 else f"{vid} #{n}"
            if w["txn"]:
                outcome, at = txn_end.get(w["txn"], (None, t_end))
                out.append((row, "uncommitted", sec(w["sent"]), sec(at)))
                if outcome:
                    out.append((row, outcome, sec(at), sec(t_end)))
            elif "acked" in w:
                out.append((row, "written", sec(w["acked"]), sec(t_end)))
            elif "failed" in w:
                out.append((row, "send failed", sec(w["failed"]), sec(t_end)))
    return out


def timeline_figure(events: list[Event], title: str = "", figure: go.Figure | None = None) -> go.Figure:
    """Draw the timeline of ``events`` into ``figure`` (a new static ``go.Figure`` by default, or a
    ``go.FigureWidget`` to update live). Returns the figure."""
    fig = figure if figure is not None else go.Figure()
    t0 = events[0].mono_ns if events else 0
    by_state = defaultdict(lambda: ([], []))
    rows = {}  # value ids in order of first appearance (a dict: a list lookup made 50 000 records quadratic)
    for vid, state, a, b in segments(events):
        xs, ys = by_state[state]
        xs += [a, b, None]
        ys += [vid, vid, None]
        rows.setdefault(vid, None)
    consumed = defaultdict(lambda: ([], []))
    for e in events:
        if e.kind == "consume":
            xs, ys = consumed[e.participant]
            xs.append((e.mono_ns - t0) / 1e9)
            ys.append(e.value_id)
    traces = [go.Scattergl(x=xs, y=ys, mode="lines", name=state, line=dict(width=10, color=STATE_COLOURS[state]))
              for state, (xs, ys) in by_state.items()]
    traces += [go.Scattergl(x=xs, y=ys, mode="markers", name=f"consumed by {who}",
                            marker=dict(symbol="diamond", size=9, line=dict(width=1, color="#222")))
               for who, (xs, ys) in consumed.items()]
    shapes, notes = [], []
    for e in events:
        kind = "broker back" if (e.kind, e.participant) == ("start", "broker") else e.kind
        if kind in ACTION_COLOURS:
            x = (e.mono_ns - t0) / 1e9
            shapes.append(dict(type="line", x0=x, x1=x, yref="paper", y0=0, y1=1,
                               line=dict(color=ACTION_COLOURS[kind], dash="dot", width=2)))
            # labels staggered over three heights, so actions close in time do not overwrite each other
            notes.append(dict(x=x, yref="paper", y=1.0, yshift=4 + 14 * (len(notes) % 3), yanchor="bottom",
                              text=kind if kind == "broker back" else f"{kind} {e.participant}", showarrow=False,
                              font=dict(size=10, color=ACTION_COLOURS[kind])))
    with fig.batch_update() if isinstance(fig, go.FigureWidget) else nullcontext():
        fig.data = ()
        fig.add_traces(traces)
        fig.update_layout(title=dict(text=title, y=0.98, yanchor="top"), shapes=shapes, annotations=notes,
                          height=max(320, 190 + 22 * len(rows)), margin=dict(t=110),
                          xaxis=dict(title="seconds since the experiment started"),
                          yaxis=dict(title="record (value id)", categoryorder="array",
                                     categoryarray=list(reversed(rows)), type="category"),
                          legend=dict(orientation="v", x=1.01, y=1, yanchor="top"))
    return fig


class LiveTimeline:
    """A ``go.FigureWidget`` timeline that redraws from the history every ``interval_s`` seconds
    while an experiment runs (needs a Jupyter front end; in CI use :func:`timeline_figure`).

    Args:
        history: the experiment's :class:`~labkit.crashlab.history.History`.
        interval_s: seconds between redraws.
        title: the figure's title.
        draw: ``draw(events, title=..., figure=...)`` draws the events into the widget; default
            :func:`timeline_figure` (e.g. ``functools.partial(share_timeline_figure, topic=t)`` for
            a share group, :mod:`labkit.crashlab.share_timeline`).
    """

    def __init__(self, history: History, interval_s: float = 1.0, title: str = "",
                 draw: Callable[..., go.Figure] = timeline_figure) -> None:
        self.history, self.interval_s, self.title, self.draw = history, interval_s, title, draw
        self.widget = go.FigureWidget()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        """Redraw now from the history."""
        self.draw(self.history.events(), title=self.title, figure=self.widget)

    def start(self) -> go.FigureWidget:
        """Start redrawing in the background; returns the widget to display."""
        self.refresh()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name="labkit-live-timeline")
        self._thread.start()
        return self.widget

    def stop(self) -> None:
        """Stop redrawing (one last redraw first)."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        self.refresh()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.refresh()
