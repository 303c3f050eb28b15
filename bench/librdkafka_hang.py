"""librdkafka's hang after a broker restart (librdkafka issues 5456 and 5511), with and without labkit's
mitigation, on the real broker.

Each run: a KIP-447 transactional processor (batch of 1 record, a 2.5 s hold after producing, so a
transaction is open) is processing 6 inputs when the broker is kill -9'd and restarted 1 s later. The bench
times, from the broker being ready again, the processor's next committed transaction, and reports a run as
stalled when a client call outlived the lab's deadline (15 s) before that: the participant's ``stalled``
event names the call. "off" runs the transactional producer with librdkafka's default
``metadata.recovery.strategy=rebootstrap``; "on" with labkit's default, ``none``.

Run: ``.venv/bin/python bench/librdkafka_hang.py [runs per mode]`` (default 5; about 1 min per run).
"""

import statistics
import sys
import tempfile

from labkit.broker import EmbeddedBroker
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.broker_restart import broker_restart_in_transaction

DEADLINE_MS = 15_000


def main(runs: int) -> None:
    folder = tempfile.mkdtemp(prefix="labkit-hang-")
    results = {"off": [], "on": []}
    with EmbeddedBroker() as broker:
        for i in range(runs):
            for mode in results:  # alternating, so both modes see the same machine load
                exp = Experiment(f"hang-{mode}", broker.bootstrap_servers, folder=folder)
                run = broker_restart_in_transaction(exp, broker, mitigation=mode == "on",
                                                    call_deadline_ms=DEADLINE_MS)["librdkafka"]
                results[mode].append(run)
                print(f"run {i + 1} {mode:>3}: {run['outcome']:<9} recovered in "
                      f"{'-' if run['recovery_s'] is None else format(run['recovery_s'], '.1f') + ' s'}"
                      f"{'; stalled in ' + run['stalled_in'] if run['stalled_in'] else ''}", flush=True)
    for mode, rows in results.items():
        stalled = [r for r in rows if r["stalled_in"]]
        times = [r["recovery_s"] for r in rows if r["recovery_s"] is not None]
        print(f"{mode:>3}: {len(stalled)}/{len(rows)} stalled past {DEADLINE_MS / 1000:g} s "
              f"({', '.join(sorted({r['stalled_in'] for r in stalled})) or 'none'}); recovered "
              f"{len(times)}/{len(rows)}, median {statistics.median(times) if times else float('nan'):.1f} s, "
              f"max {max(times, default=float('nan')):.1f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
