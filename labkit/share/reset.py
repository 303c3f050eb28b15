"""A share group's start offset moved by an administrator: AlterShareGroupOffsets (KIP-932, API key 91, v0), the
request behind ``kafka-share-groups.sh --reset-offsets`` (``ShareGroupCommand``) and the Java client's
``Admin.alterShareGroupOffsets``; confluent-kafka 2.16 has no such call, so it is sent here over a plain socket, like
:mod:`labkit.kafka.wire`'s two read-only requests (same framing, same coordinator lookup).

What the broker does with it (apache/kafka, the same in 4.3.2 and 4.4.0): ``GroupMetadataManager
.alterShareGroupOffsets`` refuses a group that still has members (``throwIfShareGroupIsNotEmpty``: NON_EMPTY_GROUP),
then ``GroupCoordinatorService`` has the share coordinator initialize each named share partition's state at the given
start offset (``InitializeShareGroupState``; ``ShareCoordinatorShard.initializeState`` writes a fresh ShareSnapshot to
``__share_group_state`` holding the new SPSO and no per-record state). One start offset per partition: every record
from it on is AVAILABLE again with no delivery counted, whatever it was (ACKNOWLEDGED, ARCHIVED, how often delivered);
seen on the lab broker in ``tests/test_share_groups.py``.
"""

from __future__ import annotations

from labkit.kafka.wire import Reader, Writer, call, error_name, find_group_coordinator

API_KEY, VERSION = 91, 0  # AlterShareGroupOffsetsRequest.json: "validVersions": "0", flexible


def alter_share_group_offsets(bootstrap: str, group_id: str, offsets: dict[str, dict[int, int]],
                              timeout_s: float = 5.0) -> dict:
    """Set the share-partition start offset (SPSO) of ``group_id`` on each partition of ``offsets``
    (``{topic: {partition: start offset}}``, offsets in records) with one AlterShareGroupOffsets request.

    Returns:
        ``{"error", "message", "partitions"}``: ``error``, the group-level Kafka error name (``"NON_EMPTY_GROUP"``
        while the group has members) or ``None``; ``message``, the broker's text; ``partitions``,
        ``{(topic, partition): error name or None}`` (e.g. ``"UNKNOWN_TOPIC_OR_PART"``; empty when the whole request
        was refused).
    Raises:
        labkit.core.errors.BrokerUnreachableError, labkit.kafka.wire.WireError: no group coordinator (see
            :func:`~labkit.kafka.wire.find_group_coordinator`).
    """
    address = find_group_coordinator(bootstrap, group_id, timeout_s)

    def partition(w: Writer, item: tuple[int, int]) -> None:
        w.pack(">i", item[0]).pack(">q", item[1]).no_tags()

    def topic(w: Writer, item: tuple[str, dict[int, int]]) -> None:
        w.compact_string(item[0]).compact_array(sorted(item[1].items()), partition).no_tags()

    body = Writer().compact_string(group_id).compact_array(sorted(offsets.items()), topic).no_tags().bytes()
    r = call(address, API_KEY, VERSION, body, timeout_s)
    r.int32()  # throttle
    code, message = r.int16(), r.compact_string()
    partitions: dict[tuple[str, int], str | None] = {}

    def topic_result(r: Reader) -> None:
        name = r.compact_string()
        r.uuid()

        def partition_result(r: Reader) -> None:
            index, error = r.int32(), error_name(r.int16())
            r.compact_string()
            r.tags()
            partitions[(name, index)] = error

        r.compact_array(partition_result)
        r.tags()

    r.compact_array(topic_result)
    return {"error": error_name(code), "message": message, "partitions": partitions}

