"""``make reset``: remove the lab's topics and experiment files, and nothing else.

The lab's topics are the ones it created itself, as its ledger ``$LABKIT_HOME/lab/created-topics.jsonl`` records them
(:mod:`labkit.kafka.ledger`): one JSON line ``{"cluster": <cluster id>, "topic": <name>}`` per topic, appended when
:func:`labkit.kafka.records.create_topic` creates it. A ledger rather than a name pattern: the lab's names,
``<prefix>-<8 hex digits>``, are also what a learner's ``orders-20260101`` or ``payments-deadbeef`` look like, and no
name or topic config is a mark a user's topic cannot carry by accident; the cluster id (not the address, which changes
with every start of a broker on the same data) keeps a topic of the same name on another cluster safe.

They are deleted from the broker the lab uses (``LABKIT_BOOTSTRAP``, else the running ``make lab`` broker); when no
lab broker runs, each lab broker data folder (``$LABKIT_HOME/lab/broker-data-<version>``) is opened by a broker of
its release for the deletion and stopped again. On a broker that is not the lab's own (``LABKIT_BOOTSTRAP`` naming
another cluster) reset lists the topics and asks first, unless ``--yes``; with no terminal to ask on, it deletes
nothing. Every other topic, the Kafka and Spark jars and the lab's state files are left alone. Committed offsets of
a deleted topic go with it (Kafka drops them). The experiment files are the histories, logs and Spark checkpoints
under ``$LABKIT_HOME/experiments``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from labkit.broker.probe import admin, check_reachable
from labkit.broker.runtime import labkit_home
from labkit.core.errors import LabkitError
from labkit.kafka.ledger import forget, rows


class ResetNotConfirmed(LabkitError):
    """Reset was pointed at a broker that is not the lab's own and the deletion was not confirmed."""


def lab_topics(cluster_id: str, names: list[str]) -> list[str]:
    """Of ``names`` (the topics of the cluster ``cluster_id``), the ones the ledger says the lab created, sorted."""
    created = {r["topic"] for r in rows() if r["cluster"] == cluster_id}
    return sorted(set(names) & created)


def delete_lab_topics(bootstrap: str, confirm: Callable[[str, list[str]], bool] | None = None,
                      timeout_s: float = 30.0) -> list[str]:
    """Delete the lab's topics (:func:`lab_topics`) from the broker at ``bootstrap`` (``host:port``) and forget them;
    return their names. ``confirm(bootstrap, names)``, if given, is asked first when there is anything to delete.
    ``timeout_s``: for the listing and each deletion, s.

    Raises:
        BrokerUnreachableError: nothing answers at ``bootstrap`` within a few seconds (names the address).
        ResetNotConfirmed: ``confirm`` said no; nothing was deleted.
        confluent_kafka.KafkaException: the broker refused a deletion.
    """
    check_reachable(bootstrap)
    client = admin(bootstrap)  # held while its futures run
    meta = client.list_topics(timeout=timeout_s)
    doomed = lab_topics(meta.cluster_id, list(meta.topics))
    if doomed and confirm and not confirm(bootstrap, doomed):
        raise ResetNotConfirmed(f"nothing deleted from {bootstrap} (not the lab's own broker); pass --yes to delete "
                                "its lab topics: python -m labkit reset --yes, make reset ARGS=--yes")
    if doomed:
        for future in client.delete_topics(doomed, operation_timeout=timeout_s).values():
            future.result(timeout_s)
        forget(meta.cluster_id, doomed)
    return doomed


def ask_on_terminal(bootstrap: str, names: list[str]) -> bool:
    """List ``names`` (topics) and ask on the terminal whether to delete them from ``bootstrap``; ``False`` when
    stdin is not a terminal (nobody to ask)."""
    print(f"{bootstrap} is not the lab's own broker; reset would delete these {len(names)} topics the lab created:")
    print("".join(f"  {n}\n" for n in names), end="")
    if not sys.stdin.isatty():
        return False
    return input("Delete them? [y/N] ").strip().lower() in ("y", "yes")


def remove_experiment_files(home: Path) -> int:
    """Remove everything under ``<home>/experiments`` (histories, participant logs, Spark checkpoints);
    return how many files went."""
    folder = home / "experiments"
    if not folder.exists():
        return 0
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    shutil.rmtree(folder)
    return files


def reset(yes: bool = False, confirm: Callable[[str, list[str]], bool] = ask_on_terminal) -> list[str]:
    """Remove the lab's topics (see the module's text for which broker) and experiment files under
    ``$LABKIT_HOME``; return one line per thing done, for the learner to read. On a broker that is not the lab's
    own, ``confirm(bootstrap, names)`` is asked first unless ``yes``.

    Raises:
        BrokerUnreachableError: ``LABKIT_BOOTSTRAP`` is set but nothing answers there.
        ResetNotConfirmed: not the lab's own broker, and ``confirm`` said no; nothing was deleted.
        What :meth:`~labkit.broker.EmbeddedBroker.start` raises, for a stopped lab broker's data that cannot
        be opened (e.g. no Java).
    """
    from labkit.broker import EmbeddedBroker
    from labkit.lab.server import BROKER_READY_S, running_broker

    home, done = labkit_home(), []
    own = running_broker(wait_s=BROKER_READY_S)  # one starting is waited for: its data is not ours to open
    bootstrap = os.environ.get("LABKIT_BOOTSTRAP") or own
    if bootstrap:
        ask = None if yes or bootstrap == own else confirm
        done.append(f"{bootstrap}: deleted {len(delete_lab_topics(bootstrap, ask))} lab topics")
    else:
        for data in sorted((home / "lab").glob("broker-data-*")):
            with EmbeddedBroker(data, version=data.name.removeprefix("broker-data-")) as broker:
                done.append(f"{data}: deleted {len(delete_lab_topics(broker.bootstrap_servers))} lab topics")
    done.append(f"{home / 'experiments'}: removed {remove_experiment_files(home)} experiment files")
    return done


def main(argv: list[str]) -> int:
    """``python -m labkit reset [--yes]``: print what :func:`reset` did (``--yes``: no question on a broker that
    is not the lab's own)."""
    for line in reset(yes="--yes" in argv):
        print(line)
    return 0
