"""Kafka's wire codec: varints and compact strings written and read back."""

from labkit.kafka.wire import Reader, Writer


def test_unsigned_varints_and_compact_strings_round_trip():
    for n in (0, 1, 127, 128, 300, 2 ** 21, 2 ** 31):
        assert Reader(Writer().uvarint(n).bytes()).uvarint() == n
    r = Reader(Writer().compact_string("groupé").compact_array([1, 2], lambda w, x: w.pack(">i", x)).bytes())
    assert r.compact_string() == "groupé" and r.compact_array(Reader.int32) == [1, 2]
