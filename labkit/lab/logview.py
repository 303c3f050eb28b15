"""Show what a partition's log holds, and what each isolation level reads of it.

The log is the one the broker stores, read batch by batch with :func:`labkit.kafka.logbatches.read_log`: each
control record (the COMMIT or ABORT marker the transaction coordinator has the partition leader write with
WriteTxnMarkers, KIP-98) is one the batches mark as such (the batch's isControlBatch attribute), not an offset no
producer was told of. That function is here too, as ``labkit.lab.logview.read_log``, for the notebooks.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from labkit.kafka.logbatches import read_log

__all__ = ["KIND_COLOURS", "partition_log", "plot_log", "read_log", "side_by_side"]

#: Colour of each kind of log entry in :func:`plot_log`.
KIND_COLOURS = {"record": "#4c78a8", "committed": "#54a24b", "aborted": "#e45756", "open": "#f58518",
                "control record": "#9d9d9d"}


def partition_log(log: pd.DataFrame) -> pd.DataFrame:
    """What each offset of a partition's log holds, from its batches as the broker stores them.

    Args:
        log: from :func:`labkit.kafka.logbatches.read_log` (columns offset, control, marker, transactional, outcome,
            value).
    Returns:
        Columns offset, kind, value, marker: one row per record of ``log``, by offset. ``kind`` is "control record"
        for a control record (``marker`` "COMMIT" or "ABORT", ``value`` None), else the record's transaction's
        outcome as the log says it, "committed" or "aborted" ("open" while no marker follows), or "record" for a
        record written without a transaction. An offset ``log`` has no record at is left out (none is inferred).
    Raises:
        ValueError: ``log`` lacks one of those columns (pass :func:`~labkit.kafka.logbatches.read_log`'s frame).
    """
    missing = {"offset", "control", "marker", "transactional", "outcome", "value"} - set(log.columns)
    if missing:
        raise ValueError(f"the log frame lacks columns {sorted(missing)}: pass labkit.kafka.logbatches.read_log's")
    kind = [("control record" if control else "open" if pd.isna(outcome) else outcome) if transactional else "record"
            for control, transactional, outcome in zip(log.control, log.transactional, log.outcome)]
    def text(column: pd.Series) -> pd.Series:  # None where missing (pandas 3 infers str, with NaN for it)
        return pd.Series([None if pd.isna(v) else v for v in column], dtype=object)

    out = pd.DataFrame({"offset": log.offset.to_numpy(), "kind": pd.Series(kind, dtype=object),
                        "value": text(log.value), "marker": text(log.marker)})
    return out.sort_values("offset", ignore_index=True)


def side_by_side(reads: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per offset that any reader saw, one column per reader with the value it read there
    (empty where it saw nothing). ``reads`` maps a reader's name to its frame from
    :func:`labkit.kafka.records.read_topic`."""
    table = pd.concat({name: frame.set_index("offset")["value"] for name, frame in reads.items()}, axis=1)
    return table.sort_index().fillna("")


def plot_log(log: pd.DataFrame, reads: dict[str, pd.DataFrame], title: str = "") -> go.Figure:
    """A static plotly figure: the partition log on the top row (one square per offset, coloured by
    kind) and, below it, one row per reader with a mark at each offset it read.

    Args:
        log: from :func:`partition_log` (a control record is labelled with its marker, COMMIT or ABORT).
        reads: reader name (e.g. "read_committed") to its frame from :func:`labkit.kafka.records.read_topic`.
    """
    fig = go.Figure()
    for kind, part in log.groupby("kind", sort=False):
        labels = [marker if value is None else value for value, marker in zip(part["value"], part["marker"])]
        fig.add_trace(go.Scatter(x=part["offset"], y=["log"] * len(part), mode="markers+text", name=kind,
                                 text=labels, textposition="top center", cliponaxis=False,
                                 marker=dict(symbol="square", size=22, color=KIND_COLOURS.get(kind))))
    for name, frame in reads.items():  # the y axis names each reader: no legend entry of their own (all alike)
        fig.add_trace(go.Scatter(x=frame["offset"], y=[name] * len(frame), mode="markers+text", name=name,
                                 text=frame["value"], textposition="top center", showlegend=False,
                                 marker=dict(symbol="circle", size=14, color="#333")))
    fig.update_layout(title=title, xaxis=dict(title="offset", dtick=1), height=240 + 60 * len(reads),
                      margin=dict(t=100),
                      yaxis=dict(categoryorder="array", categoryarray=list(reversed(["log", *reads]))),
                      legend=dict(orientation="h", y=-0.35))
    return fig
