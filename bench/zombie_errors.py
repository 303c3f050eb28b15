"""What librdkafka's fenced zombie reports in notebook 02's shared-``transactional.id`` run (issue 48): the claim once
said "its one error is ``_FENCED``" and failed on a loaded hub with ``[('send_failed', '_PURGE_QUEUE'), ('fenced',
'_FENCED')]``. A fatal error purges librdkafka's producer queue (``rd_kafka_set_fatal_error0``, ``rdkafka.c``), so the
zombie's queued B is reported ``_PURGE_QUEUE`` when its delivery report is served before the role sees ``_FENCED``:
timing, which load changes. This runs :func:`labkit.lessons.fencing.zombies` as notebook 02 does (shared
``transactional.id``, librdkafka's and the Java client's zombies at once) ``runs`` times, with ``burners`` busy
processes beside it, and counts librdkafka's outcome under the old claim and the notebook's claim now (the last error
``_FENCED``, any before it ``_PURGE_QUEUE``; the zombie's B never in the log). ``LABKIT_BROKER_HEAP_MB=256`` gives the
broker the hub's small heap.

Run: ``.venv/bin/python bench/zombie_errors.py [runs] [burners]`` (default 10 2; about 30 s a run). Prints one line
per run and the totals; exits 1 if the notebook's claim failed in any run (a run that raised counts as failed).
"""

import subprocess
import sys
from collections import Counter

from labkit.broker import EmbeddedBroker
from labkit.lessons import fencing


def old_claim(errors: list[tuple[str, str]]) -> bool:
    """The claim before issue 48: the zombie's errors are exactly ``_FENCED``."""
    return [error for _, error in errors] == ["_FENCED"]


def new_claim(errors: list[tuple[str, str]]) -> bool:
    """Notebook 02's claim: the last error ``("fenced", "_FENCED")``, every one before it ``("send_failed",
    "_PURGE_QUEUE")``."""
    return bool(errors) and errors[-1] == ("fenced", "_FENCED") and set(errors[:-1]) <= {("send_failed", "_PURGE_QUEUE")}


def main(runs: int, burners: int) -> int:
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(burners)]
    tally: Counter = Counter()
    try:
        with EmbeddedBroker() as broker:
            for n in range(1, runs + 1):
                try:
                    run = fencing.zombies(broker.bootstrap_servers, "transactional.id")["librdkafka"]
                    exp, errors = run["exp"], fencing.zombie_errors(run)
                    in_log = [e for e in exp.history.events() if e.kind == "final_read"
                              and e.isolation_level == "read_uncommitted" and e.value_id == "source-2>out"]
                    outcome = (old_claim(errors), new_claim(errors) and len(in_log) == 1)
                except Exception as exc:  # noqa: BLE001 (a run that raised is a failed run, counted and shown)
                    errors, outcome = [f"RAISED {type(exc).__name__}: {exc}"], (False, False)
                tally["old claim held"] += outcome[0]
                tally["new claim held"] += outcome[1]
                print(f"run {n}: errors {errors}; old claim {'held' if outcome[0] else 'FAILED'}, "
                      f"new claim {'held' if outcome[1] else 'FAILED'}", flush=True)
    finally:
        for proc in busy:
            proc.kill()
    print(f"{runs} runs, {burners} busy processes beside them: the old claim held in {tally['old claim held']}, "
          f"the notebook's claim in {tally['new claim held']}")
    return 0 if tally["new claim held"] == runs else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
