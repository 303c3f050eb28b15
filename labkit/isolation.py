"""Isolation levels on the real broker: the last stable offset (LSO) against the high watermark
over time, how an open transaction holds read_committed consumers back, and what transactions cost
per record as they grow (KIP-98)."""

from __future__ import annotations

import threading
import time
import uuid

import pandas as pd
import plotly.graph_objects as go
from confluent_kafka import Consumer, Producer, TopicPartition

from labkit.broker.probe import KAFKA_LOG
from labkit.records import create_topic


class OffsetSampler:
    """Samples a partition's high watermark and last stable offset every ``interval_s`` seconds in a
    background thread (ListOffsets at read_uncommitted, and at read_committed, which answers with the LSO).

    Args:
        bootstrap, topic, partition: where.
        interval_s: seconds between samples.
    Use as a context manager, or :meth:`start` / :meth:`stop`; :attr:`samples` is a DataFrame of
    ``mono_ns, high_watermark, lso`` (offsets).
    """

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, interval_s: float = 0.1) -> None:
        self.tp, self.interval_s = TopicPartition(topic, partition), interval_s
        self._consumers = {level: Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{uuid.uuid4().hex[:6]}",
                                            "isolation.level": level, "logger": KAFKA_LOG})
                           for level in ("read_uncommitted", "read_committed")}
        self._rows: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="labkit-offset-sampler")

    def start(self) -> "OffsetSampler":
        self._thread.start()
        return self

    def stop(self) -> pd.DataFrame:
        """Stop sampling; returns :attr:`samples`."""
        self._stop.set()
        self._thread.join()
        for c in self._consumers.values():
            c.close()
        return self.samples

    def __enter__(self) -> "OffsetSampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def samples(self) -> pd.DataFrame:
        return pd.DataFrame(self._rows, columns=["mono_ns", "high_watermark", "lso"])

    def _run(self) -> None:
        while not self._stop.is_set():
            hw = self._consumers["read_uncommitted"].get_watermark_offsets(self.tp, timeout=5)[1]
            lso = self._consumers["read_committed"].get_watermark_offsets(self.tp, timeout=5)[1]
            self._rows.append((time.monotonic_ns(), hw, lso))
            self._stop.wait(self.interval_s)


def plot_offsets(samples: pd.DataFrame, marks: dict[str, int] | None = None, title: str = "") -> go.Figure:
    """High watermark and LSO over time (seconds since the first sample), with vertical lines at
    ``marks`` (label to ``mono_ns``)."""
    t0 = samples.mono_ns.iloc[0]
    x = (samples.mono_ns - t0) / 1e9
    fig = go.Figure([go.Scatter(x=x, y=samples.high_watermark, name="high watermark", line_shape="hv"),
                     go.Scatter(x=x, y=samples.lso, name="last stable offset (LSO)", line_shape="hv",
                                line=dict(dash="dash"))])
    for label, ns in (marks or {}).items():
        fig.add_vline(x=(ns - t0) / 1e9, line_dash="dot", annotation_text=label, annotation_textangle=-30)
    fig.update_layout(title=title, xaxis_title="seconds", yaxis_title="offset", height=380)
    return fig


def txn_throughput(bootstrap: str, sizes: tuple[int, ...] = (1, 10, 100, 1000, 10000), *,
                   min_records: int = 300, min_txns: int = 3) -> pd.DataFrame:
    """Records/s of a transactional producer writing ``size`` records per transaction, for each size,
    next to a non-transactional idempotent producer writing as many records in the same run.

    Each size writes ``max(min_records, min_txns * size)`` records of 100 bytes to a fresh topic; the
    non-transactional side writes at least 30 000, so its rate is a steady state, not a start-up.

    Returns:
        One row per size: records_per_txn, records, txn_rec_per_s, plain_rec_per_s, ratio (txn/plain).
    """
    rows = []
    for size in sizes:
        n = max(min_records, min_txns * size)
        plain = _rate(bootstrap, max(n, 30_000), None)  # steady state: enough records to fill batches
        txn = _rate(bootstrap, n, size)
        rows.append((size, n, txn, plain, txn / plain))
    return pd.DataFrame(rows, columns=["records_per_txn", "records", "txn_rec_per_s", "plain_rec_per_s", "ratio"])


def _rate(bootstrap: str, n: int, per_txn: int | None) -> float:
    topic = create_topic(bootstrap, "throughput")
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "logger": KAFKA_LOG, "linger.ms": 5}
    if per_txn:
        conf["transactional.id"] = f"throughput-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    producer.list_topics(topic, timeout=10)
    value = b"x" * 100
    if per_txn:
        producer.init_transactions(30)
    else:  # get the producer id before the clock starts, as init_transactions does for the other side
        producer.produce(topic, value, partition=0)
        producer.flush(30)
    started = time.monotonic()
    for first in range(0, n, per_txn or n):
        if per_txn:
            producer.begin_transaction()
        for _ in range(min(per_txn or n, n - first)):
            producer.produce(topic, value, partition=0)
            producer.poll(0)
        if per_txn:
            producer.commit_transaction(30)
    producer.flush(30)
    return n / (time.monotonic() - started)


def read_with_client_defaults(bootstrap: str, topic: str, timeout_s: float = 10.0) -> dict[str, list[str]]:
    """Values of partition 0 of ``topic``, read from the start by two clients left at their default
    ``isolation.level``: confluent-kafka (librdkafka: read_committed) and kafka-python (like the Java
    client: read_uncommitted).

    Returns:
        ``{"confluent-kafka": [...], "kafka-python": [...]}``.
    """
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    from labkit.records import high_watermarks

    end = high_watermarks(bootstrap, topic)[0]
    values = {}
    ck = Consumer({"bootstrap.servers": bootstrap, "group.id": f"defaults-{uuid.uuid4().hex[:6]}",
                   "enable.partition.eof": True, "logger": KAFKA_LOG})
    ck.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = ck.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.offset() >= end:
                break
            continue
        got.append(msg.value().decode())
    ck.close()
    values["confluent-kafka"] = got
    kp = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=int(timeout_s * 1000))
    ktp = KTopicPartition(topic, 0)
    kp.assign([ktp])
    kp.seek_to_beginning(ktp)
    got = []
    for record in kp:
        got.append(record.value.decode())
        if record.offset + 1 >= end or kp.position(ktp) >= end:
            break
    kp.close()
    values["kafka-python"] = got
    return values
