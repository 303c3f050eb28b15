"""Record-state timelines: one row per record, time on x, a coloured segment per state.

States, from the history alone: *uncommitted* (sent, its transaction not yet ended), *written*
(acked, no transaction), *committed*, *aborted*, *send failed*. Markers: consumed (per consumer),
and the lab's actions (crash, pause, resume, fenced) as vertical lines. Lines are drawn with
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
ACTION_COLOURS = {"crash": "#d62728", "pause": "#7f7f7f", "resume": "#17becf", "fenced": "#8c564b"}


def segments(events: list[Event]) -> list[tuple[str, str, float, float]]:
    """``(value_id, state, start_s, end_s)`` for every record, times in seconds since the first event."""
    if not events:
        return []
    t0, t_end = events[0].mono_ns, events[-1].mono_ns
    sec = lambda ns: (ns - t0) / 1e9  # noqa: E731
    sent, acked, failed = {}, {}, {}
    txn_of, txn_end = {}, {}
    for e in events:
        if e.kind == "send":
            sent.setdefault(e.value_id, e.mono_ns)
            if e.txn is not None:
                txn_of[e.value_id] = (e.participant, e.txn)
        elif e.kind == "ack":
            acked.setdefault(e.value_id, e.mono_ns)
        elif e.kind == "send_failed":
            failed.setdefault(e.value_id, e.mono_ns)
        elif e.kind == "txn_end" and e.outcome:
            txn_end[e.participant, e.txn] = (e.outcome, e.mono_ns)
    out = []
    for vid, start in sent.items():
        txn = txn_of.get(vid)
        if txn:
            outcome, at = txn_end.get(txn, (None, t_end))
            out.append((vid, "uncommitted", sec(start), sec(at)))
            if outcome:
                out.append((vid, outcome, sec(at), sec(t_end)))
        elif vid in acked:
            out.append((vid, "written", sec(acked[vid]), sec(t_end)))
        elif vid in failed:
            out.append((vid, "send failed", sec(failed[vid]), sec(t_end)))
    return out


def timeline_figure(events: list[Event], title: str = "", figure: go.Figure | None = None) -> go.Figure:
    """Draw the timeline of ``events`` into ``figure`` (a new static ``go.Figure`` by default, or a
    ``go.FigureWidget`` to update live). Returns the figure."""
    fig = figure if figure is not None else go.Figure()
    t0 = events[0].mono_ns if events else 0
    by_state = defaultdict(lambda: ([], []))
    rows = []
    for vid, state, a, b in segments(events):
        xs, ys = by_state[state]
        xs += [a, b, None]
        ys += [vid, vid, None]
        if vid not in rows:
            rows.append(vid)
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
        if e.kind in ACTION_COLOURS:
            x = (e.mono_ns - t0) / 1e9
            shapes.append(dict(type="line", x0=x, x1=x, yref="paper", y0=0, y1=1,
                               line=dict(color=ACTION_COLOURS[e.kind], dash="dot", width=2)))
            notes.append(dict(x=x, yref="paper", y=1.02, text=f"{e.kind} {e.participant}", showarrow=False,
                              font=dict(size=10, color=ACTION_COLOURS[e.kind]), textangle=-30))
    with fig.batch_update() if isinstance(fig, go.FigureWidget) else nullcontext():
        fig.data = ()
        fig.add_traces(traces)
        fig.update_layout(title=title, shapes=shapes, annotations=notes, height=max(300, 120 + 14 * len(rows)),
                          xaxis=dict(title="seconds since the experiment started"),
                          yaxis=dict(title="record (value id)", categoryorder="array",
                                     categoryarray=list(reversed(rows)), type="category"),
                          legend=dict(orientation="h", y=-0.15))
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
