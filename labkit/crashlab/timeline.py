"""Record-state timelines: one row per write of a record (value id, writer, offset), time on x, a coloured
segment per state; a second surviving write of a value id is marked a duplicate.

States, from the history alone: *uncommitted* (sent, its transaction not yet ended), *written*
(acked, no transaction), *committed*, *aborted* (also a fenced producer's transaction, from the fence on),
*send failed*, and *not in the log*: a write never acknowledged of which the log holds no copy, when the history
holds the log's read (the read_uncommitted ``final_read`` of its topic, :meth:`Experiment.final_reads`); without that
read an unacknowledged write keeps its transaction's state, since a crashed producer's write may be in the log
unacknowledged. A write is also *not in the log* from its send to the last reading of its partition's log end offset
(``log_end`` events, the lab's: :func:`labkit.lessons.replication.sample_log_end`) before its ack that had not
reached its offset: notebook 09's writes the leader refused while it had too few in-sync replicas, retried by
their clients, are not drawn uncommitted for the seconds the leader did not have them. Markers: consumed (per consumer),
and the lab's actions (crash, pause, resume, fenced, stalled, a supervisor's restart, a restart's
init_transactions, the broker's crash and return) as labelled vertical lines (:func:`action_marks`). Lines are drawn
with ``Scattergl`` (WebGL), one trace per state, so 100 000 events still render.

Every lab figure (this one, :mod:`labkit.share.timeline`'s and :mod:`labkit.spark.timeline`'s) fits a 1280x800
laptop window (:func:`frame`): at most :data:`MAX_HEIGHT` px tall, its rows thinner the more there are, the title
wrapped, the legend below the plot; action labels never overlap nor leave the figure.
"""

from __future__ import annotations

import textwrap
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import nullcontext

import plotly.graph_objects as go

from labkit.core.background import Periodic
from labkit.core.history import Event, History
from labkit.crashlab.colours import participant_colour

STATE_COLOURS = {"uncommitted": "#f2b447", "written": "#4c78a8", "committed": "#54a24b", "aborted": "#e45756",
                 "send failed": "#b279a2", "not in the log": "#bab0ac"}
DUPLICATE = " — duplicate"  # the end of a surviving write's row when the value id already survived once
LOST = " — lost"  # the end of an acknowledged write's row when the log read after the run no longer holds it
WRONG = "#d62728"  # red: a crash, a duplicate, a refusal (and, lighter, an aborted write); nothing else is red
#: The lab's actions as vertical lines, ``(colour, dash)``: dark greys told apart by their dash, a crash red. No
#: participant's (:data:`~labkit.crashlab.colours.PALETTE`) nor state's colour.
ACTION_STYLES = {"crash": (WRONG, "solid"), "pause": ("#555555", "dot"), "resume": ("#555555", "dash"),
                 "stalled": ("#555555", "dashdot"), "fenced": ("#222222", "dot"), "failed": ("#222222", "dash"),
                 "restart": ("#222222", "longdash"), "txn_init": ("#222222", "dashdot"),
                 "broker back": ("#222222", "longdashdot")}
MAX_HEIGHT = 760  # px: a figure with its title, legend and axes fits a 1280x800 laptop window
ASSUMED_WIDTH = 850  # px: a figure's width in JupyterLab on such a laptop, file browser open (wider: more room)
LABEL_FONT, CHAR_PX, LABEL_ROW_PX = 11, 6.8, 16  # action labels: font size, a character's width (generous), a row
MERGE_PX = 40  # one participant's actions closer than this share a label


