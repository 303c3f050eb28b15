"""Participant spawn time, and the cost of recording every record in the history, as ratios against bare
client loops on the same broker, measured in the same run, for both clients.

* spawn: ``Participant.start()`` until the child's first event, next to a bare
  ``python -c "import confluent_kafka"`` process start; for the Java participant, next to a bare Java producer's
  start until its first send (``bench/BareProducer.java``, on the same JVM flags and classpath) and next to the
  Python participant.
* throughput: an idempotent producer participant (history on: a send and an ack event per
  record) against the same produce/flush loop in a bare subprocess with no history (confluent-kafka for the Python
  participant, Kafka's Java client for the Java one), and the Java participant against the Python one.
  Goal: each participant >= 0.8x its bare loop's throughput.

Run: ``make bench`` (or ``.venv/bin/python bench/participants.py [records] [rounds]``).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from labkit.broker import EmbeddedBroker, javac
from labkit.broker.runtime import find_java
from labkit.crashlab import java
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


def bare_java(bootstrap: str, topic: str, records: int, batch: int, command: list[str]) -> tuple[float, float]:
    """(spawn seconds until the first send, records/s) of ``bench/BareProducer.java`` run by ``command``."""
    started = time.monotonic_ns()
    out = subprocess.run([*command, bootstrap, topic, str(records), str(batch)], capture_output=True, text=True,
                         check=True)
    first_ns, rate = out.stdout.split()
    return (int(first_ns) - started) / 1e9, float(rate)


def bare_java_command(folder: str) -> list[str]:
    """Compile ``bench/BareProducer.java`` into ``folder`` against the Kafka jars; the command that runs it with the
    Java participant's JVM flags (its class path is the participant's, so both load the same jars)."""
    jars = java.class_path()
    subprocess.run([javac.find_javac(), "-nowarn", "-cp", jars, "-d", folder,
                    str(Path(__file__).with_name("BareProducer.java"))], check=True)
    return [find_java(), *java.JVM_FLAGS, "-cp", os.pathsep.join([folder, jars]), "BareProducer"]


def participant_run(exp: Experiment, records: int, batch: int, client: str) -> tuple[float, float]:
    """(spawn seconds, records/s from the first send to the last ack)."""
    topic = exp.topic("bench")
    started = time.monotonic_ns()
    p = exp.participant(f"bench-{topic[-8:]}", "producer", topic=topic, iterations=records // batch, batch=batch,
                        client=client)
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
    sides = ("python", "bare python", "java", "bare java")
    spawn, rate = {side: [] for side in sides}, {side: [] for side in sides}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        bootstrap = broker.bootstrap_servers
        exp = Experiment("bench", bootstrap, folder=tmp)
        command = bare_java_command(tmp)

        def run(side: str) -> tuple[float, float]:
            if side == "bare python":
                return python_spawn(), bare_throughput(bootstrap, exp.topic("bare"), records, batch)
            if side == "bare java":
                return bare_java(bootstrap, exp.topic("barej"), records, batch, command)
            return participant_run(exp, records, batch, "librdkafka" if side == "python" else "java")

        for side in sides:  # warm-up: page cache, the broker's JIT
            run(side)
        for i in range(rounds):  # interleaved, order reversed every other round, so drift hits every side alike
            for side in sides if i % 2 == 0 else sides[::-1]:
                s, t = run(side)
                spawn[side].append(s)
                rate[side].append(t)
            print(f"round {i + 1}: " + ", ".join(f"{side} {rate[side][-1]:,.0f} rec/s (spawn {spawn[side][-1]:.2f} s)"
                                                 for side in sides), flush=True)
    m = {side: statistics.median(rate[side]) for side in sides}
    sp = {side: statistics.median(spawn[side]) for side in sides}
    print(json.dumps({f"{side}_rec_per_s": round(m[side]) for side in sides}))
    print(f"throughput ratio python participant/bare confluent-kafka: {m['python'] / m['bare python']:.2f}x  "
          f"(goal >= 0.80x)")
    print(f"throughput ratio java participant/bare java loop: {m['java'] / m['bare java']:.2f}x  (goal >= 0.80x)")
    print(f"throughput ratio java participant/python participant: {m['java'] / m['python']:.2f}x")
    print(f"spawn: python participant {sp['python']:.2f} s to the first event, {sp['python'] / sp['bare python']:.2f}x "
          f"a bare python + confluent_kafka start; java participant {sp['java']:.2f} s, "
          f"{sp['java'] / sp['bare java']:.2f}x a bare Java producer's start to its first send, "
          f"{sp['java'] / sp['python']:.2f}x the python participant's")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
