"""The consumer role: a group consumer that records every record it reads and commits after each poll."""

from __future__ import annotations

import time

from labkit.crashlab.loop import GROUP_OPTIONS, Loop, close_consumer, group_consumer, idle_done, log_consumed
from labkit.crashlab.registry import CLIENTS, Role


def run(loop: Loop) -> None:
    """The consumer loop: poll, record, commit synchronously, until idle (see :data:`ROLE`'s options)."""
    s = loop.spec
    consumer, idle_since = group_consumer(loop), time.monotonic()
    consumer.subscribe([s["topic"]])
    try:
        while not idle_done(loop, idle_since):
            msgs = log_consumed(loop, consumer.consume(s["batch"], 0.5), s["isolation_level"])
            if not msgs:
                continue
            loop.iteration += 1
            idle_since = time.monotonic()
            loop.step("after_poll")
            consumer.commit(asynchronous=False)
            loop.log("offsets_committed", topic=s["topic"])
            loop.step("after_commit")
            idle_since = time.monotonic()
    finally:
        close_consumer(consumer)


ROLE = Role(name="consumer", steps=("after_poll", "after_commit"), options=GROUP_OPTIONS, run=run,
            clients=CLIENTS)
