"""Notebook 06's two claims on the real broker, on both clients (issue 36, items 1 and 8): close() in implicit mode,
and the broker's answer to a late ACCEPT (labkit/lessons/share_close.py)."""

from labkit.crashlab.experiment import Experiment
from labkit.lessons.share_close import ack_tap, close_after_poll, close_summary, late_accept, late_accept_summary


def test_close_right_after_a_poll_accepts_nothing_on_either_client(bootstrap, tmp_path):
    """Implicit mode, close() right after the one poll: neither client accepts that poll's records; the broker releases
    them at the session's close (AVAILABLE, delivery count 1) and a second consumer gets them again (count 2)."""
    exp = Experiment("close", bootstrap, folder=tmp_path)
    summary = close_summary(exp, close_after_poll(exp, records=4))
    for client in ("librdkafka", "java"):
        row = summary.loc[client]
        assert row["polled"] == [0, 1, 2, 3] and row["acknowledge calls"] == 0, summary
        assert row["after close"] == ["AVAILABLE ×1"] * 4, summary
        assert row["second consumer got"] == [2] * 4 and row["final"] == ["ACKNOWLEDGED ×2"] * 4, summary


def test_a_late_accept_past_the_start_offset_is_answered_without_error_by_the_broker(broker, tmp_path):
    """A resumed after B's ACCEPT was persisted: the broker's ShareAcknowledge response to A's late ACCEPT has no
    error (read on the wire), each client reports success, and the records stay B's (ACKNOWLEDGED, count 2)."""
    exp = Experiment("late", broker.bootstrap_servers, folder=tmp_path)
    tap = ack_tap(broker)
    try:
        summary = late_accept_summary(exp, late_accept(exp, tap, records=2), tap)
    finally:
        tap.close()
    assert tap.tap_errors == []  # the tap read every frame: the answers below are all there were
    for client in ("librdkafka", "java"):
        row = summary.loc[client]
        assert row["A's deliveries"] == [1, 1] and row["B's deliveries"] == [2, 2], summary
        assert row["A reported"] == ["ACCEPT: ok"] * 2, summary
        assert row["broker answered A"] == ["ACCEPT 0-1: NONE"] and row["broker answered B"] == ["ACCEPT 0-1: NONE"]
        assert row["final"] == ["ACKNOWLEDGED ×2"] * 2, summary
