"""Every timeline fits a 1280x800 laptop window and reads: at most MAX_HEIGHT px tall with its title, legend and axes
whatever the number of records; no action label overlaps another or leaves the figure; each legend entry once, and one
for each kind of line drawn. Labels are boxes of the width :mod:`labkit.crashlab.timeline` reckons a character."""

import plotly.graph_objects as go
import pytest

from labkit.crashlab.timeline import ASSUMED_WIDTH, CHAR_PX, LABEL_ROW_PX, MAX_HEIGHT, timeline_figure
from labkit.share.timeline import share_timeline_figure
from labkit.spark.timeline import LIVE_WIDTH, left_px, spark_timeline_figure
from tests.histories import IN, OUT, SHARE, H, S

LONG_TITLE = ("Java client without a rebalance listener, KIP-447: the zombie rejoined in the background; its offsets "
              "and its B commit")


def lab_actions(h, at_end=False):
    """What notebooks 02, 05 and 08 do in a moment: two participants stall and crash together, a zombie is fenced
    twice, a supervisor restarts; and, at the very end, the broker's crash and return."""
    h.add("stalled", "processor-l").add("crash", "processor-librdkafka").add("start", "processor-librdkafka")
    h.add("txn_init", "processor-librdkafka").add("fenced", "instance-1").add("fenced", "instance-1")
    h.add("pause", "instance-2").add("resume", "instance-2")
    if at_end:
        h.add("crash", "broker").add("start", "broker")
    return h


def records(n):
    h = H()
    for i in range(n):
        h.t += 10**8
        h.add("txn_begin", "processor-librdkafka", txn=i).write("processor-librdkafka", f"s-{i}>out", 2 * i, txn=i)
        h.txn("processor-librdkafka", i, "committed" if i % 5 else "aborted")
        h.add("consume", "reader", topic=OUT, partition=0, offset=2 * i, value_id=f"s-{i}>out")
        if i == n // 2:
            lab_actions(h)
    return lab_actions(h, at_end=True).events


def shared(n):
    h = S().written(n)
    for o in range(n):
        h.later(200).delivered(f"c{o % 3}", o)
        if o % 4 == 0:
            h.acked(f"c{o % 3}", o, "RELEASE").state(o, o, "AVAILABLE").later(100).delivered("c1", o, count=2)
        h.acked("c1" if o % 4 == 0 else f"c{o % 3}", o).state(o, o, "ACKNOWLEDGED")
        if o == n // 2:
            for kind, who in (("crash", "c2"), ("start", "c2"), ("pause", "c0"), ("crash", "c0"), ("resume", "c1")):
                h.add(kind, who, topic=None)
    return h.spso(n).events


def batches(n):
    h = H().add("start", "d")
    for b in range(n):
        h.t += 10**8
        h.add("batch_offsets", "d", batch_id=b, topic=IN, partition=0, offset=b, last_offset=b)
        h.add("batch_start", "d", batch_id=b).add("batch_written", "d", batch_id=b).add("batch_committed", "d", batch_id=b)
        if b == n // 2:
            h.add("crash", "d", step="after_produce").add("start", "d").add("pause", "d").add("resume", "d")
    h.final(IN, "read_committed", [(b, f"s-{b}") for b in range(n)])
    return h.finals([(b, f"s-{b}>out") for b in range(n)]).events


def figures(n):
    """(figure, the plot's width in px the labels were laid out for) of each kind, ``n`` records."""
    crash = timeline_figure(records(n), title=LONG_TITLE)
    longest = max(len(str(c)) for c in crash.layout.yaxis.categoryarray)
    spark, live = (spark_timeline_figure(batches(n), IN, OUT, LONG_TITLE, figure=f)
                   for f in (None, go.FigureWidget()))
    return [(crash, ASSUMED_WIDTH - 7 * longest - 60),
            (share_timeline_figure(shared(n), SHARE, LONG_TITLE), ASSUMED_WIDTH - 100),
            (spark, left_px(spark.layout, ASSUMED_WIDTH)), (live, left_px(live.layout, LIVE_WIDTH))]


