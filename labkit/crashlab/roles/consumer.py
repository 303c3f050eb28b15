"""The consumer role: a group consumer that records every record it reads and commits after each poll."""

from __future__ import annotations

from labkit.crashlab.loop import GROUP_OPTIONS, IdleClock, Loop, close_consumer, group_consumer, log_consumed
from labkit.crashlab.registry import CLIENTS, Role


def run(loop: Loop) -> None:
    """The consumer loop: poll, record, commit synchronously, until idle (:class:`IdleClock`; see :data:`ROLE`'s
    options)."""
    s = loop.spec
    consumer = group_consumer(loop)
    idle = IdleClock(loop, consumer)
    consumer.subscribe([s["topic"]])
    try:
        while not idle.done():
            msgs = log_consumed(loop, consumer.consume(s["batch"], 0.5), s["isolation_level"])
            if not msgs:
                continue
            loop.iteration += 1
            idle.reset()
            loop.step("after_poll")
            consumer.commit(asynchronous=False)
            loop.log("offsets_committed", topic=s["topic"])
            loop.step("after_commit")
            idle.reset()
    finally:
        close_consumer(consumer)


ROLE = Role(name="consumer", steps=("after_poll", "after_commit"), options=GROUP_OPTIONS, run=run,
            clients=CLIENTS)
