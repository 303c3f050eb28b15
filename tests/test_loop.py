import time
import traceback
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from labkit.broker.settings import CONSUMER_SESSION_TIMEOUT_MS, LAB_SETTINGS
from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.loop import FENCED_ERRORS, Fenced, Loop, error_name, fatal_error, is_fencing, kafka_error
from labkit.crashlab.registry import CLIENTS, load
from labkit.kafka.records import committed_offsets, create_topic, high_watermarks


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
    with pytest.raises(Fenced, match="_FENCED") as fenced:
        loop.flush(zombie)
    assert [e.error for e in loop.history.events() if e.kind == "fenced"] == ["_FENCED"]
    assert fatal_error(zombie).name() == "_FENCED"
    # a healthy producer in a transaction: no fatal error, and asking did not touch its transaction
    healthy.produce(topic, b"healthy-1")
    assert fatal_error(healthy) is None
    healthy.commit_transaction(30)
    assert fatal_error(Producer({"bootstrap.servers": bootstrap})) is None  # not transactional
    # Release both producers: the fatal error's tracebacks hold them (the zombie as ``self`` in its flush, the healthy
    # one as a local here) and something out of the garbage collector's sight holds those tracebacks; left, they
    # outlived the test and retried the worker's stopped session broker, a page of "Connection refused" per run.
    error: BaseException | None = fenced.value
    while error is not None:
        traceback.clear_frames(error.__traceback__)
        error = error.__cause__ or error.__context__
    del zombie, healthy


def test_the_producer_starts_at_before_produce_and_the_processor_ends_at_after_commit():
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
    assert proc.status == "fenced" and proc.cause == "FENCED_INSTANCE_ID"
    fenced = [e for e in exp.history.events() if e.kind == "fenced"]
    # Kafka's name of the cause, not the text of librdkafka's _FATAL error (the text goes to the stderr log)
    assert [e.error for e in fenced] == ["FENCED_INSTANCE_ID"], fenced
    assert "Static consumer fenced" in proc.stderr_log.read_text()


def _holder(exp: Experiment, client: str, topic: str, group: str):
    """A consumer participant of ``group`` that has taken ``topic``'s records and holds its one partition: it waits
    60 s after the poll, before it commits."""
    a = exp.participant("holder", "consumer", client=client, topic=topic, group_id=group, idle_ms=60_000,
                        sleep_at={"after_poll": 60_000}).start()
    wait_for(lambda: exp.history.first("consume", "holder") is not None, "the holder's first record", 60)
    return a


@pytest.mark.parametrize("client", CLIENTS)
def test_idle_ms_counts_from_the_assignment_not_while_a_paused_member_holds_the_partition(bootstrap, tmp_path, client):
    """A consumer started while a SIGSTOPped member holds the partition is assigned it once that member's session
    times out; its idle_ms (2 s, far below the session timeout) counts from then, so it reads every record."""
    exp = Experiment("heir", bootstrap, folder=tmp_path)
    topic, group = exp.topic("in"), f"g-{uuid.uuid4().hex[:8]}"
    exp.participant("src", "producer", topic=topic, iterations=4).start().wait(60)
    holder = _holder(exp, client, topic, group)
    holder.pause()
    paused = time.monotonic_ns()
    heir = exp.participant("heir", "consumer", client=client, topic=topic, group_id=group, idle_ms=2000).start()
    try:
        assert heir.wait(120) == "finished"
    finally:
        holder.crash()
    took = [e for e in exp.history.events() if e.kind == "consume" and e.participant == "heir"]
    assert [e.value_id for e in took] == [f"src-{n}" for n in range(1, 5)]  # none committed by the holder
    # the session timed out first: at most one heartbeat interval after the last heartbeat before the pause
    heartbeat_ms = int(LAB_SETTINGS["group.consumer.heartbeat.interval.ms"])
    assert took[0].mono_ns - paused >= (CONSUMER_SESSION_TIMEOUT_MS - heartbeat_ms) * 1e6