def label_boxes(fig, plot_px):
    """Each action label's box, ``(left, right, row)``, in px from the plot's left edge."""
    low, high = fig.layout.xaxis.range
    boxes = []
    for note in fig.layout.annotations:
        if note.yshift is None or note.yref != "paper" or note.xref not in (None, "x"):
            continue  # not an action label (a subplot's title)
        x, width = (note.x - low) / (high - low) * plot_px, CHAR_PX * len(note.text)
        left = x + note.xshift - (width if note.xanchor == "right" else 0)
        assert note.xshift <= 0 and (note.xanchor == "left" or note.xshift == 0)  # starts or ends at its line, or left
        boxes.append((left, left + width, note.yshift))
    return boxes


@pytest.fixture(scope="module", params=[40, 2000])
def drawn(request):
    return figures(request.param)


def test_every_figure_fits_a_laptop_window_with_its_title_legend_and_axes(drawn):
    for fig, _ in drawn:
        assert fig.layout.height <= MAX_HEIGHT <= 800
        assert fig.layout.legend.orientation == "h" and fig.layout.legend.yref == "container"  # below the plot
        assert all(len(line) * 15 * 0.6 <= ASSUMED_WIDTH for line in fig.layout.title.text.split("<br>"))
        # the title stands on the label rows and grows upwards: the page check found a two-line title anchored at its
        # top (yref "container") cut off at the figure's top in JupyterLab
        assert fig.layout.title.yref == "paper" and fig.layout.title.yanchor == "bottom"
        rows = max((row for _, _, row in label_boxes(fig, 1000)), default=-LABEL_ROW_PX)
        assert fig.layout.title.pad.b >= rows + LABEL_ROW_PX
        lines = len(fig.layout.title.text.split("<br>")) if fig.layout.title.text else 0
        assert fig.layout.margin.t >= fig.layout.title.pad.b + 20 * lines


def test_no_action_label_overlaps_another_or_leaves_the_figure(drawn):
    for fig, plot_px in drawn:
        boxes = label_boxes(fig, plot_px)
        assert boxes, fig.layout.title.text
        for i, (a, b, row) in enumerate(boxes):
            assert 0 <= a and b <= plot_px + 1, (a, b, plot_px)
            title_px = 22 * len(fig.layout.title.text.split("<br>"))
            assert row + LABEL_ROW_PX <= fig.layout.margin.t - title_px
            assert all(b <= c or d <= a for c, d, other in boxes[i + 1:] if other == row), (a, b, boxes)


def test_legend_entries_are_unique_and_each_line_kind_has_one(drawn):
    for fig, _ in drawn:
        names = [t.name for t in fig.data if t.showlegend is not False]
        assert len(names) == len(set(names)), names
        entries = {(t.line.color, t.line.dash) for t in fig.data if (t.name or "").endswith("(lab)")}
        assert {(s.line.color, s.line.dash) for s in fig.layout.shapes} == entries


def test_the_same_event_is_labelled_once():
    h = H().write("p", "p-1", 0).add("fenced", "instance-1").add("fenced", "instance-1")
    assert [a.text for a in timeline_figure(h.events).layout.annotations] == ["fenced instance-1"]


def test_share_lanes_are_the_records_drawn_and_delivery_counts_sit_beside_their_markers():
    events = S().written(3).delivered("c", 1).acked("c", 1, "RELEASE").delivered("c", 1, count=2).spso(2).events
    fig = share_timeline_figure(events, SHARE)
    low, high = sorted(fig.layout.yaxis.range)
    assert [o for o in range(-5, 40) if low < o < high] == [1]  # the record delivered; none for the SPSO's line
    counts = next(t for t in fig.data if t.mode == "text")
    assert list(counts.text) == ["\u2003×2"] and counts.textposition == "top right"


def test_a_time_axis_shared_between_figures_is_the_one_the_labels_are_laid_out_on():
    h = lab_actions(H().write("p", "p-1", 0))
    fig = timeline_figure(h.events, end_s=100.0)
    assert list(fig.layout.xaxis.range) == [0, 100.0]
    boxes = label_boxes(fig, ASSUMED_WIDTH - 7 * len("p-1 by p @0") - 60)
    assert len({row for *_, row in boxes}) == len(boxes)  # all at x ≈ 0 on a 100 s axis: one row each


