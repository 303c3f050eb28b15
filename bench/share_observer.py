"""The share observer's cost on share-consumer throughput, as a ratio measured in the same run.

A share consumer participant (explicit acknowledgement, ACCEPT) drains a topic of ``records``
records, with a :class:`~labkit.share.observer.ShareObserver` sampling the group every
0.5 s (its default in the lessons is 0.3 s) and without one, in interleaved rounds on one broker.
Throughput = records / (last committed acknowledgement - first delivery), from the history.
Goal: observer on >= 0.9x of observer off.

Run: ``make bench`` (or ``.venv/bin/python bench/share_observer.py [records] [rounds]``).
"""

import statistics
import sys
import tempfile

from labkit.broker import EmbeddedBroker
from labkit.crashlab.experiment import Experiment
from labkit.share.observer import ShareObserver
from labkit.share.group_config import configure_group


def drain(bootstrap: str, folder: str, records: int, observed: bool) -> float:
    """Records/s of one share consumer draining a fresh topic of ``records`` records."""
    exp = Experiment("bench", bootstrap, folder=folder)
    topic, group = exp.topic("in"), f"bench-{exp.run_id}"
    configure_group(bootstrap, group)
    exp.participant("src", "producer", topic=topic, iterations=records // 1000, batch=1000).start().wait(300)
    observer = ShareObserver(bootstrap, exp.history, group, topic, interval_s=0.5).start() if observed else None
    exp.participant("sc", "share_consumer", topic=topic, group_id=group, idle_ms=2000).start().wait(600)
    if observer:
        observer.stop()
    events = exp.history.events()
    first = min(e.mono_ns for e in events if e.kind == "delivered")
    last = max(e.mono_ns for e in events if e.kind == "ack_committed")
    done = sum(e.kind == "ack_committed" and e.error is None for e in events)
    assert done >= records, f"only {done} of {records} acknowledgements committed"
    return records / ((last - first) / 1e9)


def main(records: int = 20_000, rounds: int = 5) -> None:
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as folder:
        drain(broker.bootstrap_servers, folder, 2000, False)  # warm-up: JIT, share coordinator, state topic
        rates = {True: [], False: []}
        for r in range(rounds):
            for observed in ((True, False) if r % 2 else (False, True)):
                rates[observed].append(drain(broker.bootstrap_servers, folder, records, observed))
        on, off = statistics.median(rates[True]), statistics.median(rates[False])
        print(f"share consumer, {records} records, {rounds} interleaved rounds each")
        print(f"  observer off: median {off:,.0f} records/s  {[round(x) for x in rates[False]]}")
        print(f"  observer on:  median {on:,.0f} records/s  {[round(x) for x in rates[True]]}")
        print(f"  ratio on/off: {on / off:.2f}x (goal >= 0.9x)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
