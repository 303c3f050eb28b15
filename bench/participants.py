"""Participant spawn time, and the cost of recording every record in the history, as ratios
against bare confluent-kafka on the same broker, measured in the same run.

* spawn: ``Participant.start()`` until the child's first event, next to a bare
  ``python -c "import confluent_kafka"`` process start.
* throughput: an idempotent producer participant (history on: a send and an ack event per
  record) against the same produce/flush loop in a bare subprocess with no history.
  Goal: participant >= 0.8x bare throughput.

Run: ``make bench`` (or ``.venv/bin/python bench/participants.py [records] [rounds]``).
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time

from labkit.broker import EmbeddedBroker
from labkit.crashlab.experiment import Experiment

BARE = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, n, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
p.list_topics(topic, timeout=10)
acked = [0]
def cb(err, msg):
    acked[0] += not err
start = time.monotonic()
for i in range(0, n, batch):
    for j in range(batch):
        p.produce(topic, f"bare-{i + j + 1}".encode(), partition=0, on_delivery=cb)
    p.flush(30)
print(acked[0] / (time.monotonic() - start))
"""


def bare_throughput(bootstrap: str, topic: str, records: int, batch: int) -> float:
    out = subprocess.run([sys.executable, "-c", BARE, bootstrap, topic, str(records), str(batch)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def participant_run(exp: Experiment, records: int, batch: int) -> tuple[float, float]:
    """(spawn seconds, records/s from the first send to the last ack)."""
    topic = exp.topic("bench")
    started = time.monotonic_ns()
    p = exp.participant(f"bench-{topic[-8:]}", "producer", topic=topic, iterations=records // batch, batch=batch)
    p.start().wait(300)
    mine = [e for e in exp.history.events() if e.participant == p.name]
    first = next(e for e in mine if e.kind == "send")
    acks = [e for e in mine if e.kind == "ack"]
    assert len(acks) == records, f"{len(acks)} of {records} acked"
    return (first.mono_ns - started) / 1e9, records / ((acks[-1].mono_ns - first.mono_ns) / 1e9)


def python_spawn() -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import confluent_kafka"], check=True)
    return time.monotonic() - started


def main(records: int, rounds: int) -> None:
    batch = 1000
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        exp = Experiment("bench", broker.bootstrap_servers, folder=tmp)
        bare_throughput(broker.bootstrap_servers, exp.topic("warm"), records, batch)  # warm-up, both paths
        participant_run(exp, records, batch)
        spawn, base_spawn, mine, bare = [], [], [], []
        for i in range(rounds):  # interleaved, order alternating, so drift hits both sides alike
            for side in ("participant", "bare") if i % 2 == 0 else ("bare", "participant"):
                if side == "participant":
                    s, t = participant_run(exp, records, batch)
                    spawn.append(s)
                    mine.append(t)
                else:
                    base_spawn.append(python_spawn())
                    bare.append(bare_throughput(broker.bootstrap_servers, exp.topic("bare"), records, batch))
            print(f"round {i + 1}: participant {t:,.0f} rec/s, bare {bare[-1]:,.0f} rec/s; "
                  f"spawn {s:.2f} s vs bare python {base_spawn[-1]:.2f} s", flush=True)
    m, b = statistics.median(mine), statistics.median(bare)
    print(json.dumps({"participant_rec_per_s": round(m), "bare_rec_per_s": round(b)}))
    print(f"throughput ratio participant/bare: {m / b:.2f}x  (goal >= 0.80x)")
    print(f"spawn: {statistics.median(spawn):.2f} s to the first event, "
          f"{statistics.median(spawn) / statistics.median(base_spawn):.2f}x a bare python + confluent_kafka start")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
