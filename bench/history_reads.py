"""A participant's status poll against its history, as a ratio against a full read, measured in the same run.

A supervisor polls each participant's status every 0.1 s and a live timeline redraws every second; each asks the
history for its events. :meth:`labkit.core.history.History.events` parses only the lines appended since its last call;
the baseline is a fresh ``History`` on the same file, which parses it whole (what every call did before).
Goal: a poll that finds one new event in a 6,100-event history at least 50x cheaper than the full read.

Run: ``make bench`` (or ``.venv/bin/python bench/history_reads.py [events] [polls]``).
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from labkit.core.history import History


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(events: int = 6100, polls: int = 20) -> None:
    history = History(Path(tempfile.mkdtemp(prefix="labkit-bench-")) / "h.jsonl")
    for i in range(events):
        history.append("send", "p", value_id=f"p-{i}", topic="t", partition=0)
    history.events()
    full, poll = [], []
    for _ in range(polls):
        history.append("ack", "p", value_id="p-1", topic="t", partition=0, offset=1)
        full.append(timed(lambda: History(history.path).events()))
        poll.append(timed(history.events))
    f, p = statistics.median(full), statistics.median(poll)
    print(f"history of {events:,} events, one new per poll (median of {polls}): full read {f * 1000:.1f} ms, "
          f"incremental poll {p * 1000:.2f} ms: {f / p:.0f}x cheaper (goal >= 50x)")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
