"""The soak of issue 11 (Kafka's ``transactions_test`` is the model): randomized fault schedules over KIP-447
processors under a supervisor (processor SIGKILL, SIGSTOP past the session timeout, broker kill -9 + restart
at random moments while they process), each ending once the group caught up; then the checker. The same
schedules run with at-least-once processors as the negative control (they must show duplicates).

Prints one line per schedule, then for each mode: schedules, records, faults, duplicates, lost writes (those to
Kafka's marker race apart), unprocessed, recovery after a broker restart (median, max), and stalls with the call.

Run: ``.venv/bin/python bench/soak.py [schedules] [records per schedule] [control every k-th schedule]``
(default 100 1000 1: about 2 minutes per schedule and mode on a 2-core machine).
"""

import sys
import tempfile

from labkit.broker import EmbeddedBroker
from labkit.crashlab.soak import run_schedule, summary


def main(schedules: int, records: int, control_every: int) -> None:
    folder = tempfile.mkdtemp(prefix="labkit-soak-")
    results = {"KIP-447": [], "at-least-once": []}
    with EmbeddedBroker() as broker:
        for seed in range(schedules):
            for mode, transactional in (("KIP-447", True), ("at-least-once", False)):
                if not transactional and seed % control_every:
                    continue
                r = run_schedule(broker, folder, seed, records=records, transactional=transactional)
                results[mode].append(r)
                print(f"{seed:3d} {mode:>13}: {','.join(r.faults):<20} {r.counts['duplicate']:4d} dup "
                      f"{r.counts['lost write']:3d} lost ({r.race_lost} race) {r.counts['unprocessed']:3d} unprocessed, "
                      f"{r.restarts} restarts, recovery {[round(s, 1) for s in r.recovery_s]}", flush=True)
    for mode, rows in results.items():
        print(f"{mode}: {summary(rows)}")
        if mode == "at-least-once":
            print(f"  schedules with duplicates: {sum(r.counts['duplicate'] > 0 for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]] + [100, 1000, 1][len(sys.argv) - 1:]
    main(*args[:3])
