"""labkit.kafka.logbatches on the real broker: the control records read from the partition's batches (not inferred
from offsets), each record's producer id and epoch as DescribeProducers reports them, the transaction outcome per
record, and its errors (a missing topic, an unreachable address, a start outside the log)."""

import socket
import time

import pytest
from confluent_kafka import Producer

from labkit.broker.probe import KAFKA_LOG
from labkit.core.errors import BrokerUnreachableError, TopicNotFoundError
from labkit.core.waiting import wait_until
from labkit.kafka import logbatches, records
from labkit.kafka.logbatches import LOG_COLUMNS, LogReadError, read_log
from labkit.kafka.producers import describe_producers


@pytest.fixture(scope="module")
def two_transactions(bootstrap):
    """One partition: c1..c3 committed (transactional.id A), a1..a3 aborted (B), then a plain p1. The coordinator
    writes a transaction's markers after it answered the client's EndTxn, so each write waits for the marker before
    it."""
    topic = records.create_topic(bootstrap, "logbatches")
    records.produce(bootstrap, topic, ["c1", "c2", "c3"], transactional_id=f"A-{topic}", outcome="commit")
    assert wait_until(lambda: records.high_watermarks(bootstrap, topic)[0] == 4, 10)
    records.produce(bootstrap, topic, ["a1", "a2", "a3"], transactional_id=f"B-{topic}", outcome="abort")
    assert wait_until(lambda: records.high_watermarks(bootstrap, topic)[0] == 8, 10)
    records.produce(bootstrap, topic, ["p1"])
    return topic


def test_control_records_and_outcomes_come_from_the_batches(bootstrap, two_transactions):
    log = read_log(bootstrap, two_transactions)
    assert list(log.columns) == LOG_COLUMNS
    assert list(log.offset) == list(range(9)) and log.attrs["high_watermark"] == 9
    controls = log[log.control]
    assert list(zip(controls.offset, controls.marker)) == [(3, "COMMIT"), (7, "ABORT")]
    assert controls.transactional.all() and controls.value.isna().all() and controls.outcome.isna().all()
    data = log[~log.control]
    assert list(data.value) == ["c1", "c2", "c3", "a1", "a2", "a3", "p1"]
    assert list(data.outcome) == ["committed"] * 3 + ["aborted"] * 3 + [None]
    assert list(data.transactional) == [True] * 6 + [False]
    assert data.marker.isna().all()
    plain = log[log.offset == 8].iloc[0]
    assert plain.producer_id == -1 and plain.producer_epoch == -1  # librdkafka's default: no idempotence
    # each marker carries its transaction's producer id and epoch (WriteTxnMarkers)
    for first, marker in ((0, 3), (4, 7)):
        part = log[(log.offset >= first) & (log.offset <= marker)]
        assert part.producer_id.nunique() == 1 and part.producer_epoch.nunique() == 1, part


def test_producer_ids_and_epochs_are_what_describe_producers_reports(bootstrap, two_transactions):
    log = read_log(bootstrap, two_transactions)
    written = {(int(r.producer_id), int(r.producer_epoch)) for r in log.itertuples() if r.producer_id >= 0}
    described = describe_producers(bootstrap, two_transactions)
    assert written == set(zip(described.producer_id, described.producer_epoch)) and len(written) == 2


def test_start_skips_the_records_before_it(bootstrap, two_transactions):
    log = read_log(bootstrap, two_transactions, start=5)
    assert list(log.offset) == [5, 6, 7, 8] and list(log.base_offset.iloc[:2]) == [4, 4]  # 4..6 are one batch
    assert list(log.outcome) == ["aborted", "aborted", None, None]
    assert read_log(bootstrap, two_transactions, start=9).empty
    with pytest.raises(LogReadError, match="OFFSET_OUT_OF_RANGE"):
        read_log(bootstrap, two_transactions, start=10)


def test_an_open_transaction_has_no_outcome_yet(bootstrap):
    topic = records.create_topic(bootstrap, "logbatches-open")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"open-{topic}", "logger": KAFKA_LOG})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"o1", partition=0)
    assert producer.flush(30) == 0
    try:
        log = read_log(bootstrap, topic)
        assert list(log.value) == ["o1"] and list(log.outcome) == [None] and log.transactional.all()
        assert log.attrs["last_stable_offset"] == 0 and log.attrs["high_watermark"] == 1
    finally:
        producer.abort_transaction(30)
    assert wait_until(lambda: len(read_log(bootstrap, topic)) == 2, 10)  # the marker comes after EndTxn's answer
    log = read_log(bootstrap, topic)
    assert list(log.marker) == [None, "ABORT"] and list(log.outcome) == ["aborted", None]


def test_a_missing_topic_is_topic_not_found(bootstrap):
    with pytest.raises(TopicNotFoundError, match="no-such-topic-"):
        read_log(bootstrap, f"no-such-topic-{time.monotonic_ns()}")


def test_a_missing_partition_is_refused(bootstrap, two_transactions):
    with pytest.raises(ValueError, match="has partitions \\[0\\], not 3"):
        read_log(bootstrap, two_transactions, 3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_fails_at_once_naming_the_address():
    address = f"127.0.0.1:{_free_port()}"
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match=address):
        read_log(address, "any")
    assert time.monotonic() - started < 3


def test_a_silent_listener_fails_at_the_deadline_naming_the_address():
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(BrokerUnreachableError, match=address):
            read_log(address, "any", timeout_s=1.5)
        assert time.monotonic() - started < 4


def test_a_fetch_per_batch_reads_the_same_log(bootstrap, two_transactions, monkeypatch):
    whole = read_log(bootstrap, two_transactions)
    fetches = []
    original = logbatches._fetch
    monkeypatch.setattr(logbatches, "FETCH_MAX_BYTES", 1)  # the leader still returns the first batch whole (KIP-74)
    monkeypatch.setattr(logbatches, "_fetch", lambda *a: fetches.append(a[3]) or original(*a))
    small = read_log(bootstrap, two_transactions)
    assert small.equals(whole) and fetches == sorted(set(whole.base_offset)), fetches


def test_a_gzip_batch_is_read(bootstrap):
    topic = records.create_topic(bootstrap, "logbatches-gzip")
    records.produce(bootstrap, topic, ["g1", "g2"], transactional_id=f"gz-{topic}", **{"compression.codec": "gzip"})
    assert wait_until(lambda: len(read_log(bootstrap, topic)) == 3, 10)
    log = read_log(bootstrap, topic)
    assert list(log.value) == ["g1", "g2", None] and list(log.outcome) == ["committed", "committed", None]
