"""What a partition's log holds, offset by offset, and what each isolation level reads of it.

The log is rebuilt from what the producers were told (their acks give each data record's offset)
and the partition's high watermark: an offset below the high watermark that no producer was given
holds a control record, the COMMIT or ABORT marker the transaction coordinator writes with
WriteTxnMarkers (KIP-98).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

#: Colour of each kind of log entry in :func:`plot_log`.
KIND_COLOURS = {"record": "#4c78a8", "committed": "#54a24b", "aborted": "#e45756", "control record": "#9d9d9d"}


def partition_log(high_watermark: int, **acked: pd.DataFrame) -> pd.DataFrame:
    """Every offset of one partition below ``high_watermark`` and what it holds.

    Args:
        high_watermark: the partition's high watermark (offset after its last entry).
        **acked: kind name to the records of that kind as the producer saw them acked (frames from
            :func:`labkit.kafka.records.produce`, with ``offset`` and ``value``), e.g.
            ``committed=..., aborted=...``; a kind name is any label ("record", "committed", ...).
    Returns:
        Columns offset, kind, value; offsets no producer was given are kind "control record".
    Raises:
        ValueError: an acked offset is at or above the high watermark, or two kinds claim one offset.
    """
    rows = {}
    for kind, frame in acked.items():
        for offset, value in zip(frame["offset"], frame["value"]):
            if offset >= high_watermark or offset in rows:
                raise ValueError(f"offset {offset} ({kind}) is past the high watermark {high_watermark} "
                                 "or claimed twice: pass the acks of one partition, each once")
            rows[offset] = (kind, value)
    return pd.DataFrame([(o, *rows.get(o, ("control record", None))) for o in range(high_watermark)],
                        columns=["offset", "kind", "value"])


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
        log: from :func:`partition_log`.
        reads: reader name (e.g. "read_committed") to its frame from :func:`labkit.kafka.records.read_topic`.
    """
    fig = go.Figure()
    for kind, part in log.groupby("kind", sort=False):
        fig.add_trace(go.Scatter(x=part["offset"], y=["log"] * len(part), mode="markers+text", name=kind,
                                 text=part["value"].fillna("marker"), textposition="top center",
                                 marker=dict(symbol="square", size=22, color=KIND_COLOURS.get(kind))))
    for name, frame in reads.items():
        fig.add_trace(go.Scatter(x=frame["offset"], y=[name] * len(frame), mode="markers+text", name=name,
                                 text=frame["value"], textposition="top center",
                                 marker=dict(symbol="circle", size=14, color="#333")))
    fig.update_layout(title=title, xaxis=dict(title="offset", dtick=1), height=220 + 60 * len(reads),
                      yaxis=dict(categoryorder="array", categoryarray=list(reversed(["log", *reads]))),
                      legend=dict(orientation="h", y=-0.35))
    return fig
