"""Sampling a partition's offsets over time: the high watermark and the last stable offset (LSO),
and a plot of both (KIP-98: read_committed consumers read only below the LSO)."""

from __future__ import annotations

import threading
import time
import uuid

import pandas as pd
import plotly.graph_objects as go
from confluent_kafka import Consumer, TopicPartition

from labkit.broker.probe import KAFKA_LOG
from labkit.core.background import Periodic


class OffsetSampler:
    """Samples a partition's high watermark and last stable offset every ``interval_s`` seconds in a
    background thread (ListOffsets at read_uncommitted, and at read_committed, which answers with the LSO).

    Args:
        bootstrap, topic, partition: where.
        interval_s: seconds between samples.
    Use as a context manager, or :meth:`start` / :meth:`stop`; :attr:`samples` is a DataFrame of
    ``mono_ns, high_watermark, lso`` (offsets). :meth:`start` returns once the first sample is taken, so
    what happens after it is sampled. The rows are kept under a lock: :attr:`samples` is read while the thread
    appends (a notebook waits for a sample to show something), and a DataFrame built from a list that grows
    under it fails (``Length of values (53) does not match length of index (54)``).

    Raises:
        TimeoutError: from :meth:`start` when no sample could be taken within ``first_sample_s`` seconds
            (broker unreachable or overloaded).
    """

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, interval_s: float = 0.1) -> None:
        self.tp = TopicPartition(topic, partition)
        self._consumers = {level: Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{uuid.uuid4().hex[:6]}",
                                            "isolation.level": level, "logger": KAFKA_LOG})
                           for level in ("read_uncommitted", "read_committed")}
        self._rows: list[tuple[int, int, int]] = []  # appended by the thread, copied by samples: under _lock
        self._lock = threading.Lock()
        self._first = threading.Event()
        self._thread = Periodic("labkit-offset-sampler", self._sample, interval_s)

    def start(self, first_sample_s: float = 15.0) -> "OffsetSampler":
        """Start sampling; returns once the first sample is taken.

        Raises:
            TimeoutError: no sample within ``first_sample_s`` seconds.
            Exception: what ended the sampling thread before its first sample (e.g. a KafkaException).
        """
        self._thread.start()
        if not self._first.wait(first_sample_s):
            self.stop()
            raise TimeoutError(f"no offsets of {self.tp.topic}[{self.tp.partition}] within {first_sample_s:g} s: "
                               "is the broker up (python -m labkit status)?")
        return self

    def stop(self, timeout_s: float = 30.0) -> pd.DataFrame:
        """Stop sampling (waits at most ``timeout_s`` seconds for the thread); returns :attr:`samples`.

        Raises:
            TimeoutError: a sample still runs after ``timeout_s`` seconds.
            Exception: what ended the sampling thread (e.g. a KafkaException).
        """
        try:
            self._thread.stop(timeout_s)
        finally:
            if not self._thread.running:
                for c in self._consumers.values():
                    c.close()
        return self.samples

    def __enter__(self) -> "OffsetSampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def samples(self) -> pd.DataFrame:
        """The samples so far (a copy of the rows, taken under the lock the thread appends under)."""
        with self._lock:
            rows = list(self._rows)
        return pd.DataFrame(rows, columns=["mono_ns", "high_watermark", "lso"])

    def _sample(self) -> None:
        hw = self._consumers["read_uncommitted"].get_watermark_offsets(self.tp, timeout=5)[1]
        lso = self._consumers["read_committed"].get_watermark_offsets(self.tp, timeout=5)[1]
        with self._lock:
            self._rows.append((time.monotonic_ns(), hw, lso))
        self._first.set()


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
