"""Notebook 04's sinks under randomized crash schedules (too long for ``make test``): sink B must end every
schedule with 0 duplicates, 0 losses and every input processed; sink A, under the same schedules, shows
duplicates in the schedules whose driver crashed mid-batch (its negative control).

Each schedule is a fresh pipeline of ``records`` inputs (2 partitions, micro-batches of ``records // 5``) whose
driver is SIGKILLed (its whole process group, JVM included) once or twice: at a crash point of the sink
in a random batch, or from outside at a random moment while a batch is in flight; the lab restarts it from its
checkpoint each time, as a supervisor would, until it finishes. One schedule in five also kills the broker
(SIGKILL) at a random moment and restarts it 1 s later; a driver that fails on it exits and is restarted too.
The same seeded schedules run for both sinks.

Run: ``.venv/bin/python bench/spark_crashes.py [schedules] [records] [seed]`` (defaults 20, 500, 1: 10 000 records
per sink; about 40 minutes on 2 cores).
"""

import random
import sys
import threading
import time

from labkit.broker import EmbeddedBroker
from labkit.core.waiting import wait_until
from labkit.lessons import spark_pipeline as sp
from labkit.spark.roles.spark_pipeline import SINKS, in_flight

STEPS = {"A": SINKS["kafka"], "B": SINKS["transactional"]}
MAX_RESTARTS = 8


def schedule(rng: random.Random, batches: int) -> dict:
    """Crashes: a list of ("point", step, batch) or ("outside", delay_s, None); and whether to kill the broker."""
    crashes = []
    for _ in range(rng.randint(1, 2)):
        if rng.random() < 0.5:
            crashes.append(("point", rng.randrange(4), rng.randrange(batches)))
        else:
            crashes.append(("outside", rng.uniform(0.0, 3.0), None))
    return {"crashes": crashes, "broker_kill": rng.random() < 0.2}


BENCH_DONE = threading.Event()


def kill_and_restart(broker: EmbeddedBroker, delay_s: float, restarted: threading.Event) -> None:
    """SIGKILL the broker after ``delay_s`` seconds and start it again 1 s later (retried: on a loaded machine
    a start can miss its readiness deadline), then stay alive until the bench ends: the broker JVM dies with
    the thread that started it (``die_with_parent``)."""
    time.sleep(delay_s)
    broker.kill()
    time.sleep(1)
    for attempt in range(3):
        try:
            broker.start()
            break
        except Exception as exc:  # noqa: BLE001: reported, then tried again
            print(f"broker restart {attempt + 1} failed: {exc}", flush=True)
            broker.stop()
    restarted.set()
    BENCH_DONE.wait()


def run_schedule(broker: EmbeddedBroker, sink: str, plan: dict, records: int, rng: random.Random) -> dict:
    run = sp.pipeline(broker.bootstrap_servers, sink, records=records, max_offsets=records // 5, idle_ms=3000)
    driver, steps = run.pipeline, STEPS[sink]
    crashed_mid_batch = False
    restarted = None
    if plan["broker_kill"]:
        restarted = threading.Event()
        threading.Thread(target=kill_and_restart, args=(broker, rng.uniform(20, 40), restarted), daemon=True).start()
    for kind, what, batch in plan["crashes"]:
        if kind == "point":
            driver.spec.update(crash_at=steps[what % len(steps)], crash_iteration=batch)
            driver.start()
            driver.wait(600)
        else:
            driver.spec.update(crash_at=None, crash_iteration=None)
            driver.start()
            wait_until(lambda: in_flight(run.checkpoint) or driver.status != "running", 300, 0.05)
            time.sleep(what)
            if driver.status == "running":
                driver.crash()
        crashed_mid_batch |= driver.status == "crashed"
    if restarted and not restarted.wait(300):
        raise RuntimeError("the broker did not come back within 300 s")
    driver.spec.update(crash_at=None, crash_iteration=None)
    restarts = 0
    while driver.status != "finished" and restarts < MAX_RESTARTS:  # the supervisor: restart until done
        driver.start()
        driver.wait(600)
        restarts += 1
    result = run.finish()
    rows = run.batches()
    return {"finished": driver.status == "finished", "duplicates": len({a.value_id for a in result.anomalies
                                                                        if a.name == "duplicate"}),
            "lost": result.count("lost write"), "unprocessed": result.count("unprocessed"),
            "processed": sum(r.once for r in rows), "records": run.records,
            "crashes": sum(e.kind == "crash" for e in run.experiment.history.events()),
            "crashed": crashed_mid_batch, "broker_kill": plan["broker_kill"]}


def main(schedules: int = 20, records: int = 500, seed: int = 1) -> None:
    plans = [schedule(random.Random(seed * 1000 + i), 5) for i in range(schedules)]
    if not any(p["broker_kill"] for p in plans):
        plans[0]["broker_kill"] = True
    totals = {}
    with EmbeddedBroker() as broker:
        for sink in ("B", "A"):
            outcomes = []
            for i, plan in enumerate(plans):
                out = run_schedule(broker, sink, plan, records, random.Random(seed * 7 + i))
                outcomes.append(out)
                print(f"sink {sink} schedule {i + 1:2}: {out}", flush=True)
            totals[sink] = outcomes
    for sink, outs in totals.items():
        print(f"\nsink {sink}: {len(outs)} schedules, {sum(o['records'] for o in outs):,} records, "
              f"{sum(o['crashes'] for o in outs)} driver crashes, {sum(o['broker_kill'] for o in outs)} broker kills; "
              f"duplicates {sum(o['duplicates'] for o in outs)}, lost {sum(o['lost'] for o in outs)}, "
              f"unprocessed {sum(o['records'] - o['processed'] for o in outs)}, "
              f"unfinished {sum(not o['finished'] for o in outs)}; "
              f"schedules with duplicates {sum(o['duplicates'] > 0 for o in outs)}")
    BENCH_DONE.set()
    b = totals["B"]
    assert all(o["duplicates"] == 0 and o["lost"] == 0 and o["processed"] == o["records"] for o in b), "sink B failed"
    assert any(o["duplicates"] for o in totals["A"]), "sink A showed no duplicate: the negative control failed"


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
