"""The offset sampler and its plot, on the real broker."""

import time
import uuid

from confluent_kafka import Producer

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