#: px: the width of JupyterLab's notebook column at 1280x800 (file browser open), and of the book's column.
COLUMN_PX = 848


def text_px(text, size):
    """A generous width of ``text`` in a font ``size`` px (a character at most 0.6 of the size)."""
    return 0.6 * size * len(text)


def test_spark_subplot_and_axis_titles_fit_over_their_panels_without_overlapping():
    """Issue 48: the right panel's title was wider than the room right of its centre, cut off at the figure's edge."""
    for figure, width in ((None, ASSUMED_WIDTH), (go.FigureWidget(), LIVE_WIDTH)):
        fig = spark_timeline_figure(batches(12), IN, OUT, "t", figure=figure)
        assert fig.layout.width == (LIVE_WIDTH if figure else None)  # a static figure takes the column's width
        plot = width - 80 - fig.layout.margin.r  # plotly's left margin, 80 px
        spans = []
        for axis, note in (("xaxis", fig.layout.annotations[0]), ("xaxis2", fig.layout.annotations[1])):
            low, high = fig.layout[axis].domain
            assert note.xref == "paper" and note.x == pytest.approx((low + high) / 2)  # a subplot title over its panel
            centre = 80 + note.x * plot
            for text, size in ((note.text, note.font.size), (fig.layout[axis].title.text, 12)):  # 12: plotly's font
                assert 0 <= centre - text_px(text, size) / 2 and centre + text_px(text, size) / 2 <= width, text
            half = text_px(note.text, note.font.size) / 2
            spans.append((centre - half, centre + half))
        assert spans[0][1] <= spans[1][0], spans


def test_a_live_figure_redrawn_is_the_figure_of_the_last_history_alone():
    """Issue 48: a FigureWidget redrawn by merging kept the previous frames' annotations (a crash label turned into a
    copy of a subplot title, drawn over it), and was drawn 700 px wide, cut at the right."""
    events = batches(12)
    live = go.FigureWidget()
    for k in (0, 3, len(events) // 2, len(events) // 2 + 2, len(events) - 30, len(events)):
        spark_timeline_figure(events[:k], IN, OUT, "sink B, live", figure=live)
    once = spark_timeline_figure(events, IN, OUT, "sink B, live", figure=go.FigureWidget())
    plain = lambda f: {**f.to_plotly_json(), "data": [{k: v for k, v in t.items() if k != "uid"}  # noqa: E731
                                                      for t in f.to_plotly_json()["data"]]}
    assert plain(live) == plain(once)
    assert live.layout.width == LIVE_WIDTH <= COLUMN_PX


def test_a_share_figure_s_time_axis_covers_what_it_draws_not_the_wait_for_the_consumers():
    """Issue 65: the records sent, then 8 s of consumers starting before anything is drawn; the axis began at 0."""
    events = S().add("start", "c", topic=None).written(4).later(8000).delivered("c", 0).later(500).acked("c", 0).events
    fig = share_timeline_figure(events, SHARE)
    drawn = [x for t in fig.data for x in (t.x or ()) if x is not None]
    low, high = fig.layout.xaxis.range
    assert min(drawn) > 8 and low > 0.9 * min(drawn) and high < 1.1 * max(drawn), (low, high, min(drawn), max(drawn))


def test_a_share_figure_leaves_out_what_an_earlier_run_of_the_same_consumer_names_did():
    """Issue 65: a re-run playground's figure drew the last run's pause and resume of player-1 (same name, another
    topic) and an axis from then: 0-107 s for a run of 30 s."""
    h = S().add("pause", "c", topic=None).add("resume", "c", topic=None).later(100_000)
    events = h.written(2).later(1000).delivered("c", 0).add("crash", "c", topic=None).later(1000).delivered("d", 0,
                                                                                                           count=2).events
    fig = share_timeline_figure(events, SHARE)
    assert [a.text for a in fig.layout.annotations] == ["crash c"]
    assert fig.layout.xaxis.range[1] - fig.layout.xaxis.range[0] < 5, fig.layout.xaxis.range
