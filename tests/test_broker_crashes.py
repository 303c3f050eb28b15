"""Notebook 08's helpers on hand-written histories (the notebook runs the broker restarts themselves, on a broker of
its own): when a processor holds a transaction open, and one timeline per client on one time axis."""

from types import SimpleNamespace

from labkit.lessons.broker_crashes import _holds_transaction, client_timelines
from tests.histories import H


def test_a_processor_holds_a_transaction_once_one_committed_and_the_next_has_an_output():
    h = H().add("start", "p").write("p", "s-1>out", 0, txn=1)
    assert not _holds_transaction(h.events, "p")  # its first transaction: nothing committed before the kill yet
    h.txn("p", 1, "committed")
    assert not _holds_transaction(h.events, "p")  # between transactions
    h.write("p", "s-2>out", 2, txn=2)
    assert _holds_transaction(h.events, "p") and not _holds_transaction(h.events, "q")


def test_each_client_has_its_own_timeline_on_one_time_axis():
    h = H().write("source-a", "a-1", 0, topic="in-a").write("source-b", "b-1", 0, topic="in-b")
    h.write("proc-a", "a-1>out", 0, txn=1).add("crash", "broker").add("start", "broker")
    h.write("proc-b", "b-1>out", 0, txn=1).txn("proc-b", 1, "committed")
    for _ in range(40):
        h.add("consume", "proc-b", topic="in-b", partition=0, offset=0, value_id="b-1")  # proc-b's events go on: its figure alone would end later
    runs = {c: {"source": SimpleNamespace(name=f"source-{c}"), "processor": SimpleNamespace(name=f"proc-{c}")}
            for c in "ab"}
    figures = client_timelines(SimpleNamespace(history=SimpleNamespace(events=lambda: h.events)), runs,
                               {"a": "A", "b": "B"})
    rows = {c: {y for t in f.data for y in t.y if y is not None} for c, f in figures.items()}
    assert rows == {"a": {"a-1 by source-a @0", "a-1>out by proc-a @0"}, "b": {"b-1 by source-b @0", "b-1>out by proc-b @0"}}
    assert figures["a"].layout.xaxis.range == figures["b"].layout.xaxis.range and figures["a"].layout.xaxis.range[0] == 0
    assert [a.text for a in figures["a"].layout.annotations] == ["crash broker", "broker back"]
    assert figures["a"].layout.title.text == "A"