@pytest.mark.parametrize("client", CLIENTS)
def test_a_consumer_never_assigned_a_partition_gives_up_after_assignment_timeout_ms(bootstrap, tmp_path, client):
    """A second member of a one-partition group never gets the partition while the first holds it: it ends after
    assignment_timeout_ms, not after idle_ms and not never, as "gave up", its gave_up event saying why."""
    exp = Experiment("unassigned", bootstrap, folder=tmp_path)
    topic, group = exp.topic("in"), f"g-{uuid.uuid4().hex[:8]}"
    exp.participant("src", "producer", topic=topic, iterations=1).start().wait(60)
    holder = _holder(exp, client, topic, group)
    second = exp.participant("second", "consumer", client=client, topic=topic, group_id=group, idle_ms=1000,
                             assignment_timeout_ms=6000)
    started = time.monotonic()
    try:
        assert second.start().wait(60) == "gave up"
    finally:
        holder.crash()
    assert time.monotonic() - started >= 6
    [gave_up] = [e for e in exp.history.events() if e.participant == "second" and e.kind == "gave_up"]
    assert gave_up.error == f"no partition of {topic} was assigned within assignment_timeout_ms (6000 ms)"
    assert not any(e.participant == "second" and e.kind in ("consume", "finished") for e in exp.history.events())


@pytest.mark.parametrize("client", CLIENTS)
def test_a_processor_stops_caught_up_on_an_input_that_ends_with_a_transaction_marker(bootstrap, tmp_path, client):
    """Its input written in transactions ends with a COMMIT marker: the committed offset stops one below the high
    watermark, and the processor's consumer position, past the marker, tells it caught up long before idle_ms."""
    exp = Experiment("marker", bootstrap, folder=tmp_path)
    src, out, group = exp.topic("in", partitions=2), exp.topic("out", partitions=2), f"g-{uuid.uuid4().hex[:8]}"
    for part in (0, 1):
        exp.participant(f"src{part}", "producer", topic=src, partition=part, mode="transactional", iterations=2,
                        batch=2, transactional_id=f"{group}-src{part}").start().wait(60)
    proc = exp.participant("proc", "processor", client=client, topic=src, output_topic=out, group_id=group,
                           transactional_id=f"{group}-proc", idle_ms=600_000)
    assert proc.start().wait(120) == "finished"
    assert high_watermarks(bootstrap, src) == {0: 6, 1: 6}  # 2 transactions of 2 records and a marker each
    assert committed_offsets(bootstrap, group, src) == {0: 5, 1: 5}  # after the last record, below the last marker
    exp.final_reads(src, out)
    result = exp.check(out, src)
    assert result.ok and result.count("unprocessed") == 0, result.table()


def test_fencing_is_a_current_epoch_or_membership_lost_and_nothing_else():
    """The errors that mean a newer instance owns the producer epoch or the group membership are fencings, in either
    client's naming; a fatal error of another kind, a timeout, an unavailable coordinator are not."""
    for name in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE", "FENCED_INSTANCE_ID",
                 "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH", "FENCED_MEMBER_EPOCH",
                 "CommitFailedException(ILLEGAL_GENERATION)"):
        assert is_fencing(name), name
    for name in ("INVALID_TRANSACTION_TIMEOUT", "_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE", "GROUP_ID_NOT_FOUND",
                 "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "_INVALID_ARG", "ValueError: my bug", "ConfigException",
                 "CommitFailedException(REBALANCE_IN_PROGRESS)", None, ""):
        assert not is_fencing(name), name
    assert len(FENCED_ERRORS) == 9


def test_a_consumers_fatal_error_is_named_by_its_cause():
    """confluent-kafka 2.16 gives a consumer's fatal error as code _FATAL with the cause in its text only: the history
    names the cause (librdkafka's description of each code identifies it)."""
    def fatal(text: str) -> KafkaError:
        return KafkaError(KafkaError._FATAL, f"Fatal consumer error: {text}", fatal=True)

    static = KafkaError(KafkaError.FENCED_INSTANCE_ID).str()  # "Broker: Static consumer fenced by other consumer ..."
    assert error_name(fatal(static)) == "FENCED_INSTANCE_ID"
    assert error_name(fatal(KafkaError(KafkaError.GROUP_ID_NOT_FOUND).str())) == "GROUP_ID_NOT_FOUND"
    assert error_name(fatal("something librdkafka never said")) == "_FATAL"
    assert error_name(KafkaError(KafkaError._FENCED)) == "_FENCED"
