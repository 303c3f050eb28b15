"""``make reset``: remove the lab's topics and experiment files, and nothing else.

The lab's topics are the ones :func:`labkit.kafka.records.create_topic` names, ``<prefix>-<8 hex digits>`` (every
notebook's and experiment's). They are deleted from the
broker the lab uses (``LABKIT_BOOTSTRAP``, else the running ``make lab`` broker); when no lab broker runs, each
lab broker data folder (``$LABKIT_HOME/lab/broker-data-<version>``) is opened by a broker of its release for the
deletion and stopped again. Topics of any other name, Kafka's internal topics, the broker's readiness topic,
the Kafka and Spark jars, and the lab's state files are left alone. Committed offsets of a deleted topic go with it (Kafka drops them).
The experiment files are the histories, logs and Spark checkpoints under ``$LABKIT_HOME/experiments``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from labkit.broker.probe import admin, check_reachable
from labkit.broker.runtime import labkit_home

#: The names :func:`labkit.kafka.records.create_topic` gives: ``<prefix>-<8 hex digits>``.
LAB_TOPIC = re.compile(r"[A-Za-z0-9._-]+-[0-9a-f]{8}")


def lab_topics(names: list[str]) -> list[str]:
    """Of ``names``, the lab's topics (sorted): the :data:`LAB_TOPIC` names."""
    return sorted(n for n in names if LAB_TOPIC.fullmatch(n))


def delete_lab_topics(bootstrap: str, timeout_s: float = 30.0) -> list[str]:
    """Delete the lab's topics from the broker at ``bootstrap``; return their names.

    Raises:
        BrokerUnreachableError: nothing answers at ``bootstrap`` within a few seconds (names the address).
        confluent_kafka.KafkaException: the broker refused a deletion.
    """
    check_reachable(bootstrap)
    client = admin(bootstrap)  # held while its futures run
    doomed = lab_topics(list(client.list_topics(timeout=timeout_s).topics))
    if doomed:
        for future in client.delete_topics(doomed, operation_timeout=timeout_s).values():
            future.result(timeout_s)
    return doomed


def remove_experiment_files(home: Path) -> int:
    """Remove everything under ``<home>/experiments`` (histories, participant logs, Spark checkpoints);
    return how many files went."""
    folder = home / "experiments"
    if not folder.exists():
        return 0
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    shutil.rmtree(folder)
    return files


def reset() -> list[str]:
    """Remove the lab's topics (see the module's text for which broker) and experiment files under
    ``$LABKIT_HOME``; return one line per thing done, for the learner to read.

    Raises:
        BrokerUnreachableError: ``LABKIT_BOOTSTRAP`` is set but nothing answers there.
        What :meth:`~labkit.broker.EmbeddedBroker.start` raises, for a stopped lab broker's data that cannot
        be opened (e.g. no Java).
    """
    from labkit.broker import EmbeddedBroker
    from labkit.lab import running_broker

    home, done = labkit_home(), []
    bootstrap = os.environ.get("LABKIT_BOOTSTRAP") or running_broker()
    if bootstrap:
        done.append(f"{bootstrap}: deleted {len(delete_lab_topics(bootstrap))} lab topics")
    else:
        for data in sorted((home / "lab").glob("broker-data-*")):
            with EmbeddedBroker(data, version=data.name.removeprefix("broker-data-")) as broker:
                done.append(f"{data}: deleted {len(delete_lab_topics(broker.bootstrap_servers))} lab topics")
    done.append(f"{home / 'experiments'}: removed {remove_experiment_files(home)} experiment files")
    return done


def main() -> int:
    """``python -m labkit reset``: print what :func:`reset` did."""
    for line in reset():
        print(line)
    return 0
