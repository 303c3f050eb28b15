"""The share-group timeline on hand-written histories: it draws what the history says, and tells broker from client."""

from labkit.share.timeline import acquisitions, broker_segments, share_timeline_figure
from tests.histories import SHARE, S


def history():
    h = S().written(3).delivered("c1", 0).delivered("c1", 1).acked("c1", 0).acked("c1", 1, "RELEASE")
    h.state(0, 0, "ACKNOWLEDGED").state(1, 1, "AVAILABLE").later(1000).delivered("c2", 1, count=2)
    h.add("pause", "c2").add("resume", "c2").delivered("c2", 2).acked("c2", 1)
    h.acked("c2", 2, error="INVALID_RECORD_STATE")
    return h.state(1, 2, "ACKNOWLEDGED", 2).spso(3).events


def segments_of(fig, name):
    """(offset, start, end) of each segment in the trace called ``name``."""
    trace = next(t for t in fig.data if t.name == name)
    xs, ys = list(trace.x), list(trace.y)
    return {(ys[i], xs[i], xs[i + 1]) for i in range(0, len(xs), 3)}


def test_broker_states_change_where_the_persisted_records_say():
    events = history()
    t0, t_end = events[0].mono_ns, events[-1].mono_ns
    segs = broker_segments(events, t0, t_end)
    states = {(offset, state) for offset, state, _, _ in segs}
    assert states == {(0, "ACKNOWLEDGED"), (1, "AVAILABLE"), (1, "ACKNOWLEDGED"), (2, "ACKNOWLEDGED")}
    available = next(s for s in segs if s[:2] == (1, "AVAILABLE"))
    acknowledged = next(s for s in segs if s[:2] == (1, "ACKNOWLEDGED"))
    assert available[3] == acknowledged[2]  # one state ends where the next begins


def test_acquisitions_name_the_consumer_and_the_delivery():
    events = history()
    held = acquisitions(events, events[0].mono_ns, events[-1].mono_ns)
    assert sorted((o, who, n) for o, who, n, _, _ in held) == [(0, "c1", 1), (1, "c1", 1), (1, "c2", 2), (2, "c2", 1)]
    assert all(a < b for *_, a, b in held)


def test_the_figure_draws_every_persisted_state_where_and_when_it_was_written():
    events = history()
    fig = share_timeline_figure(events, SHARE)
    t0 = events[0].mono_ns
    for e in events:
        if e.kind == "share_state":
            starts = {(o, a) for o, a, _ in segments_of(fig, f"{e.state} (broker)")}
            for offset in range(e.offset, e.last_offset + 1):
                assert (offset, (e.mono_ns - t0) / 1e9) in starts, (e, starts)
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert {"ACKNOWLEDGED (broker)", "AVAILABLE (broker)", "ACQUIRED by c1 (client)", "ACQUIRED by c2 (client)",
            "SPSO (broker)", "SPEO (client view)", "ACCEPT refused (client)"} <= set(names)
    assert all(n.endswith(("(broker)", "(client)", "(client view)", "(sink)", "(lab)")) for n in names)
    assert {"pause (lab)", "resume (lab)"} <= set(names)  # each kind of line the figure draws has its entry
    refused = next(t for t in fig.data if t.name == "ACCEPT refused (client)")
    assert list(refused.y) == [2] and "INVALID_RECORD_STATE" in refused.hovertext[0]
    assert [a.text for a in fig.layout.annotations] == ["pause → resume c2"]


def test_modelled_histories_say_so_and_an_empty_one_draws_nothing():
    assert share_timeline_figure(history(), SHARE, "x", modelled=True).layout.title.text == "MODELLED: x"
    assert share_timeline_figure([], SHARE).data == ()


def test_the_live_timeline_draws_share_groups_too():
    from functools import partial
    from types import SimpleNamespace

    from labkit.crashlab.timeline import LiveTimeline

    live = LiveTimeline(SimpleNamespace(events=history), title="live", draw=partial(share_timeline_figure, topic=SHARE))
    live.refresh()
    assert live.widget.layout.title.text == "live" and "ACKNOWLEDGED (broker)" in {t.name for t in live.widget.data}


def test_a_duplicate_effect_and_the_restart_are_drawn():
    h = S().written(1).delivered("w", 0).effect("w", 0).add("crash", "w").add("start", "w").later(5000)
    h.delivered("w", 0, 2).effect("w", 0).acked("w", 0).state(0, 0, "ACKNOWLEDGED", 2)
    fig = share_timeline_figure(h.events, SHARE)
    again = next(t for t in fig.data if t.name == "effect written again: duplicate (sink)")
    assert list(again.y) == [0] and list(next(t for t in fig.data if t.name == "effect written (sink)").y) == [0]
    assert [a.text for a in fig.layout.annotations] == ["crash → restart w"]  # 1 ns apart: one label
    assert len(fig.layout.shapes) == 2


def test_a_renewed_record_stays_acquired_by_its_consumer_and_the_renewals_are_drawn():
    # Kafka's Java client (KIP-1222): RENEW twice, then ACCEPT; one delivery throughout
    h = S().written(1).delivered("j", 0).later(2000).acked("j", 0, "RENEW").later(2000).acked("j", 0, "RENEW")
    h.later(2000).acked("j", 0).state(0, 0, "ACKNOWLEDGED")
    events = h.events
    held = acquisitions(events, events[0].mono_ns, events[-1].mono_ns)
    accepted = next(e for e in events if e.kind == "ack_committed" and e.ack_type == "ACCEPT")
    assert [(o, who, n, b) for o, who, n, _, b in held] == [(0, "j", 1, (accepted.mono_ns - events[0].mono_ns) / 1e9)]
    fig = share_timeline_figure(events, SHARE)
    renewals = next(t for t in fig.data if t.name == "RENEW committed (client)")
    assert list(renewals.y) == [0, 0] and renewals.marker.symbol == "hourglass"
    assert next(t for t in fig.data if t.name == "ACCEPT committed (client)").marker.symbol == "circle"
