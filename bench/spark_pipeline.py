"""Notebook 04's pipeline: sink B's throughput as a ratio of sink A's on the same data, and the driver's start
time on local[2] against a local standalone cluster, all measured in the same run.

Throughput = input records / (first sink start - last ``commits/N``), from the history, no crash; sinks A and B
run in alternating rounds on fresh topics of the same size. Start time = driver process start to its first
micro-batch's sink start (SparkSession, query start, first batch planned). Cluster start = master + 1 worker ready.

Run: ``make bench`` (or ``.venv/bin/python bench/spark_pipeline.py [records] [rounds]``).
"""

import statistics
import sys
import time

from labkit.broker import EmbeddedBroker
from labkit.lessons import spark_pipeline as sp
from labkit.lab.spark_cluster import StandaloneCluster


def one_run(bootstrap: str, sink: str, records: int, master: str | None = None) -> tuple[float, float]:
    """(records/s, driver start to first sink start in s) of one uncrashed pipeline run."""
    run = sp.pipeline(bootstrap, sink, records=records, max_offsets=max(records // 10, 100), master=master, idle_ms=3000)
    run.run_to_end([], timeout_s=900)
    events = run.experiment.history.events()
    start = next(e.mono_ns for e in events if e.kind == "start")
    first = min(e.mono_ns for e in events if e.kind == "batch_start")
    last = max(e.mono_ns for e in events if e.kind == "batch_committed")
    run.finish()
    done = sum(r.once for r in run.batches())
    assert done == records and run.result.ok, f"sink {sink}: {done} of {records}, {run.result.counts()}"
    return records / ((last - first) / 1e9), (first - start) / 1e9


def main(records: int = 20_000, rounds: int = 3) -> None:
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        rates, starts = {"A": [], "B": []}, {"local[2]": [], "standalone": []}
        for i in range(rounds):
            for sink in ("A", "B") if i % 2 == 0 else ("B", "A"):
                rate, start = one_run(bootstrap, sink, records)
                rates[sink].append(rate)
                starts["local[2]"].append(start)
                print(f"round {i + 1}: sink {sink} {rate:,.0f} records/s (driver start {start:.1f} s)", flush=True)
        t = time.monotonic()
        with StandaloneCluster(workers=1, cores=2) as cluster:
            cluster_start = time.monotonic() - t
            for _ in range(rounds):
                starts["standalone"].append(one_run(bootstrap, "B", 1000, cluster.master_url)[1])
        a, b = statistics.median(rates["A"]), statistics.median(rates["B"])
        local, standalone = statistics.median(starts["local[2]"]), statistics.median(starts["standalone"])
        print(f"\n{records:,} records per run, median of {rounds} rounds:")
        print(f"  sink A (Spark's Kafka writer)         {a:10,.0f} records/s")
        print(f"  sink B (one transaction per batch)    {b:10,.0f} records/s   = {b / a:.2f}x sink A")
        print(f"  driver start to first batch, local[2]     {local:5.1f} s")
        print(f"  driver start to first batch, standalone   {standalone:5.1f} s   = {standalone / local:.2f}x local[2]"
              f"  (cluster start, master + 1 worker: {cluster_start:.1f} s)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
