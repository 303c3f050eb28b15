"""The micro-batch timeline of a Spark pipeline participant (:mod:`labkit.spark.roles.spark_pipeline`).

One row per micro-batch id. Left, on a time axis: when Spark wrote ``offsets/N`` (◆), each run of the sink
for the batch (a bar from the sink's start to its end: *written* for Spark's Kafka writer, *committed* or
*aborted* for a Kafka transaction, *skipped* when the batch's marker was already committed, *crashed* when
the driver died inside it; a crash is labelled with its crash point on the row of the batch it hit), the Kafka
transaction's commit (●) and ``commits/N`` (■); crashes and restarts are labelled vertical lines
(:func:`~labkit.crashlab.timeline.action_marks`). Right, on the same rows, once the history holds the lab's final
read of the output: what the batch's input records became in the read_committed output: written once, extra copies
(duplicates), missing. Everything is computed from the history alone (:func:`batch_rows`), so a test can hold the
figure to the history it draws. The figure fits a laptop window however many batches there are
(:func:`~labkit.crashlab.timeline.frame`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from contextlib import nullcontext
from dataclasses import dataclass, field

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from labkit.core.history import Event, derived_id
from labkit.crashlab.timeline import ASSUMED_WIDTH, LABEL_ROW_PX, action_marks, frame, plot_height

RUN_COLOURS = {"written": "#4c78a8", "committed": "#54a24b", "aborted": "#e45756", "crashed": "#d62728",
               "skipped": "#bab0ac", "running": "#f2b447"}
ROW_PX = 34  # a batch's row, when the figure has room
#: The subplots: the timeline and, once the output was read, what the inputs became; their share of the plot's width,
#: the gap between them, their titles (font size in px) and the right one's x axis title: each fits over its panel in a
#: figure :data:`~labkit.crashlab.timeline.ASSUMED_WIDTH` or :data:`LIVE_WIDTH` px wide (tests/test_figure_layout.py).
COLUMN_WIDTHS, SPACING = (0.7, 0.3), 0.03
TITLES, TITLE_FONT = ("micro-batches over time", "its inputs, in the output"), 13
AXIS2_TITLE = "input records (read_committed)"
#: px: a live figure's width (a ``FigureWidget``): JupyterLab's notebook column at 1280x800 with the file browser
#: open is 848 px, as is the book's.
LIVE_WIDTH = 840
COPY_COLOURS = {"once": "#54a24b", "extra copies": "#d62728", "missing": "#7f7f7f"}


@dataclass
class BatchRow:
    """One micro-batch as the history tells it. Times in seconds since the first event.

    Attributes:
        batch_id: Spark's batch id.
        offsets_s: when ``offsets/N`` was written (``None``: not seen).
        runs: ``(start_s, end_s, outcome)`` per run of the sink, outcome one of :data:`RUN_COLOURS`.
        crashes: ``(time_s, crash point)`` of each driver crash inside the batch (the point is ``None`` for a
            crash from outside, e.g. the panel's button).
        kafka_commit_s: when the batch's Kafka transaction committed (sink B), else ``None``.
        commits_s: when ``commits/N`` was written, else ``None``.
        copies: input records of the batch in the read_committed final read of the input topic, by the number of
            copies of their output in the read_committed final read of the output topic (0: no output).
        inputs, once, extra, missing (from ``copies``): the batch's input records; of those, the ones whose output
            was read (once or more); the extra copies in all (an output read 3 times adds 2); the ones with no output.
    """

    batch_id: int
    offsets_s: float | None = None
    runs: list[tuple[float, float, str]] = field(default_factory=list)
    crashes: list[tuple[float, str | None]] = field(default_factory=list)
    kafka_commit_s: float | None = None
    commits_s: float | None = None
    copies: Counter = field(default_factory=Counter)

    @property
    def inputs(self) -> int:
        return sum(self.copies.values())

    @property
    def once(self) -> int:
        return sum(n for c, n in self.copies.items() if c >= 1)

    @property
    def extra(self) -> int:
        return sum((c - 1) * n for c, n in self.copies.items() if c > 1)

    @property
    def missing(self) -> int:
        return self.copies[0]


def batch_rows(events: list[Event], input_topic: str, output_topic: str, stage: str = "out") -> list[BatchRow]:
    """The micro-batches of a pipeline history, in batch id order (see :class:`BatchRow`)."""
    if not events:
        return []
    t0, t_end = events[0].mono_ns, events[-1].mono_ns
    sec = lambda ns: (ns - t0) / 1e9  # noqa: E731
    rows: dict[int, BatchRow] = {}
    ranges: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # batch -> (partition, first, last)
    open_run: dict[str, tuple[int, float]] = {}  # participant -> (batch id, start_s) of the sink run in progress
    txn_batch: dict[tuple, int] = {}
    last_batch: dict[str, int] = {}  # participant -> the batch its sink last started (a crash belongs to it)

    def row(n: int) -> BatchRow:
        return rows.setdefault(n, BatchRow(n))

    def close(who: str, end_s: float, outcome: str) -> None:
        if who in open_run:
            n, start = open_run.pop(who)
            row(n).runs.append((start, end_s, outcome))

    for e in events:
        if e.kind == "batch_offsets":
            row(e.batch_id).offsets_s = sec(e.mono_ns)
            ranges[e.batch_id].append((e.partition, e.offset, e.last_offset))
        elif e.kind == "batch_start":
            close(e.participant, sec(e.mono_ns), "crashed")
            open_run[e.participant] = (e.batch_id, sec(e.mono_ns))
            last_batch[e.participant] = e.batch_id
        elif e.kind == "txn_begin" and e.batch_id is not None:
            txn_batch[e.participant, e.txn] = e.batch_id
        elif e.kind == "batch_written" and e.txn is None:
            close(e.participant, sec(e.mono_ns), "written")
        elif e.kind == "batch_skipped":
            close(e.participant, sec(e.mono_ns), "skipped")
        elif e.kind == "txn_end" and (e.participant, e.txn) in txn_batch and e.outcome:
            close(e.participant, sec(e.mono_ns), e.outcome)
            if e.outcome == "committed":
                row(txn_batch[e.participant, e.txn]).kafka_commit_s = sec(e.mono_ns)
        elif e.kind in ("crash", "fenced", "start"):
            if e.kind == "crash" and e.participant in last_batch:
                row(last_batch[e.participant]).crashes.append((sec(e.mono_ns), e.step))
            close(e.participant, sec(e.mono_ns), "crashed")
        elif e.kind == "batch_committed":
            row(e.batch_id).commits_s = sec(e.mono_ns)
    for who in list(open_run):
        close(who, sec(t_end), "running")
    _count_outputs(events, rows, ranges, input_topic, output_topic, stage)
    return [rows[n] for n in sorted(rows)]


def _count_outputs(events, rows, ranges, input_topic, output_topic, stage) -> None:
    final = [e for e in events if e.kind == "final_read" and e.isolation_level == "read_committed" and e.value_id]
    copies = Counter(e.value_id for e in final if e.topic == output_topic)
    for e in final:
        if e.topic != input_topic:
            continue
        n = next((b for b, spans in ranges.items() for p, first, last in spans
                  if p == e.partition and first <= e.offset <= last), None)
        if n is None:
            continue
        rows[n].copies[copies[derived_id(e.value_id, stage)]] += 1


def spark_timeline_figure(events: list[Event], input_topic: str, output_topic: str, title: str = "",
                          figure: go.Figure | None = None) -> go.Figure:
    """Draw the micro-batch timeline of ``events`` at most :data:`~labkit.crashlab.timeline.MAX_HEIGHT` px tall and
    return it: a new ``go.Figure`` by default, else ``figure`` (a ``go.FigureWidget`` redrawn live), given the whole
    figure (its traces and layout replaced, not merged: plotly merges a list of annotations element by element,
    cycling the shorter one, which drew a previous frame's labels and subplot titles on top of each other).

    The right panel (what the inputs became) is drawn once the history holds the lab's read_committed read of
    ``output_topic`` (:meth:`~labkit.crashlab.experiment.Experiment.final_reads`); before it, e.g. while the
    pipeline runs, nothing says what they became, and the timeline takes the whole width. A ``FigureWidget`` is
    :data:`LIVE_WIDTH` px wide (plotly's widget, unlike a static figure, does not follow JupyterLab's column: it
    was drawn 700 px wide, plotly.js's default, cutting off the right panel's title); its action labels are laid
    out for that width."""
    rows = batch_rows(events, input_topic, output_topic)
    read = any(e.kind == "final_read" and e.topic == output_topic and e.isolation_level == "read_committed"
               for e in events)
    live = isinstance(figure, go.FigureWidget)
    width = LIVE_WIDTH if live else ASSUMED_WIDTH
    label = {r.batch_id: f"batch {r.batch_id}" for r in rows}
    order = [label[r.batch_id] for r in reversed(rows)]
    grid = (make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=list(COLUMN_WIDTHS),
                          horizontal_spacing=SPACING, subplot_titles=TITLES) if read
            else make_subplots(rows=1, cols=1, subplot_titles=TITLES[:1]))
    last = next((e for e in reversed(events) if e.kind != "final_read"), None)  # the lab's reads come later
    end_s = (last.mono_ns - events[0].mono_ns) / 1e9 if last else 1.0
    span = (-0.02 * end_s, 1.02 * end_s or 1.0)
    shapes, notes, legend, label_rows = action_marks(_actions(events), span, left_px(grid.layout, width))
    traces = _run_traces(rows, label) + _point_traces(rows, label) + _labels(rows, label)
    traces += _copy_traces(rows, label) if read else []
    names = [t.name for t in traces if t.showlegend is not False] + [t["name"] for t in legend]
    thin = min(1.0, plot_height(title, label_rows + 2, names, ROW_PX * len(rows)) / max(1, len(rows)) / ROW_PX)
    for t in traces:  # thinner rows: thinner bars, smaller markers, no words where they would overlap
        if isinstance(t, go.Scatter):
            t.update(line_width=max(1.0, t.line.width * thin) if t.line.width else None,
                     marker_size=max(3.0, t.marker.size * thin) if t.marker.size else None,
                     visible=t.mode != "text" or thin * ROW_PX >= 14)
    traces += [go.Scatter(**t) for t in legend]
    for note in grid.layout.annotations:  # the subplot titles, above the rows of action labels
        note.update(yshift=4 + LABEL_ROW_PX * label_rows, font=dict(size=TITLE_FONT))
    fig = go.Figure(data=traces, layout=grid.layout)
    fig.layout.annotations = [*grid.layout.annotations, *notes]
    fig.layout.shapes = shapes
    category = dict(type="category", categoryorder="array", categoryarray=order)
    fig.update_layout(barmode="stack", bargap=0.35,
                      **frame(title, label_rows + 2, names, ROW_PX * len(rows)),  # 2: the subplot titles' rows
                      xaxis=dict(title="seconds since the experiment started", range=list(span)), yaxis=category,
                      **(dict(xaxis2=dict(title=AXIS2_TITLE), yaxis2=category) if read else {}),
                      **(dict(width=width) if live else {}))
    if figure is None:
        return fig
    with figure.batch_update() if live else nullcontext():
        figure.data = ()
        figure.add_traces(fig.data)
        figure.layout = fig.layout
    return figure


def left_px(layout: go.Layout, width: float) -> float:
    """The width in px of the timeline's plot (the left panel, or the only one) of ``layout`` in a figure ``width``
    px wide (plotly's default left margin, 80 px, and :func:`~labkit.crashlab.timeline.frame`'s right one, 20)."""
    low, high = layout.xaxis.domain
    return (high - low) * (width - 80 - 20)


def _run_traces(rows: list[BatchRow], label: dict) -> list[go.Scatter]:
    """A bar per sink run; a run shorter than 1% of the time axis (a skipped batch) is drawn 1% wide."""
    by_outcome = defaultdict(lambda: ([], [], []))
    span = max((b for r in rows for _, b, _ in r.runs), default=1.0)
    for r in rows:
        for a, b, outcome in r.runs:
            b = max(b, a + span / 100)
            xs, ys, text = by_outcome[outcome]
            xs += [a, b, None]
            ys += [label[r.batch_id]] * 2 + [None]
            text += [f"batch {r.batch_id}: sink run {outcome}"] * 2 + [None]
    return [go.Scatter(x=xs, y=ys, mode="lines", name=f"sink run: {outcome}", hovertext=text, hoverinfo="text+x",
                       line=dict(width=12, color=RUN_COLOURS[outcome])) for outcome, (xs, ys, text) in by_outcome.items()]


def _point_traces(rows: list[BatchRow], label: dict) -> list[go.Scatter]:
    points = (("offsets_s", "offsets/N written", "diamond", "#555"), ("kafka_commit_s", "Kafka transaction committed",
              "circle", "#1b5e20"), ("commits_s", "commits/N written", "square", "#111"))
    traces = []
    for attr, name, symbol, colour in points:
        have = [r for r in rows if getattr(r, attr) is not None]
        if have:
            traces.append(go.Scatter(x=[getattr(r, attr) for r in have], y=[label[r.batch_id] for r in have],
                                     mode="markers", name=name, marker=dict(symbol=symbol, size=10, color=colour,
                                                                            line=dict(width=1, color="white"))))
    return traces


def _copy_traces(rows: list[BatchRow], label: dict) -> list[go.Bar]:
    ys = [label[r.batch_id] for r in rows]
    return [go.Bar(x=[getattr(r, attr) for r in rows], y=ys, orientation="h", name=name, xaxis="x2", yaxis="y2",
                   marker_color=COPY_COLOURS[name], text=[getattr(r, attr) or "" for r in rows], textposition="inside")
            for attr, name in (("once", "once"), ("extra", "extra copies"), ("missing", "missing"))]


def _labels(rows: list[BatchRow], label: dict) -> list[go.Scatter]:
    """Words on the batch rows: where the driver crashed (above the row, right of the crash), and a skipped run
    (below the row, left of it), so the two never overwrite each other when the skip follows the crash closely."""
    xs, ys, text, where = [], [], [], []
    for r in rows:
        for at, step in r.crashes:
            xs.append(at), ys.append(label[r.batch_id]), where.append("top right")
            text.append(f"✕ {step or 'crash'}")
        for a, _, outcome in r.runs:
            if outcome == "skipped":
                xs.append(a), ys.append(label[r.batch_id]), where.append("bottom left")
                text.append("skipped ▸")
    if not xs:
        return []
    return [go.Scatter(x=xs, y=ys, mode="text", text=text, textposition=where, showlegend=False, hoverinfo="skip",
                       textfont=dict(size=11, color="#333"))]


def _actions(events: list[Event]) -> list[tuple[float, str, str]]:
    """The lab's actions on the driver ``(time_s, kind, participant)``: crash, restart (a start but the first, which
    begins the experiment), pause, resume, fenced, stalled."""
    out, starts = [], 0
    for e in events:
        if e.kind not in ("crash", "start", "pause", "resume", "fenced", "stalled") or e.participant == "lab":
            continue
        starts += e.kind == "start"
        if e.kind != "start" or starts > 1:
            kind = "restart" if e.kind == "start" else e.kind
            out.append(((e.mono_ns - events[0].mono_ns) / 1e9, kind, e.participant))
    return out
