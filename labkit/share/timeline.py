"""Share-group timelines (KIP-932): one lane per offset, time on x, each record's state over time.

Two sources, drawn differently:

* **broker** (thick, pale bars): the states the share coordinator persisted in ``__share_group_state``
  (``share_state`` events: AVAILABLE, ACKNOWLEDGED, ARCHIVING, ARCHIVED; in a MODELLED run also
  KIP-1289's TX_PENDING) and the SPSO
  (``share_offsets``), as the observer read them;
* **client** (thin lines): ACQUIRED by which consumer and which delivery (from its ``delivered`` event until it
  acknowledged, committed, crashed or the record went to someone else), and the consumer's acknowledgements (markers:
  ACCEPT, RELEASE, REJECT, and RENEW (KIP-1222, Kafka's Java client: the record stays acquired by the same consumer); a
  cross where the broker refused the commit), the effects a sink wrote (diamonds; red where the record's effect was
  already written: a duplicate), plus the SPEO as the clients saw it (one past the highest offset delivered).

Crash, pause, resume and restart (a start after a crash) show as labelled vertical lines
(:func:`labkit.crashlab.timeline.action_marks`). The lanes are the partition's records, no more, and the figure fits a
laptop window however many there are (:func:`labkit.crashlab.timeline.frame`).
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import nullcontext

import plotly.graph_objects as go

from labkit.core.history import Event
from labkit.crashlab.colours import participant_colour
from labkit.crashlab.timeline import ASSUMED_WIDTH, WRONG, action_marks, frame, plot_height

BROKER_COLOURS = {"AVAILABLE": "#9ecae9", "ACKNOWLEDGED": "#54a24b", "ARCHIVING": "#c7c7c7", "ARCHIVED": "#7f7f7f",
                  "TX_PENDING": "#b279a2"}  # the last: KIP-1289's pending state, only in modelled runs
LANE_PX = 36  # an offset's lane, when the figure has room
ACK_SYMBOLS = {"ACCEPT": "circle", "RELEASE": "triangle-up", "REJECT": "x-thin-open", "RENEW": "hourglass"}


def broker_segments(events: list[Event], t0: int, t_end: int) -> list[tuple[int, str, float, float]]:
    """``(offset, state, start_s, end_s)`` of each persisted state, from ``share_state`` events."""
    current: dict[int, tuple[str, int]] = {}
    out = []
    for e in events:
        if e.kind != "share_state":
            continue
        for offset in range(e.offset, e.last_offset + 1):
            if offset in current and current[offset][0] != e.state:
                state, since = current[offset]
                out.append((offset, state, (since - t0) / 1e9, (e.mono_ns - t0) / 1e9))
            if offset not in current or current[offset][0] != e.state:
                current[offset] = (e.state, e.mono_ns)
    out += [(offset, state, (since - t0) / 1e9, (t_end - t0) / 1e9) for offset, (state, since) in current.items()]
    return out


def acquisitions(events: list[Event], t0: int, t_end: int) -> list[tuple[int, str, int, float, float]]:
    """``(offset, consumer, delivery_count, start_s, end_s)``: while a consumer held a record, as the
    client saw it (until its acknowledgement was committed, it crashed or stopped, or another got it). A committed
    RENEW (KIP-1222) does not end it: the record stays acquired by the same consumer, its lock renewed."""
    open_: dict[int, tuple[str, int, int]] = {}
    out = []

    def close(offset: int, at: int) -> None:
        who, count, since = open_.pop(offset)
        out.append((offset, who, count, (since - t0) / 1e9, (at - t0) / 1e9))

    for e in events:
        if e.kind == "delivered":
            if e.offset in open_:
                close(e.offset, e.mono_ns)
            open_[e.offset] = (e.participant, e.delivery_count or 1, e.mono_ns)
        elif (e.kind == "ack_committed" and e.offset in open_ and open_[e.offset][0] == e.participant
              and not (e.ack_type == "RENEW" and e.error is None)):
            close(e.offset, e.mono_ns)
        elif e.kind in ("crash", "stop", "finished"):
            for offset in [o for o, (who, _, _) in open_.items() if who == e.participant]:
                close(offset, e.mono_ns)
    for offset in list(open_):
        close(offset, t_end)
    return out


def share_timeline_figure(events: list[Event], topic: str, title: str = "", partition: int = 0,
                          modelled: bool = False, figure: go.Figure | None = None) -> go.Figure:
    """Draw one share partition's records (``topic``/``partition``) into ``figure`` (a new
    ``go.Figure`` by default, or a ``go.FigureWidget`` to update live). ``modelled`` labels the
    figure MODELLED (a history written by :mod:`labkit.models`, not by a broker). The lanes are the offsets drawn,
    no more; the figure is at most :data:`~labkit.crashlab.timeline.MAX_HEIGHT` px tall, its lanes thinner the more
    there are. Returns the figure."""
    mine = [e for e in events if e.topic == topic and e.partition in (partition, None)]
    fig = figure if figure is not None else go.Figure()
    if not mine:
        return fig
    who, t0 = {e.participant for e in mine}, min(e.mono_ns for e in mine)
    # lab actions (crash, pause...) of this partition's consumers, from the partition's first event on: a name reused
    # (a re-run playground's player-1) brings its earlier run's actions, which belong to another topic's figure
    events = sorted(mine + [e for e in events if e.topic is None and e.participant in who and e.mono_ns >= t0],
                    key=lambda e: e.mono_ns)
    t_end = events[-1].mono_ns
    sec = lambda ns: (ns - t0) / 1e9  # noqa: E731
    segments, held = broker_segments(events, t0, t_end), acquisitions(events, t0, t_end)
    drawn = ("delivered", "ack_committed", "effect")  # records not yet delivered, and the SPSO and SPEO, get no lane
    lanes = {o for o, *_ in segments} | {e.offset for e in events if e.kind in drawn and e.offset is not None}
    low, high = (min(lanes), max(lanes)) if lanes else (0, 0)
    actions, crashed = [], set()
    for e in events:
        if e.kind in ("crash", "pause", "resume") or (e.kind == "start" and e.participant in crashed):
            actions.append((sec(e.mono_ns), "restart" if e.kind == "start" else e.kind, e.participant))
        if e.kind == "crash":
            crashed.add(e.participant)
    traces = _traces(events, segments, held, sec, t_end)
    span = drawn_span(traces, [x for x, *_ in actions])
    shapes, notes, legend, label_rows = action_marks(actions, span, ASSUMED_WIDTH - 100)
    heading = ("MODELLED: " if modelled else "") + (title or f"share partition {topic}[{partition}]")
    body = LANE_PX * (high - low + 1)
    names = [t.name for t in traces if t.showlegend is not False] + [t["name"] for t in legend]
    lane_px = plot_height(heading, label_rows, names, body) / (high - low + 1)
    thin = min(1.0, lane_px / LANE_PX)
    for t in traces:  # thinner lanes, thinner lines and smaller markers; no delivery counts where they would overlap
        t.update(line_width=max(1.0, t.line.width * thin) if t.line.width else None,
                 marker_size=max(3.0, t.marker.size * thin) if t.marker.size else None,
                 visible=t.mode != "text" or lane_px >= 12)
    traces += [go.Scatter(**t) for t in legend]
    with fig.batch_update() if isinstance(fig, go.FigureWidget) else nullcontext():
        fig.data = ()
        fig.add_traces(traces)
        fig.update_layout(shapes=shapes, annotations=notes, **frame(heading, label_rows, names, body),
                          xaxis=dict(title="virtual seconds (MODELLED)" if modelled else
                                     "seconds since the partition's first event", range=list(span)),
                          yaxis=dict(title="offset", range=[high + 0.5, low - 0.8], tick0=0,  # -0.8: room for "×2"
                                     dtick=next(d for d in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10**9)
                                                if d * lane_px >= 14)))  # tick labels 14 px apart at least
    return fig


def drawn_span(traces: list[go.Scatter], actions_s: list[float]) -> tuple[float, float]:
    """The x range (s) that covers what ``traces`` draw and the action lines at ``actions_s``, no more: from the
    first drawn x to the last, with 2 % of that on either side for the markers at the ends (at least 0.1 s). A
    partition's first event (its records sent) comes seconds before its consumers are up and anything is drawn:
    an axis from 0 left that part of it empty."""
    xs = [x for t in traces for x in (t.x or ()) if x is not None] + list(actions_s)
    if not xs:
        return (0.0, 1.0)
    low, high = min(xs), max(xs)
    pad = max(0.02 * (high - low), 0.1)
    return (low - pad, high + pad)


def _traces(events: list[Event], segments: list, held: list, sec, t_end: int) -> list[go.Scatter]:
    """The records' states (broker bars, client lines), delivery counts, acknowledgements, effects and the SPSO and
    SPEO, sized for lanes :data:`LANE_PX` tall."""
    by_state = defaultdict(lambda: ([], []))
    for offset, state, a, b in segments:
        xs, ys = by_state[state]
        xs += [a, b, None]
        ys += [offset, offset, None]
    traces = [go.Scatter(x=xs, y=ys, mode="lines", name=f"{state} (broker)", opacity=0.45,
                         line=dict(width=16, color=BROKER_COLOURS.get(state, "#bbbbbb")))
              for state, (xs, ys) in by_state.items()]
    colour = {c: participant_colour(c) for c in sorted({e.participant for e in events if e.kind == "delivered"})}
    by_who = defaultdict(lambda: ([], [], []))
    for offset, who, count, a, b in held:
        xs, ys, text = by_who[who]
        xs += [a, b, None]
        ys += [offset, offset, None]
        text += [f"ACQUIRED by {who}, delivery {count}"] * 2 + [None]
    traces += [go.Scatter(x=xs, y=ys, mode="lines", name=f"ACQUIRED by {who} (client)", hovertext=text,
                          hoverinfo="text+x", line=dict(width=4, color=colour[who]))
               for who, (xs, ys, text) in by_who.items()]
    again = [e for e in events if e.kind == "delivered" and (e.delivery_count or 1) > 1]
    if again:  # delivery counts above the lane, an em space right of where the record is delivered again (and of the
        # marker of the acknowledgement that released it)
        traces.append(go.Scatter(x=[sec(e.mono_ns) for e in again], y=[e.offset for e in again], mode="text",
                                 text=[f"\u2003×{e.delivery_count}" for e in again], textposition="top right",
                                 textfont=dict(size=10, color="#222"), cliponaxis=False, showlegend=False,
                                 hoverinfo="skip"))
    acks = defaultdict(lambda: ([], [], []))
    for e in events:
        if e.kind == "ack_committed":
            xs, ys, text = acks[e.ack_type, e.error is not None]
            xs.append(sec(e.mono_ns))
            ys.append(e.offset)
            text.append(f"{e.participant}: {e.ack_type}" + (f" refused: {e.error}" if e.error else " committed"))
    for (ack_type, refused), (xs, ys, text) in acks.items():
        traces.append(go.Scatter(x=xs, y=ys, mode="markers", hovertext=text, hoverinfo="text+x",
                                 name=f"{ack_type} {'refused' if refused else 'committed'} (client)",
                                 marker=dict(symbol="x" if refused else ACK_SYMBOLS.get(ack_type, "circle"), size=10,
                                             color=WRONG if refused else "#222", line=dict(width=1, color="#222"))))
    return traces + _effects(events, sec) + _offset_lines(events, sec, t_end)


def _effects(events: list[Event], sec) -> list[go.Scatter]:
    """A diamond per effect a sink wrote; the second and later of one record's effects in red."""
    seen, first, again = set(), ([], []), ([], [])
    for e in events:
        if e.kind == "effect":
            xs, ys = again if e.value_id in seen else first
            xs.append(sec(e.mono_ns))
            ys.append(e.offset)
            seen.add(e.value_id)
    return [go.Scatter(x=xs, y=ys, mode="markers", name=name, marker=dict(symbol="diamond", size=11, color=colour,
                                                                           line=dict(width=1, color="#222")))
            for (xs, ys), name, colour in ((first, "effect written (sink)", "#f2b447"),
                                           (again, "effect written again: duplicate (sink)", WRONG)) if xs]


def _offset_lines(events: list[Event], sec, t_end: int) -> list[go.Scatter]:
    """SPSO as the broker reported it, and the SPEO the clients saw, as step lines between the lanes."""
    spso_x, spso_y = [], []
    for e in events:
        if e.kind == "share_offsets" and e.offset >= 0:  # -1: the share partition is not initialised yet
            spso_x.append(sec(e.mono_ns))
            spso_y.append(e.offset - 0.5)
    speo_x, speo_y, top = [], [], -1
    for e in events:
        if e.kind == "delivered" and e.offset > top:
            top = e.offset
            speo_x.append(sec(e.mono_ns))
            speo_y.append(top + 0.5)
    out = []
    if spso_x:
        out.append(go.Scatter(x=spso_x + [sec(t_end)], y=spso_y + spso_y[-1:], mode="lines", line_shape="hv",
                              name="SPSO (broker)", line=dict(color="#111", width=2)))
    if speo_x:
        out.append(go.Scatter(x=speo_x + [sec(t_end)], y=speo_y + speo_y[-1:], mode="lines", line_shape="hv",
                              name="SPEO (client view)", line=dict(color="#111", width=2, dash="dash")))
    return out
