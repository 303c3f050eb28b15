"""The offset sampler and its plot, on the real broker; its thread against its reader on fake consumers."""

import time
import uuid

from confluent_kafka import Producer

from labkit.kafka import offsets
from labkit.kafka.offsets import OffsetSampler, plot_offsets
from labkit.kafka.records import create_topic


def test_sampler_sees_the_lso_held_by_an_open_transaction(bootstrap):
    topic = create_topic(bootstrap, "lso")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"lso-{uuid.uuid4()}"})
    producer.init_transactions(30)
    with OffsetSampler(bootstrap, topic, interval_s=0.05) as sampler:
        producer.begin_transaction()
        producer.produce(topic, b"open", partition=0)
        producer.flush(10)
        deadline = time.monotonic() + 15
        while not (sampler.samples.high_watermark == 1).any() and time.monotonic() < deadline:
            time.sleep(0.05)
        producer.commit_transaction(10)
        time.sleep(0.5)
    s = sampler.samples
    assert ((s.high_watermark == 1) & (s.lso == 0)).any()  # written, not yet stable
    assert s.iloc[-1].tolist()[1:] == [2, 2]  # record + COMMIT marker, stable
    fig = plot_offsets(s, {"commit": int(s.mono_ns.iloc[-1])})
    assert [t.name for t in fig.data] == ["high watermark", "last stable offset (LSO)"]


class InstantConsumer:
    """A consumer whose ListOffsets answers at once, each call one offset further (high watermark and LSO alike)."""

    def __init__(self, config: dict) -> None:
        self.offset = 0

    def get_watermark_offsets(self, tp, timeout: float) -> tuple[int, int]:
        self.offset += 1
        return 0, self.offset

    def close(self) -> None:
        pass


def test_samples_read_while_the_thread_samples_at_full_speed_are_whole(monkeypatch):
    """The sampler on fake consumers (no broker: ListOffsets answers at once) with no interval, so its thread
    appends rows as fast as it can while the test builds :attr:`OffsetSampler.samples` for two seconds: each read
    is a whole DataFrame, one row per sample, never shorter than the read before (a DataFrame built from the list
    the thread appends to failed with "Length of values (53) does not match length of index (54)")."""
    monkeypatch.setattr(offsets, "Consumer", InstantConsumer)
    reads, before = 0, 0
    with OffsetSampler("127.0.0.1:1", "t", interval_s=0) as sampler:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            s = sampler.samples
            assert list(s.columns) == ["mono_ns", "high_watermark", "lso"] and len(s) >= before
            assert (s.high_watermark == s.lso).all() and s.mono_ns.is_monotonic_increasing
            before, reads = len(s), reads + 1
    assert len(sampler.samples) > before and reads > 1
