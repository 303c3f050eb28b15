"""The producer role: plain, idempotent (KIP-98's producer id and sequence numbers) or transactional.

Each iteration produces ``batch`` records ``"<name>-<n>"`` to one partition; a transactional producer wraps each
iteration in its own transaction (``begin_transaction`` ... ``commit_transaction``).
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from labkit.core.history import value_id
from labkit.crashlab.loop import Loop, init_transactions
from labkit.crashlab.registry import CLIENTS, Option, Role


def run(loop: Loop) -> None:
    """The producer loop (see the module docstring and :data:`ROLE`'s options)."""
    s = loop.spec
    mode = s["mode"]
    extra = {"enable.idempotence": mode != "plain"}
    if s["max_in_flight"] is not None:
        extra["max.in.flight.requests.per.connection"] = s["max_in_flight"]
    if s["single_record_batches"]:
        extra["batch.num.messages"] = 1
    if mode == "transactional":
        extra["transactional.id"] = s["transactional_id"]
    producer = Producer(loop.client_config(**extra))
    producer.list_topics(s["topic"], timeout=30)  # metadata first, so the loop measures sending only
    if mode == "transactional":
        init_transactions(loop, producer)
    n = s["first"] - 1
    for loop.iteration in range(1, s["iterations"] + 1):
        if loop.stopping:
            break
        if mode == "transactional":
            producer.begin_transaction()
            loop.txn += 1
            loop.log("txn_begin", txn=loop.txn, transactional_id=s["transactional_id"])
        loop.step("before_produce")
        batch = s["batch"]
        loop.send(producer, s["topic"], s["partition"], [value_id(loop.name, n + i) for i in range(1, batch + 1)],
                  s["key"])
        n += batch
        loop.flush(producer)
        loop.step("after_produce")
        if mode == "transactional":
            loop.commit(producer)
        time.sleep(s["interval_ms"] / 1000)
    loop.flush(producer)


def _check(options: dict, _crash_at: str | None) -> None:
    if options.get("max_in_flight") is not None and options["max_in_flight"] < 1:
        raise ValueError(f"max_in_flight must be at least 1, not {options['max_in_flight']}")
    if options.get("mode") == "transactional" and not options.get("transactional_id"):
        raise ValueError("a transactional producer needs transactional_id")


ROLE = Role(
    name="producer",
    steps=("before_produce", "after_produce", "before_commit", "after_commit"),
    options={
        "mode": Option("idempotent", str, "'plain', 'idempotent' (enable.idempotence) or 'transactional'",
                       ("plain", "idempotent", "transactional")),
        "transactional_id": Option(None, (str, type(None)), "transactional.id, for mode 'transactional'"),
        "iterations": Option(10, int, "how many batches (transactions) to produce"),
        "batch": Option(1, int, "records per iteration"),
        "interval_ms": Option(0, int, "pause after each iteration (ms)"),
        "first": Option(1, int, "number of the first value id (\"<name>-<first>\")"),
        "partition": Option(0, int, "the partition written"),
        "key": Option(None, (str, type(None)), "the record key"),
        "max_in_flight": Option(None, (int, type(None)),
                                "max.in.flight.requests.per.connection: Produce requests sent on one connection before "
                                "the first is answered (default: the client's own, librdkafka 1000000 or 5 with "
                                "idempotence, Java 5; with idempotence at most 5 on both: librdkafka CONFIGURATION.md "
                                "enable.idempotence, Java ProducerConfig)"),
        "single_record_batches": Option(False, bool,
                                        "one record per batch, so each Produce request carries one record of the "
                                        "partition (librdkafka batch.num.messages=1; Java batch.size=1: its "
                                        "RecordAccumulator gives a record larger than batch.size a batch of its own)"),
    },
    run=run, check=_check, clients=CLIENTS)
