import time

import plotly.graph_objects as go

from labkit.core.history import Event, History
from labkit.crashlab.figure_truth import contradictions
from labkit.crashlab.timeline import LiveTimeline, segments, timeline_figure
from tests.histories import OUT, H


def story():
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, "committed")
    h.add("txn_begin", "p", txn=2).write("p", "p-2", 2, txn=2).add("pause", "p").add("resume", "p")
    h.txn("p", 2, "aborted").write("q", "q-1", 4)
    h.add("consume", "c", topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_committed")
    h.add("crash", "c")
    return h.events


def test_each_record_gets_its_states_in_order():
    segs = {(vid, state) for vid, state, *_ in segments(story())}
    assert segs == {("p-1 by p @0", "uncommitted"), ("p-1 by p @0", "committed"), ("p-2 by p @2", "uncommitted"),
                    ("p-2 by p @2", "aborted"), ("q-1 by q @4", "written")}
    for vid, state, a, b in segments(story()):
        assert 0 <= a <= b


def test_open_transaction_stays_uncommitted_to_the_end():
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).add("crash", "p")
    ((vid, state, a, b),) = segments(h.events)
    last = (h.events[-1].mono_ns - h.events[0].mono_ns) / 1e9
    assert state == "uncommitted" and b == last + 0.3  # drawn a little past the last event


def test_figure_has_a_trace_per_state_markers_and_action_lines():
    fig = timeline_figure(story(), title="t")
    names = {t.name for t in fig.data}
    assert {"uncommitted", "committed", "aborted", "written", "consumed by c"} <= names
    assert all(isinstance(t, go.Scattergl) for t in fig.data)
    assert sorted(a.text for a in fig.layout.annotations) == ["crash c", "pause → resume p"]  # p's: 1 ns apart
    assert list(fig.layout.yaxis.categoryarray) == ["q-1 by q @4", "p-2 by p @2", "p-1 by p @0"]
    consumed = next(t for t in fig.data if t.name == "consumed by c")
    assert list(consumed.y) == ["p-1 by p @0"]  # on the row of the write it read


def test_100k_events_render_as_a_few_webgl_traces():
    events = [Event("send", "p", mono_ns=i * 1000, value_id=f"p-{i}") for i in range(50_000)]
    events += [Event("ack", "p", mono_ns=50_000_000 + i, value_id=f"p-{i}", offset=i) for i in range(50_000)]
    fig = timeline_figure(events)
    assert len(fig.data) == 1 and len(fig.data[0].x) == 150_000
    assert isinstance(fig.data[0], go.Scattergl)
    assert len(fig.layout.yaxis.categoryarray) == 50_000


def test_live_timeline_redraws_from_the_history(tmp_path):
    history = History(tmp_path / "h.jsonl")
    live = LiveTimeline(history, interval_s=0.05)
    widget = live.start()
    history.append("send", "p", value_id="p-1", topic=OUT)
    history.append("ack", "p", value_id="p-1", topic=OUT, offset=0)
    time.sleep(0.3)
    live.stop()
    assert isinstance(widget, go.FigureWidget) and [t.name for t in widget.data] == ["written"]


def test_each_write_of_a_record_has_its_own_row():
    # a restart's replay: the crashed instance's write (its transaction aborted by the new instance's
    # init_transactions) must not be hidden by the committed rewrite, nor drawn uncommitted
    h = H().add("txn_begin", "p", txn=3).write("p", "s-3>out", 2, txn=3).add("crash", "p").add("start", "p")
    h.add("txn_end", "p", txn=3, outcome="aborted", step="init_transactions", definite=True)
    h.add("txn_begin", "p", txn=4).write("p", "s-3>out", 3, txn=4).txn("p", 4, "committed")
    h.write("q", "q-1", 0).write("q", "q-1", 1)  # an at-least-once duplicate: two written rows
    for _ in range(2):  # two failed sends: no offset, so a number tells them apart
        h.add("send", "r", topic=OUT, partition=0, value_id="r-1").add("send_failed", "r", value_id="r-1")
    segs = [(row, state) for row, state, *_ in segments(h.events)]
    assert segs == [("s-3>out by p @2", "uncommitted"), ("s-3>out by p @2", "aborted"),
                    ("s-3>out by p @3", "uncommitted"), ("s-3>out by p @3", "committed"),
                    ("q-1 by q @0", "written"), ("q-1 by q @1 — duplicate", "written"),
                    ("r-1 by r", "send failed"), ("r-1 by r #2", "send failed")]
    fig = timeline_figure(h.events)
    assert list(fig.layout.yaxis.categoryarray) == ["r-1 by r #2", "r-1 by r", "q-1 by q @1 — duplicate", "q-1 by q @0",
                                                    "s-3>out by p @3", "s-3>out by p @2"]
    duplicate = next(t for t in fig.data if t.name == "duplicate")
    assert list(duplicate.y) == ["q-1 by q @1 — duplicate"]
    assert [a.text for a in fig.layout.annotations] == ["crash → restart p"]  # its next start is a restart
    committed = next(t for t in fig.data if t.name == "committed")
    assert "s-3>out by p @3: committed" in committed.hovertext


