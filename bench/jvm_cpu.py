"""CPU seconds of the JVMs the suite starts by the hundred, with the lab's flags against the JVM's defaults, measured
in the same run (interleaved rounds, so drift on the machine hits both sides alike; CPU seconds, not wall time, so a
busy machine changes little):

* broker: storage format plus start-to-ready of ``kafka.Kafka`` (``EmbeddedBroker``), with C1 and the class-data
  archive (``labkit.broker.embedded.JVM_FLAGS``, ``labkit.broker.cds``) against C2 and no archive;
* Java participant: a transactional producer's whole run (3 transactions of 5 records), with its archive against
  none (both on the participant's C1 flags);
* Spark driver: ``spark_session()`` on local[2], a small aggregation and 8 s of a rate-source streaming query, with
  ``labkit.spark.session.JVM_FLAGS`` and the driver's archive against Spark's defaults and none.

Goal (issue 34): each at most 0.6x its baseline. Run: ``.venv/bin/python bench/jvm_cpu.py [rounds]`` after
``make jars`` (which makes the archives).
"""

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap

import psutil

from labkit.broker import EmbeddedBroker, embedded
from labkit.crashlab import java
from labkit.crashlab.experiment import Experiment

SPARK = textwrap.dedent("""
    import sys, time, psutil
    from labkit.spark import session
    defaults = sys.argv[1] == "defaults"
    if defaults:
        session.JVM_FLAGS = ""
    spark = session.spark_session(class_data=[] if defaults else None)  # defaults: no archive either
    spark.range(0, 100000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    query = spark.readStream.format("rate").option("rowsPerSecond", 100).load().writeStream.format("noop").start()
    time.sleep(8)
    query.stop()
    print(sum(sum(p.cpu_times()[:4]) for p in psutil.Process().children(recursive=True)))
""")


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def broker_cpu_s(lab_flags: bool) -> float:
    """Format plus start-to-ready CPU of one broker JVM (s)."""
    saved = embedded.JVM_FLAGS
    if not lab_flags:
        embedded.JVM_FLAGS = tuple(f for f in saved if f != "-XX:TieredStopAtLevel=1")
    try:
        before = children_cpu_s()
        broker = EmbeddedBroker(class_data=None if lab_flags else []).start()
        cpu = children_cpu_s() - before + sum(psutil.Process(broker.pid).cpu_times()[:2])
        broker.close()
        return cpu
    finally:
        embedded.JVM_FLAGS = saved


def participant_cpu_s(bootstrap: str, folder: str, archive: bool) -> float:
    """A Java transactional producer's whole run (s of CPU)."""
    exp = Experiment("jvm-cpu", bootstrap, folder=folder)
    topic = exp.topic("out")
    p = exp.participant("producer", "producer", client="java", topic=topic, mode="transactional",
                        transactional_id=f"{topic}-tid", iterations=3, batch=5)
    before = children_cpu_s()
    subprocess.run([*java.command(class_data=None if archive else []), json.dumps(p.spec)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return children_cpu_s() - before


def spark_cpu_s(lab_flags: bool) -> float:
    """A Spark driver's start, a small job and a short streaming query (s of CPU of its JVMs)."""
    out = subprocess.run([sys.executable, "-c", SPARK, "lab" if lab_flags else "defaults"], capture_output=True,
                         text=True, check=True, timeout=900)
    return float(out.stdout.strip().splitlines()[-1])


def report(name: str, lab: list[float], base: list[float]) -> None:
    lab_m, base_m = statistics.median(lab), statistics.median(base)
    print(f"{name}: lab {lab_m:.2f} CPU s, defaults {base_m:.2f} CPU s, ratio {lab_m / base_m:.2f}x "
          f"(goal <= 0.60x: {'met' if lab_m / base_m <= 0.6 else 'NOT met'})", flush=True)


def main(rounds: int) -> None:
    results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in ("broker", "participant", "spark")}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-jvm-") as folder:
        for i in range(rounds):
            for lab in (True, False):
                results["broker"][0 if lab else 1].append(broker_cpu_s(lab))
                results["participant"][0 if lab else 1].append(participant_cpu_s(broker.bootstrap_servers, folder, lab))
                results["spark"][0 if lab else 1].append(spark_cpu_s(lab))
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[0][-1]:.2f}/{v[1][-1]:.2f}" for k, v in results.items()),
                  flush=True)
    for name, (lab, base) in results.items():
        report(name, lab, base)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
