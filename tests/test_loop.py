import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.loop import Fenced, Loop, fatal_error, kafka_error
from labkit.crashlab.registry import load
from labkit.kafka.records import create_topic
from labkit.waiting import wait_for


def test_kafka_error_is_found_in_every_shape_flush_raises():
    fenced = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
    assert kafka_error(fenced) is fenced
    assert kafka_error(KafkaException(fenced)).name() == "_FENCED"
    try:
        try:
            raise KafkaException(fenced)
        except KafkaException as inner:
            raise SystemError("returned a result with an exception set") from inner
    except SystemError as outer:
        assert kafka_error(outer).fatal()
    assert kafka_error(ValueError("not Kafka")) is None


class _LosingProducer(Producer):
    """A producer whose ``flush`` fails as confluent-kafka 2.16's did in CI (notebook 02's zombie): the fatal error
    happened, its exception was cleared by a delivery callback's Python code, and flush raised a bare SystemError."""

    def flush(self, timeout: float = -1) -> int:
        lost = False
        try:
            return super().flush(timeout)
        except:  # noqa: E722: the fatal error, in whatever shape: dropped, as the binding dropped it
            lost = True
        if lost:
            raise SystemError("<method 'flush' of 'cimpl.Producer' objects> returned NULL without setting an exception")


def test_a_fatal_error_the_client_lost_is_read_from_the_producer_and_ends_the_loop_fenced(bootstrap, tmp_path):
    topic, tid = create_topic(bootstrap, "lost-fatal"), f"tid-{uuid.uuid4().hex[:8]}"
    loop = Loop({"name": "zombie", "history": str(tmp_path / "history.jsonl"), "bootstrap": bootstrap})
    zombie = _LosingProducer(loop.client_config(**{"transactional.id": tid}))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    healthy = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{tid}-other"})
    healthy.init_transactions(30)
    healthy.begin_transaction()
    Producer({"bootstrap.servers": bootstrap, "transactional.id": tid}).init_transactions(30)  # fences the zombie
    loop.send(zombie, topic, 0, ["zombie-1"])
    with pytest.raises(Fenced, match="_FENCED"):
        loop.flush(zombie)
    assert [e.error for e in loop.history.events() if e.kind == "fenced"] == ["_FENCED"]
    assert fatal_error(zombie).name() == "_FENCED"
    # a healthy producer in a transaction: no fatal error, and asking did not touch its transaction
    healthy.produce(topic, b"healthy-1")
    assert fatal_error(healthy) is None
    healthy.commit_transaction(30)
    assert fatal_error(Producer({"bootstrap.servers": bootstrap})) is None  # not transactional


def test_every_role_has_named_steps_in_loop_order():
    assert load("producer").steps[0] == "before_produce" and load("processor").steps[-1] == "after_commit"


def test_a_processor_whose_consumer_hits_a_fatal_error_ends_fenced(bootstrap, tmp_path):
    """A fatal consumer error (here FENCED_INSTANCE_ID: another member took this one's group.instance.id; the
    soak met GROUP_ID_NOT_FOUND after a broker restart) ends the processor, so that a supervisor restarts it,
    instead of leaving it polling a dead client."""
    exp = Experiment("fatal", bootstrap, folder=tmp_path)
    src, out, group = exp.topic("input"), exp.topic("output"), f"g-{uuid.uuid4().hex[:8]}"
    exp.participant("source", "producer", topic=src, iterations=2).start().wait(60)
    proc = exp.participant("processor", "processor", topic=src, output_topic=out, group_id=group, batch=1,
                           transactional_id=f"{group}-tid", idle_ms=120_000, stop_when_caught_up=False,
                           group_protocol="classic",
                           config={"group.instance.id": "static-1"}).start()
    commits = lambda: sum(e.kind == "txn_end" and e.outcome == "committed" for e in exp.history.events())  # noqa: E731
    wait_for(lambda: commits() == 2, "the processor's two commits", 60)  # then it polls, idle
    usurper = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": "static-1",
                        "group.protocol": "classic"})
    usurper.subscribe([src])
    try:
        wait_for(lambda: usurper.poll(0.2) is None and proc.status != "running", "the processor to end", 60,
                 interval_s=0)
    finally:
        usurper.close()
    assert proc.status == "fenced"
    fenced = [e for e in exp.history.events() if e.kind == "fenced"]
    assert len(fenced) == 1 and "Static consumer fenced" in fenced[0].error, fenced
