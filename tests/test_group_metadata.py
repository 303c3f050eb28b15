"""librdkafka's serialised consumer group metadata: its member epoch read and rewritten."""

import pytest

from labkit.kafka.group_metadata import GroupMetadataFormatError, metadata_epoch, with_epoch


def test_metadata_epoch_reads_and_rewrites_librdkafkas_group_metadata():
    metadata = b"CGMDv2:" + (7).to_bytes(4, "little") + b"g\x00m\x00\x01"
    assert metadata_epoch(metadata) == 7
    assert metadata_epoch(with_epoch(metadata, 6)) == 6 and with_epoch(metadata, 6)[11:] == metadata[11:]
    with pytest.raises(GroupMetadataFormatError, match="not librdkafka's CGMDv2"):
        metadata_epoch(b"CGMDv3:....")