def test_a_fenced_zombies_write_is_aborted_not_uncommitted_forever():
    h = H().add("txn_begin", "z", txn=2).add("send", "z", topic=OUT, partition=0, value_id="s-2>out", txn=2)
    h.add("fenced", "z", txn=2, error="_FENCED").add("crash", "other")
    assert [(row, state) for row, state, *_ in segments(h.events)] == [("s-2>out by z", "uncommitted"),
                                                                        ("s-2>out by z", "aborted")]


def zombie_and_successor() -> H:
    """Zombie z sends s-2>out in its transaction 2 and is fenced before any ack; instance n writes s-2>out at
    offset 2 and commits."""
    h = H().add("txn_begin", "z", txn=2).add("send", "z", topic=OUT, partition=0, value_id="s-2>out", txn=2)
    h.add("txn_begin", "n", txn=1).write("n", "s-2>out", 2, txn=1).add("fenced", "z", txn=2, error="_FENCED")
    return h.txn("n", 1, "committed")


def test_a_write_the_log_does_not_hold_is_drawn_not_in_the_log():
    """Issue 37, item 8: the zombie's B was drawn aborted where the broker had refused it; the log read (the
    read_uncommitted final read) holds one copy, the successor's at offset 2: the zombie's write is not in the log."""
    h = zombie_and_successor().finals([(2, "s-2>out")])
    drawn = {row: [state for r, state, *_ in segments(h.events) if r == row] for row, *_ in segments(h.events)}
    assert drawn == {"s-2>out by z": ["uncommitted", "not in the log"], "s-2>out by n @2": ["uncommitted", "committed"]}
    fig = timeline_figure(h.events)
    assert contradictions(fig, h.events, OUT) == []
    h.t += 10**10  # the lab's final reads, 10 s later, do not stretch the time axis
    end = lambda events: max(b for *_, b in segments(events))  # noqa: E731
    assert end(h.finals([(2, "s-2>out")]).events) == end(zombie_and_successor().events)


def test_an_unacknowledged_write_the_log_holds_keeps_its_transactions_state():
    """The zombie's copy is in the log at offset 1 (written, never acknowledged: a crashed or fenced producer's
    buffered ack), aborted; without the log read the history cannot tell, and the transaction's state stands."""
    logged = zombie_and_successor().finals([(2, "s-2>out")], uncommitted=[(1, "s-2>out"), (2, "s-2>out")])
    unread = zombie_and_successor()
    for h in (logged, unread):
        assert [state for row, state, *_ in segments(h.events) if row == "s-2>out by z"] == ["uncommitted", "aborted"]


def test_a_committed_write_a_truncated_log_lost_is_drawn_lost_from_the_log_read_and_agrees_with_the_broker():
    """Notebook 09, part 3: p-2 committed at offset 2, then an unclean leader election truncated the log to offset 2
    and a later write took offset 2: the log read holds p-1 and q-1 only. p-2's row ends "— lost", committed up to the
    run's last event and "not in the log" after it; without the log read it stays committed (the history alone
    cannot tell)."""
    def run():
        h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, "committed")
        return h.add("txn_begin", "p", txn=2).write("p", "p-2", 2, txn=2).txn("p", 2, "committed").write("q", "q-1", 2)
    read = run().finals([(0, "p-1"), (2, "q-1")])
    drawn = {row: [state for r, state, *_ in segments(read.events) if r == row] for row, *_ in segments(read.events)}
    assert drawn["p-2 by p @2 — lost"] == ["uncommitted", "committed", "not in the log"]
    assert drawn["p-1 by p @0"] == ["uncommitted", "committed"] and drawn["q-1 by q @2"] == ["written"]
    last = max(e.mono_ns for e in read.events if e.kind != "final_read")
    lost_from = next(a for r, state, a, _ in segments(read.events) if state == "not in the log")
    assert lost_from == (last - read.events[0].mono_ns) / 1e9
    assert contradictions(timeline_figure(read.events), read.events, OUT) == []
    assert [state for r, state, *_ in segments(run().events) if r.startswith("p-2")] == ["uncommitted", "committed"]


def test_figure_truth_catches_each_contradiction_and_passes_a_true_figure():
    h = H().add("txn_begin", "p", txn=1).write("p", "p-1", 0, txn=1).txn("p", 1, "committed")
    h.add("txn_begin", "p", txn=2).write("p", "p-2", 2, txn=2).txn("p", 2, "aborted")
    h.finals([(0, "p-1")], uncommitted=[(0, "p-1"), (2, "p-2")])
    assert contradictions(timeline_figure(h.events), h.events, OUT) == []
    no_commit = [e for e in h.events if not (e.kind == "txn_end" and e.txn == 1)]  # p-1 would be drawn uncommitted
    assert contradictions(timeline_figure(no_commit), h.events, OUT) == [
        "'p-1 by p @0' drawn uncommitted, but read_committed returns p-1 at offset 0"]
    lying = H().finals([(0, "p-1"), (2, "p-2")]).events  # the broker returns offset 2, drawn aborted
    assert contradictions(timeline_figure(h.events), h.events + lying, OUT) == [
        "'p-2 by p @2' drawn aborted, but read_committed returns p-2 at offset 2"]
    other_topic = H().write("s", "s-1", 7, topic="in").events  # a processor's input: not the output's to answer for
    assert contradictions(timeline_figure(h.events + other_topic), h.events + other_topic, OUT) == []
    unseen = H().finals([(0, "p-1"), (5, "x")]).events
    assert contradictions(timeline_figure(h.events), h.events + unseen, OUT) == [
        "x at offset 5 is returned by read_committed but drawn nowhere"]


