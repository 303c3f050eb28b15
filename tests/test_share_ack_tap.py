"""The ShareAcknowledge tap (labkit/share/ack_tap.py) on hand-made frames of both versions Kafka 4.4 has (the real
broker's frames are read in tests/test_share_close.py and tests/test_share_partition.py)."""

import struct

import pytest

from labkit.kafka.wire import Writer
from labkit.share.ack_tap import SHARE_ACKNOWLEDGE, AckTap


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
    tap = AckTap()
    tap.request(7, _request(1, 11, "rdk", 0, 1, [1]))
    tap.request(7, _request(2, 12, "jvm", 4, 5, [1, 2]))
    tap.request(7, struct.pack(">hhi", 1, 12, 13) + b"junk")  # a Fetch: not recorded
    tap.response(7, _response(2, 12, 0, 121))  # INVALID_RECORD_STATE
    tap.response(7, _response(1, 11, 0, 0))
    tap.response(8, _response(1, 11, 0, 0))  # another connection's correlation id: unknown
    assert [(a["client_id"], a["group"], a["epoch"], a["acks"], a["error"], a["partitions"]) for a in tap.acks] == [
        ("jvm", "group", 3, [(0, 4, 5, ["ACCEPT", "RELEASE"])], None, {0: "INVALID_RECORD_STATE"}),
        ("rdk", "group", 3, [(0, 0, 1, ["ACCEPT"])], None, {0: None})]
    assert tap.answers("rdk") == [tap.acks[1]]


def test_a_share_acknowledge_the_tap_cannot_read_raises_and_is_not_recorded():
    tap = AckTap()
    with pytest.raises(ValueError, match="API key 79 v3"):
        tap.request(1, _request(2, 21, "new", 0, 0, [1]).replace(struct.pack(">hh", 79, 2), struct.pack(">hh", 79, 3), 1))
    with pytest.raises(struct.error):
        tap.request(1, _request(1, 22, "cut", 0, 0, [1])[:-12])  # ends inside its acknowledgement batch
    tap.response(1, _response(1, 21, 0, 0))
    tap.response(1, _response(1, 22, 0, 0))
    assert tap.acks == []
