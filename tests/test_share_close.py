"""Notebook 06's two claims on the real broker, on both clients (issue 36, items 1 and 8): close() in implicit mode,
and the broker's answer to a late ACCEPT (labkit/lessons/share_close.py)."""

import struct

from labkit.crashlab.experiment import Experiment
from labkit.kafka.wire import Writer
from labkit.lessons.share_close import SHARE_ACKNOWLEDGE, AckTap, ack_tap, close_after_poll, close_summary, \
    late_accept, late_accept_summary


def _request(version: int, correlation_id: int, client_id: str, first: int, last: int, types: list[int]) -> bytes:
    w = Writer().pack(">h", SHARE_ACKNOWLEDGE).pack(">h", version).pack(">i", correlation_id)
    w.pack(">h", len(client_id)).parts.append(client_id.encode())
    w.no_tags().compact_string("group").compact_string("member").pack(">i", 3)
    if version >= 2:
        w.pack(">b", 0)
    w.uvarint(2).parts.append(bytes(16))  # one topic, its id
    w.uvarint(2).pack(">i", 0)  # one partition, index 0
    w.uvarint(2).pack(">q", first).pack(">q", last).uvarint(len(types) + 1)
    for t in types:
        w.pack(">b", t)
    return w.no_tags().no_tags().no_tags().no_tags().bytes()


def _response(version: int, correlation_id: int, top: int, partition: int) -> bytes:
    w = Writer().pack(">i", correlation_id).no_tags().pack(">i", 0).pack(">h", top).uvarint(0)
    if version >= 2:
        w.pack(">i", 5000)
    w.uvarint(2).parts.append(bytes(16))
    w.uvarint(2).pack(">i", 0).pack(">h", partition).uvarint(0).pack(">i", 1).pack(">i", 0).no_tags().no_tags()
    return w.no_tags().uvarint(1).no_tags().bytes()


def test_the_tap_reads_share_acknowledge_requests_and_their_answers_of_both_versions():
    tap = AckTap(0, 1)  # never connected: the frames are handed to it
    try:
        tap._request(7, _request(1, 11, "rdk", 0, 1, [1]))
        tap._request(7, _request(2, 12, "jvm", 4, 5, [1, 2]))
        tap._request(7, struct.pack(">hhi", 1, 12, 13) + b"junk")  # a Fetch: not recorded
        tap._response(7, _response(2, 12, 0, 121))  # INVALID_RECORD_STATE
        tap._response(7, _response(1, 11, 0, 0))
        tap._response(8, _response(1, 11, 0, 0))  # another connection's correlation id: unknown
    finally:
        tap.close()
    assert [(a["client_id"], a["group"], a["epoch"], a["acks"], a["error"], a["partitions"]) for a in tap.acks] == [
        ("jvm", "group", 3, [(0, 4, 5, ["ACCEPT", "RELEASE"])], None, {0: "INVALID_RECORD_STATE"}),
        ("rdk", "group", 3, [(0, 0, 1, ["ACCEPT"])], None, {0: None})]
    assert tap.answers("rdk") == [tap.acks[1]]


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
    for client in ("librdkafka", "java"):
        row = summary.loc[client]
        assert row["A's deliveries"] == [1, 1] and row["B's deliveries"] == [2, 2], summary
        assert row["A reported"] == ["ACCEPT: ok"] * 2, summary
        assert row["broker answered A"] == ["ACCEPT 0-1: NONE"] and row["broker answered B"] == ["ACCEPT 0-1: NONE"]
        assert row["final"] == ["ACKNOWLEDGED ×2"] * 2, summary