def test_one_participants_actions_close_in_time_share_a_label_and_others_take_rows_of_their_own():
    # notebook 05: pause, crash, restart and init_transactions within a second of a 50 s run; notebook 08: another
    # participant stalls at the same moment; notebook 02: a zombie's two fenced events (one per failed client call)
    h = H().write("p", "p-1", 0).add("pause", "a").add("crash", "a").add("start", "a").add("txn_init", "a")
    h.add("stalled", "b").add("fenced", "z").add("fenced", "z")
    h.t += 50 * 10**9  # 50 s later (ticks are ns): the labels above are close on its axis
    h.add("crash", "b")
    notes = timeline_figure(h.events).layout.annotations
    shifts = {n.text: n.yshift for n in notes}
    assert sorted(shifts) == ["crash b", "fenced z", "pause → crash → restart → txn_init a", "stalled b"]
    assert len({shifts[t] for t in ("pause → crash → restart → txn_init a", "stalled b", "fenced z")}) == 3, shifts
    assert shifts["crash b"] == min(shifts.values())  # far from the others: back on the first row
    assert next(n for n in notes if n.text == "crash b").xanchor == "right"  # at the axis' end: ends at its line


def test_a_write_the_leader_had_not_appended_by_a_log_end_reading_is_drawn_not_in_the_log_until_that_reading():
    """Issue 65: notebook 09's writes the leader refused (NOT_ENOUGH_REPLICAS, retried by the client) were drawn
    uncommitted for the 12 s the leader did not have them. The lab's readings of the log end offset say when it did."""
    h = H().add("log_end", "broker-1", topic=OUT, partition=0, offset=3).add("txn_begin", "p", txn=1)
    h.add("send", "p", topic=OUT, partition=0, value_id="p-4", txn=1)
    for _ in range(3):
        h.t += 10**9
        h.add("log_end", "broker-1", topic=OUT, partition=0, offset=3)  # the leader still ends at 3: not appended
    h.t += 10**9
    h.add("log_end", "broker-1", topic=OUT, partition=0, offset=5)  # appended (4, and its transaction's marker later)
    h.add("ack", "p", topic=OUT, partition=0, offset=3, value_id="p-4", txn=1, definite=True).txn("p", 1, "committed")
    sec = lambda ns: (ns - h.events[0].mono_ns) / 1e9  # noqa: E731
    last_absent = sec([e.mono_ns for e in h.events if e.kind == "log_end"][-2])
    states = [(state, round(a, 6), round(b, 6)) for _, state, a, b in segments(h.events)]
    assert [s for s, *_ in states] == ["not in the log", "uncommitted", "committed"], states
    assert states[0][2] == states[1][1] == round(last_absent, 6) and states[1][2] < states[2][2]
    # a reading of another partition, or one that had reached the write, changes nothing
    plain = H().add("txn_begin", "p", txn=1).add("send", "p", topic=OUT, partition=0, value_id="p-1", txn=1)
    plain.add("log_end", "broker-1", topic=OUT, partition=1, offset=0).add("log_end", "broker-1", topic=OUT,
                                                                           partition=0, offset=1)
    plain.add("ack", "p", topic=OUT, partition=0, offset=0, value_id="p-1", txn=1, definite=True)
    assert [state for _, state, *_ in segments(plain.txn("p", 1, "committed").events)] == ["uncommitted", "committed"]


def test_figure_truth_catches_a_write_drawn_in_the_log_before_the_log_end_readings_reached_it():
    h = H().add("txn_begin", "p", txn=1).add("send", "p", topic=OUT, partition=0, value_id="p-1", txn=1)
    h.t += 10**9
    h.add("log_end", "broker-1", topic=OUT, partition=0, offset=0)  # not appended yet
    h.t += 10**9
    h.add("ack", "p", topic=OUT, partition=0, offset=0, value_id="p-1", txn=1, definite=True).txn("p", 1, "committed")
    h.finals([(0, "p-1")])
    assert contradictions(timeline_figure(h.events), h.events, OUT) == []
    unread = [e for e in h.events if e.kind != "log_end"]  # drawn as before: uncommitted from the send
    (wrong,) = contradictions(timeline_figure(unread), h.events, OUT)
    assert wrong == "'p-1 by p @0' drawn uncommitted at 1.00 s, when the log ended at offset 0", wrong