def writes(events: list[Event]) -> list[dict]:
    """Every write of every record, in send order, as ``{"row", "writer", "topic", "partition", "offset",
    "states"}``:
    ``offset`` is None until the write is acknowledged (a fenced zombie's write may never be); ``states`` is
    ``[(state, start_s, end_s)]``, times in seconds since the first event. Each write has a row of its own,
    ``"<value id> by <writer> @<offset>"`` (``#<n>`` added if that is taken), so no write hides another; a
    second write of a value id that also survives (committed, or written without a transaction) is marked
    ``"— duplicate"``. An acknowledged write whose offset the log read after the run (``final_read``) no longer holds
    (a truncated log: notebook 09's unclean leader election) is marked ``"— lost"`` and drawn "not in the log" from
    the run's last event, when the lab read the log: the history does not say when the log lost it. An acknowledged
    write is "not in the log" from its send to the last ``log_end`` reading of its partition before its ack that had
    not reached its offset (the module's docstring)."""
    if not events:
        return []
    t0, t_end = events[0].mono_ns, _drawn_end(events)
    read_at = next((e.mono_ns for e in reversed(events) if e.kind != "final_read"), t0)
    sec = lambda ns: (ns - t0) / 1e9  # noqa: E731
    by_vid: dict[str, list[dict]] = {}  # value id -> its writes in send order
    txn_end = {}
    logged: dict[str, list[tuple]] = defaultdict(list)  # value id -> where the log holds a copy
    log_at: dict[tuple, str] = {}  # (topic, partition, offset) -> the value id the log holds there
    log_read = set()  # the topics whose log the history holds
    log_ends: dict[tuple, list[tuple[int, int]]] = defaultdict(list)  # (topic, partition) -> (ns, log end offset)
    for e in events:
        if e.kind == "log_end":
            log_ends[e.topic, e.partition].append((e.mono_ns, e.offset))
        if e.kind == "final_read" and e.isolation_level == "read_uncommitted":
            log_read.add(e.topic)
            if e.value_id is not None:
                logged[e.value_id].append((e.topic, e.partition, e.offset))
                log_at[e.topic, e.partition, e.offset] = e.value_id
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
            # the last reading of the log's end before its ack that had not reached it: till then not in the log
            absent = max((ns for ns, end in log_ends.get((w["topic"], w["partition"]), ())
                          if "acked" in w and w["sent"] <= ns <= w["acked"] and end <= w["offset"]), default=None)
            if w["txn"]:
                outcome, at = txn_end.get(w["txn"], (None, t_end))
                w["states"] = [("uncommitted", sec(absent or w["sent"]), sec(at))] + (
                    [(outcome, sec(at), sec(t_end))] if outcome else [])
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
            lost = "acked" in w and w["topic"] in log_read and log_at.get((w["topic"], w["partition"], w["offset"])) != vid
            if lost:
                w["states"] = [(st, a, min(b, sec(read_at))) for st, a, b in w["states"] if a < sec(read_at)]
                w["states"].append(("not in the log", sec(read_at), sec(t_end)))
            if absent is not None:
                w["states"].insert(0, ("not in the log", sec(w["sent"]), sec(absent)))
            row = f"{vid} by {w['writer']}" + (f" @{w['offset']}" if w["offset"] is not None else "")
            taken[row] += 1
            row += f" #{taken[row]}" if taken[row] > 1 else ""
            if w["states"] and w["states"][-1][0] in ("committed", "written"):
                survivors += 1
                row += DUPLICATE if survivors > 1 else ""
            row += LOST if lost else ""
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


