import time
import uuid

from confluent_kafka import Producer

from labkit.isolation import OffsetSampler, plot_offsets, read_with_client_defaults, txn_throughput
from labkit.records import create_topic, produce


def test_sampler_sees_the_lso_held_by_an_open_transaction(bootstrap):
    topic = create_topic(bootstrap, "lso")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"lso-{uuid.uuid4()}"})
    producer.init_transactions(30)
    with OffsetSampler(bootstrap, topic, interval_s=0.05) as sampler:
        producer.begin_transaction()
        producer.produce(topic, b"open", partition=0)
        producer.flush(10)
        time.sleep(0.5)
        producer.commit_transaction(10)
        time.sleep(0.5)
    s = sampler.samples
    assert ((s.high_watermark == 1) & (s.lso == 0)).any()  # written, not yet stable
    assert s.iloc[-1].tolist()[1:] == [2, 2]  # record + COMMIT marker, stable
    fig = plot_offsets(s, {"commit": int(s.mono_ns.iloc[-1])})
    assert [t.name for t in fig.data] == ["high watermark", "last stable offset (LSO)"]


def test_client_defaults_differ(bootstrap):
    topic = create_topic(bootstrap, "defaults")
    produce(bootstrap, topic, ["a"], transactional_id=f"d-{uuid.uuid4()}", outcome="abort")
    produce(bootstrap, topic, ["p"])
    assert read_with_client_defaults(bootstrap, topic) == {"confluent-kafka": ["p"], "kafka-python": ["a", "p"]}


def test_bigger_transactions_cost_less_per_record(bootstrap):
    table = txn_throughput(bootstrap, (1, 100), min_records=100, min_txns=2)
    assert list(table.records_per_txn) == [1, 100] and list(table.records) == [100, 200]
    assert table.txn_rec_per_s.iloc[1] > 5 * table.txn_rec_per_s.iloc[0]
    assert (table.ratio < 1).all()
