"""Kafka's marker race (issue 11; docs/marker-race.md is the write-up): a transactional producer commits 5
records and the broker is kill -9'd the moment ``commit_transaction`` returns, then restarted 1 s later. Counts
the committed transactions left hanging (their COMMIT marker never written: the last stable offset stuck below
the high watermark while the coordinator says CompleteCommit) per broker set-up and Kafka release.

Set-ups: the single combined-mode node with the lab's settings (broker session 4 s, heartbeat 1 s) and with
Kafka's defaults for both (9 s, 2 s); a separate controller process and one broker (KRaft isolated mode); a
controller and three brokers with replication factor 3 for data and internal topics (the broker that coordinates
the transaction is the one killed).

Run: ``.venv/bin/python bench/marker_race.py [kills per set-up] [Kafka releases...]`` (default 10 4.4.0 4.3.2;
about 15 s per kill, a minute per cluster start).
"""

import sys
import tempfile

from labkit.broker import EmbeddedBroker
from labkit.broker.multinode import EmbeddedCluster
from labkit.crashlab.experiment import Experiment
from labkit.lessons.broker_crashes import commit_then_kill

SETUPS = {"combined node, lab settings": lambda v: EmbeddedBroker(version=v),
          "combined node, Kafka's default broker session": lambda v: EmbeddedBroker(
              version=v, **{"broker.session.timeout.ms": None, "broker.heartbeat.interval.ms": None}),
          "controller + 1 broker": lambda v: EmbeddedCluster(1, version=v),
          "controller + 3 brokers, replication factor 3": lambda v: EmbeddedCluster(3, version=v)}


def main(kills: int, versions: list[str]) -> None:
    folder = tempfile.mkdtemp(prefix="labkit-race-")
    for version in versions:
        for setup, make in SETUPS.items():
            with make(version) as broker:
                trials = commit_then_kill(Experiment("race", broker.bootstrap_servers, folder=folder), broker,
                                          trials=kills)
            hanging = trials[trials.outcome == "hanging"]
            done = trials.finalized_s.dropna()
            print(f"Kafka {version}, {setup}: {len(hanging)}/{len(trials)} committed transactions left hanging "
                  f"(read_committed lost {int((5 - hanging.read_committed).sum())} committed records after the "
                  f"abort); finalized ones in median {done.median():.2f} s, max {done.max():.2f} s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10, sys.argv[2:] or ["4.4.0", "4.3.2"])