def timeline_figure(events: list[Event], title: str = "", figure: go.Figure | None = None,
                    end_s: float | None = None) -> go.Figure:
    """Draw the timeline of ``events`` into ``figure`` (a new static ``go.Figure`` by default, or a
    ``go.FigureWidget`` to update live). At most :data:`MAX_HEIGHT` px tall whatever the number of writes: rows get
    thinner and plotly thins their labels. ``end_s``: where the time axis ends (seconds since the first event; default
    a little after the last), e.g. one end for figures read one above the other; set it here, not on the figure
    afterwards, so the action labels are laid out on the axis drawn. Returns the figure."""
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
    actions, crashed = [], set()  # crashed: participants not yet restarted; their next start is drawn as a restart
    for e in events:
        kind = "broker back" if (e.kind, e.participant) == ("start", "broker") else e.kind
        if kind == "crash":
            crashed.add(e.participant)
        elif kind == "restart" or (kind == "start" and e.participant in crashed):
            kind = "restart"
            crashed.discard(e.participant)
        if kind in ACTION_STYLES:
            actions.append(((e.mono_ns - t0) / 1e9, kind, e.participant))
    span = (0.0, end_s if end_s is not None else (_drawn_end(events) - t0) / 1e9 if events else 1.0)
    read_only = {y for _, ys in consumed.values() for y in ys if y not in rows}  # e.g. records of an input topic
    categories = [*reversed(rows), *sorted(read_only, key=str)]  # bottom to top: the first write on top
    longest = max((len(str(c)) for c in categories), default=0)  # the y labels' width, in characters
    shapes, notes, legend, label_rows = action_marks(actions, span, ASSUMED_WIDTH - 7 * longest - 60)
    dupes = [(w["states"][-1][1], w["row"]) for w in drawn if w["row"].endswith(DUPLICATE)]
    names = [*by_state, *(f"consumed by {who}" for who in consumed), *(["duplicate"] if dupes else []),
             *(t["name"] for t in legend)]
    row_px = plot_height(title, label_rows, names, 22 * len(categories)) / max(1, len(categories))
    bar, mark = max(1.0, min(10.0, 0.7 * row_px)), max(3.0, min(9.0, row_px))
    traces = [go.Scattergl(x=xs, y=ys, mode="lines", name=state, hovertext=hover, hoverinfo="text+x",
                           line=dict(width=bar, color=STATE_COLOURS[state]))
              for state, (xs, ys, hover) in by_state.items()]
    traces += [go.Scattergl(x=xs, y=ys, mode="markers", name=f"consumed by {who}",
                            marker=dict(symbol="diamond", size=mark, color=participant_colour(who),
                                        line=dict(width=1 if mark >= 6 else 0, color="#222")))
               for who, (xs, ys) in consumed.items()]
    if dupes:  # a cross where each duplicate begins to count, visible even when its bar is short
        traces.append(go.Scattergl(x=[x for x, _ in dupes], y=[r for _, r in dupes], mode="markers", name="duplicate",
                                   marker=dict(symbol="x", size=mark + 4, color=WRONG,
                                               line=dict(width=1, color="#fff"))))
    traces += [go.Scattergl(**t) for t in legend]
    with fig.batch_update() if isinstance(fig, go.FigureWidget) else nullcontext():
        fig.data = ()
        fig.add_traces(traces)
        fig.update_layout(shapes=shapes, annotations=notes, **frame(title, label_rows, names, 22 * len(categories)),
                          xaxis=dict(title="seconds since the experiment started", range=list(span)),
                          yaxis=dict(title=dict(text="record: value id<br>by writer @offset", font=dict(size=12)),
                                     categoryorder="array", categoryarray=categories, type="category",
                                     tickfont=dict(size=10)))
    return fig


