"""The lab's ledger of the topics it created, ``$LABKIT_HOME/lab/created-topics.jsonl``: one JSON line ``{"cluster":
<cluster id>, "topic": <name>}`` per topic, appended by :func:`labkit.kafka.records.create_topic`. ``make reset``
(:mod:`labkit.lab.reset`) deletes only the topics it lists: see there why a ledger and not a name pattern.
"""

from __future__ import annotations

import json
from pathlib import Path

from labkit.broker.runtime import labkit_home


def ledger() -> Path:
    """``$LABKIT_HOME/lab/created-topics.jsonl``: the lab's record of the topics it created."""
    return labkit_home() / "lab" / "created-topics.jsonl"


def record_created_topic(cluster_id: str, topic: str) -> None:
    """Append ``topic`` (a name) created on the cluster ``cluster_id`` (the broker's cluster id) to :func:`ledger`;
    what every creation of a lab topic calls, and what makes it a topic reset may delete.

    Raises:
        OSError: the ledger cannot be written.
    """
    ledger().parent.mkdir(parents=True, exist_ok=True)
    with ledger().open("a") as f:
        f.write(json.dumps({"cluster": cluster_id, "topic": topic}) + "\n")


def rows() -> list[dict]:
    """The ledger's entries, ``[{"cluster": <cluster id>, "topic": <name>}, ...]``, oldest first ([] before the
    first)."""
    try:
        lines = ledger().read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def forget(cluster_id: str, topics: list[str]) -> None:
    """Remove ``topics`` (names) of the cluster ``cluster_id`` from the ledger (they were deleted).

    Raises:
        OSError: the ledger cannot be written.
    """
    kept = [r for r in rows() if not (r["cluster"] == cluster_id and r["topic"] in topics)]
    ledger().write_text("".join(json.dumps(r) + "\n" for r in kept))
