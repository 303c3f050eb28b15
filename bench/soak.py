"""The soak of issue 11 (Kafka's ``transactions_test`` is the model): randomized fault schedules over KIP-447
processors under a supervisor (processor SIGKILL, SIGSTOP past the session timeout, broker kill -9 + restart
at random moments while they process), each ending once the group caught up; then the checker. The same
schedules run with at-least-once processors as the negative control (they must show duplicates).

Prints one line per schedule, then for each mode: schedules, records, faults carried out, duplicates, lost
writes (those to Kafka's marker race apart), unprocessed, recovery after a broker restart (median, max), stalls
with the call, and any schedule that did not finish.

Run: ``.venv/bin/python bench/soak.py [--schedules 100] [--records 1200] [--control-every 5] [--workers 2]
[--cluster N] [--client java]``. Each worker runs its share of the seeds on a Kafka of its own: the lab's single combined node,
or with ``--cluster N`` a separate KRaft controller and N brokers (a broker fault kills one of them). About 1 to
2 minutes per schedule and mode on a 2-core machine; the faults wait on the clock (pauses, session timeouts,
restarts) more than on the CPU, so two or three workers share 2 cores well.
"""

import argparse
import tempfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from labkit.broker import EmbeddedBroker
from labkit.broker.multinode import EmbeddedCluster
from labkit.crashlab.registry import CLIENTS
from labkit.lab.reset import delete_lab_topics
from labkit_dev.soak import brokers_of, run_schedule, summary

MODES = (("KIP-447", True), ("at-least-once", False))


#: Kafka 4.4's group coordinator, after the load race of ``labkit_dev.soak.LOAD_RACE`` let a member write
#: into a half-replayed state, fails every later load of ``__consumer_offsets`` (docs/marker-race.md): no group
#: works on that Kafka again.
BROKEN = "Failed to load metadata from __consumer_offsets"


def broken_coordinator(kafka: EmbeddedBroker | EmbeddedCluster, marks: dict) -> bool:
    """Whether a broker of ``kafka`` logged :data:`BROKEN` after its mark in ``marks`` (broker -> log size)."""
    return any(b.logged_since(marks.get(b, 0), BROKEN) for b in brokers_of(kafka))


def revive(kafka: EmbeddedBroker | EmbeddedCluster, cluster: int, broken: bool) -> EmbeddedBroker | EmbeddedCluster:
    """This worker's Kafka for the next schedule: a fresh one if the group coordinator is ``broken``, the same one
    started again if a schedule left it down (a broker restart that timed out on a loaded machine), so that one
    failure does not fail every later schedule of the worker."""
    nodes = kafka.nodes.values() if isinstance(kafka, EmbeddedCluster) else [kafka]
    try:
        if broken:
            kafka.close()
            return (EmbeddedCluster(cluster) if cluster else EmbeddedBroker()).start()
        if not all(n.is_running for n in nodes):
            kafka.stop()
            kafka.start()
    except Exception as exc:  # noqa: BLE001: the next schedule tries again, and says so if it cannot run
        print(f"    could not restart this worker's Kafka: {exc}", flush=True)
    return kafka


def shard(seeds: list[int], records: int, control_every: int, cluster: int, client: str) -> list[tuple[str, object]]:
    """Run ``seeds`` on a Kafka of this worker's own; return ``(mode, SoakResult or error text)`` per run."""
    folder, out = tempfile.mkdtemp(prefix="labkit-soak-"), []
    kafka = (EmbeddedCluster(cluster) if cluster else EmbeddedBroker()).start()
    try:
        for seed in seeds:
            for mode, transactional in MODES:
                if not transactional and seed % control_every:
                    continue
                marks = {b: b.log_size() for b in brokers_of(kafka)}
                try:
                    r = run_schedule(kafka, folder, seed, records=records, transactional=transactional, client=client)
                except Exception as exc:  # noqa: BLE001: a schedule that did not finish is a result too
                    broken = broken_coordinator(kafka, marks)
                    cause = " [Kafka's group coordinator can no longer load __consumer_offsets]" if broken else ""
                    print(f"{seed:3d} {mode:>13}: DID NOT FINISH: {exc}{cause}", flush=True)
                    out.append((mode, f"seed {seed}: {exc}{cause}"))
                    kafka = revive(kafka, cluster, broken)
                    continue
                out.append((mode, r))
                try:  # a broker that restarts with fewer logs restarts sooner
                    delete_lab_topics(kafka.bootstrap_servers)
                except Exception as exc:  # noqa: BLE001: a slower broker is no reason to stop
                    print(f"    could not delete the schedule's topics: {exc}", flush=True)
                print(f"{seed:3d} {mode:>13}: {','.join(r.faults):<20} {r.counts['duplicate']:4d} dup "
                      f"{r.counts['lost write']:3d} lost ({r.race_lost} race) {r.counts['unprocessed']:3d} "
                      f"unprocessed ({r.race_unprocessed} race), {r.restarts} restarts, {r.resets} resets corrected, {r.reloads} reloads, recovery {[round(s, 1) for s in r.recovery_s]}"
                      f"{', skipped ' + '; '.join(r.skipped) if r.skipped else ''}", flush=True)
    finally:
        kafka.close()
    return out


def main(schedules: int, records: int, control_every: int, workers: int, cluster: int, client: str) -> None:
    print(f"{schedules} schedules of {records} records on {client} processors, control every {control_every}, "
          f"{workers} workers, "
          f"{f'controller + {cluster} brokers' if cluster else 'one combined node'}", flush=True)
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(shard, list(range(w, schedules, workers)), records, control_every, cluster,
                               client)
                   for w in range(workers)]
        runs = [run for f in futures for run in f.result()]
    for mode, _ in MODES:
        rows = [r for m, r in runs if m == mode and not isinstance(r, str)]
        failed = [r for m, r in runs if m == mode and isinstance(r, str)]
        print(f"{mode}: {summary(rows)}; did not finish: {'; '.join(failed) or 'none'}")
        if mode == "at-least-once":
            print(f"  schedules with duplicates: {sum(r.counts['duplicate'] > 0 for r in rows)}/{len(rows)}")
        else:
            print(f"  clean schedules: {sum(r.clean for r in rows)}/{len(rows) + len(failed)}")


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--schedules", type=int, default=100)
    cli.add_argument("--records", type=int, default=1200, help="inputs per schedule (a multiple of 300)")
    cli.add_argument("--control-every", type=int, default=5, help="at-least-once control on every k-th seed")
    cli.add_argument("--workers", type=int, default=2, help="parallel workers, each with a Kafka of its own")
    cli.add_argument("--cluster", type=int, default=0, help="N brokers + a controller instead of one combined node")
    cli.add_argument("--client", choices=CLIENTS, default="librdkafka", help="the processors' client")
    a = cli.parse_args()
    main(a.schedules, a.records, a.control_every, a.workers, a.cluster, a.client)