def action_marks(actions: list[tuple[float, str, str]], span: tuple[float, float], plot_px: float
                 ) -> tuple[list[dict], list[dict], list[dict], int]:
    """The lab's actions ``(x, kind, participant)`` (kinds of :data:`ACTION_STYLES`) on an x axis over ``span``
    drawn ``plot_px`` wide: a vertical line each, a label each above the plot, and a legend entry per kind.

    One participant's actions less than :data:`MERGE_PX` apart share a label (``"crash → restart p"``; a kind
    repeated is named once). Labels go on the lowest row above the plot where they overlap no other label, by their
    width in px (:data:`CHAR_PX` a character): each starts at its line, or else ends there, or else ends at the axis'
    end. Returns ``(shapes, annotations, legend traces as dicts of trace properties, rows of labels)``."""
    px = lambda x: (x - span[0]) / max(span[1] - span[0], 1e-9) * plot_px  # noqa: E731
    shapes = [dict(type="line", x0=x, x1=x, yref="paper", y0=0, y1=1, line=dict(color=ACTION_STYLES[k][0],
               dash=ACTION_STYLES[k][1], width=1.5)) for x, k, _ in sorted(actions, key=lambda a: a[1] == "crash")]
    groups: list[list] = []  # [x of its first action, x of its last, kinds, participant]
    for x, kind, who in sorted(actions, key=lambda a: a[0]):
        group = next((g for g in reversed(groups) if g[3] == who and px(x) - px(g[1]) < MERGE_PX), None)
        if group is None:
            groups.append([x, x, [kind], who])
        else:
            group[1] = x
            group[2] += [kind] if kind != group[2][-1] else []
    ends: list[list[tuple[float, float]]] = []  # per row, the (left, right) px of its labels
    notes = []
    for x, _, kinds, who in groups:
        text = " → ".join(kinds) + ("" if who in kinds[-1].split() else f" {who}")  # "broker back" names its own
        width = CHAR_PX * len(text) + 4
        left = next((a for a in (px(x), px(x) - width) if 0 <= a <= plot_px - width), max(0.0, plot_px - width))
        row = next((i for i, taken in enumerate(ends)
                    if all(left >= b + 6 or left + width + 6 <= a for a, b in taken)), len(ends))
        if row == len(ends):
            ends.append([])
        ends[row].append((left, left + width))
        ends_at_line = left == px(x) - width  # exact whatever the font's real width; else shifted by the estimate
        notes.append(dict(x=x, yref="paper", y=1.0, xshift=0 if ends_at_line else left - px(x), text=text,
                          xanchor="right" if ends_at_line else "left", yshift=3 + LABEL_ROW_PX * row,
                          yanchor="bottom", showarrow=False,
                          font=dict(size=LABEL_FONT, color=WRONG if "crash" in kinds else "#333")))
    legend = [dict(x=[None], y=[None], mode="lines", name=f"{k} (lab)", hoverinfo="skip",
                   line=dict(color=ACTION_STYLES[k][0], dash=ACTION_STYLES[k][1], width=2))
              for k in ACTION_STYLES if any(a[1] == k for a in actions)]
    return shapes, notes, legend, len(ends)


def _title(title: str) -> tuple[str, int]:
    """The title wrapped to lines that fit :data:`ASSUMED_WIDTH`, and its number of lines."""
    lines = textwrap.wrap(title, ASSUMED_WIDTH // 10) or [""]  # a character of the 15 px font: at most 10 px wide
    return "<br>".join(lines), len(lines) if title else 0


def _margins(title: str, label_rows: int, legend: list[str]) -> tuple[int, int]:
    """Top (title, then the rows of action labels) and bottom (x axis, then the legend's rows) margins in px."""
    columns = max(1, ASSUMED_WIDTH // max((40 + 7 * len(name) for name in legend), default=1))  # plotly's grid
    legend_rows = -(-len(legend) // columns)
    return 12 + 22 * _title(title)[1] + LABEL_ROW_PX * label_rows + 8, 60 + 22 * legend_rows


def plot_height(title: str, label_rows: int, legend: list[str], body_px: float) -> float:
    """The height in px left to the plot of a figure laid out by :func:`frame`."""
    top, bottom = _margins(title, label_rows, legend)
    return min(MAX_HEIGHT, top + max(body_px, 160) + bottom) - top - bottom


def frame(title: str, label_rows: int, legend: list[str], body_px: float) -> dict:
    """Layout of a lab figure: the title wrapped at the top, ``label_rows`` rows of action labels under it, the plot
    ``body_px`` tall (less if the figure would pass :data:`MAX_HEIGHT`), the x axis, and below it a horizontal
    legend of the entries named ``legend``."""
    top, bottom = _margins(title, label_rows, legend)
    # the title's bottom line sits just above the label rows, its lines going up from there: anchored at its top
    # (yref "container"), JupyterLab's plotly drew a two-line title's first line above the figure, cut off
    return dict(title=dict(text=_title(title)[0], x=0.01, xanchor="left", y=1, yanchor="bottom", yref="paper",
                           pad=dict(b=7 + LABEL_ROW_PX * label_rows), font=dict(size=15)),
                height=top + plot_height(title, label_rows, legend, body_px) + bottom,
                margin=dict(t=top, b=bottom, r=20),
                legend=dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom",
                            font=dict(size=11)))


class LiveTimeline:
    """A ``go.FigureWidget`` timeline that redraws from the history every ``interval_s`` seconds
    while an experiment runs (needs a Jupyter front end; in CI use :func:`timeline_figure`).

    Args:
        history: the experiment's :class:`~labkit.core.history.History`.
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
