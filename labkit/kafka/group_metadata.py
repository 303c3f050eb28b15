"""librdkafka's serialised consumer group metadata (``consumer.consumer_group_metadata()`` in confluent-kafka): the
member epoch every offset commit made with it carries, read and replaced (a lagging client, as notebook 05 sends), and
the TxnOffsetCommit version such a commit goes out in (:data:`LIBRDKAFKA_TXN_VERSION`)."""

from __future__ import annotations

import struct

from labkit.core.errors import LabkitError

_CGMD_MAGIC = b"CGMDv2:"
#: The TxnOffsetCommit version the lab's models take for librdkafka's commits (:mod:`labkit.models.kip1287`). Any
#: below 6 answers alike there: the broker sends a stale member epoch as ILLEGAL_GENERATION below 6 (KIP-1319), which
#: is what librdkafka gets, and KIP-1287's draft validates from 6 on. librdkafka itself sends at most version 3
#: (``rd_kafka_txn_send_TxnOffsetCommitRequest`` in its ``src/rdkafka_txnmgr.c`` asks for versions 0 to 3).
LIBRDKAFKA_TXN_VERSION = 5


class GroupMetadataFormatError(LabkitError):
    """Bytes that are not librdkafka's serialised consumer group metadata (``CGMDv2:``)."""


def metadata_epoch(metadata: bytes) -> int:
    """The member epoch (consumer protocol) or generation (classic) in ``consumer.consumer_group_metadata()``:
    the epoch every offset commit made with that metadata carries. confluent-kafka returns librdkafka's
    serialised form (``rd_kafka_consumer_group_metadata_write``): ``CGMDv2:``, then the epoch as a native
    int32, then the group id and the member id, NUL-terminated (read from librdkafka 2.16's output).

    Raises:
        GroupMetadataFormatError: not that format (another librdkafka?).
    """
    if not metadata.startswith(_CGMD_MAGIC) or len(metadata) < len(_CGMD_MAGIC) + 4:
        raise GroupMetadataFormatError(f"not librdkafka's CGMDv2 group metadata: {metadata[:12]!r}...")
    return struct.unpack_from("=i", metadata, len(_CGMD_MAGIC))[0]


def with_epoch(metadata: bytes, epoch: int) -> bytes:
    """``metadata`` (see :func:`metadata_epoch`) carrying ``epoch`` instead: a commit made with it reaches the
    group coordinator as if the member's client were at that epoch (a lagging client, say).

    Raises:
        GroupMetadataFormatError: see :func:`metadata_epoch`.
    """
    metadata_epoch(metadata)
    start = len(_CGMD_MAGIC)
    return metadata[:start] + struct.pack("=i", epoch) + metadata[start + 4:]
