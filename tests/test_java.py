"""The Java participant (labkit.crashlab.java, jvm/participant): compiled once, the same history, steps, signals and
stall reports as a Python participant, on the real broker."""

import json
import subprocess
import zipfile
import time
import uuid
from dataclasses import asdict

import pytest

from labkit.broker import EmbeddedBroker
from labkit.broker.settings import FEATURES_BY_VERSION, kafka_version
from labkit.core.history import History
from labkit.core.procs import process_state
from labkit.core.waiting import wait_until
from labkit.crashlab import java
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.loop import EXIT_FAILED, EXIT_FENCED, EXIT_GAVE_UP, FENCED_ERRORS
from labkit.crashlab.participant import Participant
from labkit.kafka.records import committed_offsets, read_topic
from labkit.lessons.isolation import JAVA_TIMED_OUT_COMMIT, timeout_abort


@pytest.fixture
def exp(bootstrap, tmp_path):
    return Experiment("java", bootstrap, folder=tmp_path)


def test_the_participant_is_compiled_once_per_source_and_release():
    folder = java.compiled()
    assert folder.name.startswith("participant-4.4.0-") and (folder / ".complete").exists()
    with zipfile.ZipFile(folder / java.JAR) as jar:  # a jar: class-data sharing cannot map a folder of classes
        assert "labkit/participant/Main.class" in jar.namelist()
    before = (folder / ".complete").stat().st_mtime_ns
    assert java.compiled() == folder and (folder / ".complete").stat().st_mtime_ns == before
    assert java.command()[-1] == java.MAIN


def test_a_client_a_role_or_an_option_lacks_is_refused_before_anything_starts(tmp_path, monkeypatch):
    exp = Experiment("clients", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    share = dict(topic="t", group_id="g")
    with pytest.raises(ValueError, match="renew_ms is not available on 'librdkafka'.*KIP-1222.*java only"):
        exp.participant("s", "share_consumer", renew_ms=1000, **share)
    with pytest.raises(ValueError, match="sink is not available on 'java'"):
        exp.participant("s", "share_consumer", client="java", sink="x.db", **share)
    with pytest.raises(ValueError, match="a producer does not run on 'jvm'; its clients are librdkafka, java"):
        exp.participant("p", "producer", topic="t", client="jvm")
    monkeypatch.setenv("LABKIT_CLIENT", "kafka-python")
    with pytest.raises(ValueError, match="LABKIT_CLIENT='kafka-python' is not a client labkit has"):
        exp.participant("p", "producer", topic="t")
    monkeypatch.setenv("LABKIT_CLIENT", "java")
    assert exp.participant("p", "producer", topic="t").spec["client"] == "java"
    assert exp.participant("e", "tests.echo_role", topic="t", modules_file="m.txt").spec["client"] == "librdkafka"  # it has no Java loop
    p = exp.participant("p2", "producer", topic="t", client="librdkafka")
    with pytest.raises(ValueError, match="renew_ms"):
        p.restart(renew_ms=5)
    assert p.status == "not started"


def test_java_and_python_read_a_history_alike_leaving_out_a_cut_last_line(tmp_path):
    """Both twins' readers (labkit.core.history, History.java's lines() through the compiled participant) take the
    same lines: a line ends at a newline byte only (Jackson writes U+2028 and U+0085 raw inside a string, line breaks
    to Python's str.splitlines), blank lines are skipped, and a last line without its newline (another process
    mid-write, or one SIGKILLed there) is left out."""
    path = tmp_path / "h.jsonl"
    History(path).append("start", "p")
    java_written = {"kind": "failed", "participant": "p", "mono_ns": time.monotonic_ns(), "wall_ms": 1,
                    "error": "IllegalStateException: a\u2028b\u0085c"}
    with open(path, "ab") as f:  # as Jackson writes it: one line, UTF-8, the separators raw
        f.write(json.dumps(java_written, ensure_ascii=False).encode() + b"\n\n")
        f.write(b'{"kind": "send", "participant": "p", "value_id": "p-1')  # cut
    python = [{k: v for k, v in asdict(e).items() if v is not None} for e in History(path).events()]
    out = subprocess.run([*java.command(), "lines", str(path)], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert [json.loads(line) for line in out.stdout.split(b"\n") if line] == python
    assert [e["kind"] for e in python] == ["start", "failed"] and python[1] == java_written


def test_a_java_participant_ends_by_the_fencings_and_exit_codes_its_spec_carries(tmp_path):
    """The Java participant's fenced-error set and exit codes are labkit.crashlab.loop's, handed over in its spec
    (java.ENDINGS): a spec that calls the Java client's ConfigException a fencing, with another exit code, is obeyed.
    A config the Java client refuses (acks=maybe) ends it before anything is contacted."""
    exp = Experiment("endings", "127.0.0.1:1", folder=tmp_path)
    p = exp.participant("bad", "producer", client="java", topic="t", config={"acks": "maybe"})
    assert set(p.spec["fenced_errors"]) == FENCED_ERRORS
    assert (p.spec["exit_fenced"], p.spec["exit_gave_up"], p.spec["exit_failed"]) == (EXIT_FENCED, EXIT_GAVE_UP,
                                                                                       EXIT_FAILED)
    assert exp.participant("py", "producer", client="librdkafka", topic="t").spec.keys().isdisjoint(java.ENDINGS)
    assert p.start().wait(60) == "failed: ConfigException" and p.returncode == EXIT_FAILED
    p.spec.update(fenced_errors=["ConfigException"], exit_fenced=13)
    p.start().wait(60)
    assert p.returncode == 13 and [e.error for e in exp.history.events() if e.kind == "fenced"] == ["ConfigException"]


def test_java_events_are_on_pythons_clock_and_pass_the_checker(bootstrap, exp):
    topic = exp.topic("idem")
    before = time.monotonic_ns()
    p = exp.participant("jp", "producer", client="java", topic=topic, iterations=5, batch=2)
    assert p.start().wait(60) == "finished"
    after = time.monotonic_ns()
    mine = [e for e in exp.history.events() if e.participant == "jp"]
    assert all(before <= e.mono_ns <= after for e in mine)  # System.nanoTime() is CLOCK_MONOTONIC
    assert [e.kind for e in mine].count("ack") == 10 and p.counters()["acked"] == 10
    exp.final_reads(topic)
    assert exp.check(topic).ok
    assert list(read_topic(bootstrap, topic)["value"]) == [f"jp-{n}" for n in range(1, 11)]


def test_java_history_lines_are_utf8_whatever_the_platform_charset(exp, monkeypatch):
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dfile.encoding=ISO-8859-1")  # the JVM's default charset, not UTF-8
    name = "prödücer"  # in the history: the participant, and its value ids
    assert exp.participant(name, "producer", client="java", topic=exp.topic("utf8"), iterations=1).start().wait(60) \
        == "finished"
    assert exp.history.first("ack", name).value_id == f"{name}-1"  # read back by the Python History, as UTF-8


def test_a_java_transaction_crashed_at_a_step_is_aborted_by_the_restart(bootstrap, exp):
    topic = exp.topic("tx")
    p = exp.participant("jt", "producer", client="java", topic=topic, mode="transactional",
                        transactional_id=f"jt-{uuid.uuid4()}", iterations=3, batch=2, crash_at="before_commit",
                        crash_iteration=2)
    assert p.start().wait(60) == "crashed"
    assert exp.history.first("crash", "jt").step == "before_commit" and p.counters()["committed"] == 1
    assert p.restart(crash_at=None, first=100).wait(60) == "finished"
    init = exp.history.first("txn_init", "jt")
    assert (init.state, init.txn, init.outcome) == ("Ongoing", 2, "aborted")
    assert [e.txn for e in exp.history.events() if e.kind == "txn_end" and e.outcome == "committed"] == [1, 3, 4, 5]
    for level in ("read_committed", "read_uncommitted"):
        exp.participant(f"c-{level}", "consumer", client="java", topic=topic, group_id=f"{level}-{exp.run_id}",
                        isolation_level=level, idle_ms=2000).start().wait(60)
    seen = {level: [e.value_id for e in exp.history.events() if e.kind == "consume" and e.isolation_level == level]
            for level in ("read_committed", "read_uncommitted")}
    assert seen["read_committed"] == ["jt-1", "jt-2", *(f"jt-{n}" for n in range(100, 106))]
    assert seen["read_uncommitted"] == ["jt-1", "jt-2", "jt-3", "jt-4", *(f"jt-{n}" for n in range(100, 106))]


def test_a_java_producer_fenced_by_a_newer_instance_ends_fenced(exp):
    topic, tid = exp.topic("fence"), f"jf-{uuid.uuid4()}"
    old = exp.participant("old", "producer", client="java", topic=topic, mode="transactional", transactional_id=tid,
                          iterations=10_000, interval_ms=100).start()
    assert wait_until(lambda: old.counters()["committed"] > 0, 60)
    exp.participant("new", "producer", client="java", topic=topic, mode="transactional", transactional_id=tid,
                    iterations=1).start().wait(60)
    assert old.wait(60) == "fenced"
    # Which error depends on where the old instance is when the new one's InitProducerId aborts its transaction:
    # its next produce or EndTxn is fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH), or, when its EndTxn(commit)
    # reaches the coordinator for the transaction already aborted, INVALID_TXN_STATE, fatal in the Java client's
    # TransactionManager as in notebook 03's timeout abort on Kafka 4.4.0 (seen once, with one core kept busy).
    assert exp.history.first("fenced", "old").error in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE")
    # the status is the process's own exit code, its cause the error it recorded; no failed event beside the fencing
    assert old.returncode == EXIT_FENCED and old.cause == exp.history.first("fenced", "old").error
    assert exp.history.first("failed", "old") is None


@pytest.mark.parametrize("version", [v for v in sorted(FEATURES_BY_VERSION) if v != kafka_version()])
def test_a_java_commit_of_a_transaction_the_coordinator_timed_out_gets_each_releases_error(version, tmp_path,
                                                                                            monkeypatch):
    """Notebook 03 part 3 on a broker of each release but the suite's own, with the Java participant of that release:
    a producer paused past its transaction.timeout.ms resumes and commits the transaction the coordinator aborted.
    Kafka 4.3.2 answers PRODUCER_FENCED (KAFKA-20785, apache/kafka PR 23204), where 4.4.0 answers INVALID_TXN_STATE:
    :data:`labkit.lessons.isolation.JAVA_TIMED_OUT_COMMIT`. The suite's release's answer is notebook 03's own claims
    cell's, which the suite runs under nbval on it (this test's item for it was the same run again)."""
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", version)  # the participant's kafka-clients jar, and the lesson's table
    with EmbeddedBroker(version=version) as other:
        run = timeout_abort(Experiment("timeout", other.bootstrap_servers, folder=tmp_path), client="java")
    assert run["producer"].status == "fenced" and run["epochs"]["after"] == run["epochs"]["before"] + 1, run["epochs"]
    assert run["errors"] == JAVA_TIMED_OUT_COMMIT[version], (
        f"Kafka {version}'s answer to a Java commit of a timed-out transaction is now {run['errors']}: update "
        f"JAVA_TIMED_OUT_COMMIT and notebook 03's part 3, its claims and its summary, and README's 'Two clients' row 03")


def test_java_pause_resume_and_stop_are_real_signals(exp):
    p = exp.participant("js", "producer", client="java", topic=exp.topic("sig"), iterations=100_000,
                        interval_ms=50).start()
    assert wait_until(lambda: p.counters()["acked"] > 0, 60)
    p.pause()
    assert process_state(p.pid) == "T" and p.status == "paused"
    frozen = p.counters()["acked"]
    time.sleep(1)
    assert p.counters()["acked"] == frozen
    p.resume()
    assert wait_until(lambda: p.counters()["acked"] > frozen, 30)
    p.stop()
    assert p.status == "stopped" and exp.history.events()[-1].kind == "stop"


def test_a_java_processor_is_exactly_once_across_a_crash(bootstrap, exp):
    src, out = exp.topic("in", partitions=2), exp.topic("out", partitions=2)
    for part in (0, 1):
        exp.participant(f"src{part}", "producer", topic=src, partition=part, iterations=3).start().wait(60)
    group = f"g-{exp.run_id}"
    proc = exp.participant("jproc", "processor", client="java", topic=src, output_topic=out, group_id=group,
                           transactional_id=f"jproc-{exp.run_id}", crash_at="after_send_offsets", idle_ms=600_000)
    assert proc.start().wait(90) == "crashed"
    assert proc.restart(crash_at=None).wait(120) == "finished"  # caught up long before idle_ms
    assert committed_offsets(bootstrap, group, src) == {0: 3, 1: 3}
    exp.final_reads(src, out)
    result = exp.check(out, src)
    assert result.ok, result.table()
    assert sorted(read_topic(bootstrap, out)["value"]) == sorted(f"src{p}-{n}>out" for p in (0, 1) for n in (1, 2, 3))


def test_a_java_call_stuck_past_the_deadline_is_reported_stalled(broker, exp):
    from labkit.crashlab.proxy import FaultProxy

    with FaultProxy.for_broker(broker) as proxy:
        topic = exp.topic("stall")
        p = Participant("jstuck", "producer", client="java", history=exp.history, bootstrap=proxy.bootstrap_servers,
                        topic=topic, iterations=10_000, interval_ms=50, call_deadline_ms=3000).start()
        assert wait_until(lambda: p.counters()["acked"] > 0, 60)
        proxy.black_hole()
        assert wait_until(lambda: p.status == "stalled", 30, 0.2), p.status
        assert p.stalled_in == "flush"
        assert "deadline of 3 s" in exp.history.first("stalled", "jstuck").error
        p.crash()
        assert p.status == "crashed" and p.cause == "SIGKILL"


def test_a_java_at_least_once_processor_commits_offsets_after_writing(exp):
    src, out = exp.topic("alo-in"), exp.topic("alo-out")
    exp.participant("src", "producer", topic=src, iterations=4).start().wait(60)
    proc = exp.participant("jalo", "processor", client="java", topic=src, output_topic=out, group_id=f"g-{exp.run_id}",
                           transactional=False, idle_ms=4000, batch=1)
    assert proc.start().wait(120) == "finished"
    kinds = [e.kind for e in exp.history.events() if e.participant == "jalo"]
    assert kinds.count("offsets_committed") == 4 and "txn_begin" not in kinds
    assert kinds.index("ack") < kinds.index("offsets_committed")
    exp.final_reads(src, out)
    assert exp.check(out, src).ok


def test_a_paused_java_processor_without_a_rebalance_listener_commits_the_batch_it_lost(exp):
    """A Java processor SIGSTOPped mid-transaction past its session timeout loses its partition to another member
    (the heir), which processes and commits the same records. Resumed, the zombie's consumer, fenced, rejoins: without
    a rebalance listener at once, from its background thread, so the batch's sendOffsetsToTransaction goes out with
    the new member epoch and the broker takes it (it checks the epoch, not the assignment: KAFKA-20191), and every
    record of the batch is written twice; with one (the default), the rejoin waits for the loop's next poll, the
    offsets go out with the old epoch, and the zombie is fenced. Both variants run at once."""
    from labkit.broker.settings import CONSUMER_SESSION_TIMEOUT_MS

    runs = {}
    for listener in (False, True):
        src, out = exp.topic(f"in-{listener}"), exp.topic(f"out-{listener}")
        exp.participant(f"src-{listener}", "producer", topic=src, iterations=10).start().wait(60)
        common = dict(client="java", topic=src, output_topic=out, group_id=f"g-{listener}-{exp.run_id}", batch=10,
                      per_record_ms=300, idle_ms=8000)
        zombie = exp.participant(f"zombie-{listener}", "processor", transactional_id=f"z-{listener}-{exp.run_id}",
                                 rebalance_listener=listener, sleep_at={"after_poll": 3000}, **common).start()
        runs[listener] = (zombie, common, src, out)
    for listener, (zombie, common, *_) in runs.items():
        assert wait_until(lambda: exp.history.first("txn_begin", zombie.name) is not None, 60)
        zombie.pause()  # inside its 3 s window after the poll: outputs not yet produced, the transaction open
        exp.participant(f"heir-{listener}", "processor", transactional_id=f"h-{listener}-{exp.run_id}",
                        **common).start()  # it gets the partition after the session timeout; idle_ms counts from then
    time.sleep(CONSUMER_SESSION_TIMEOUT_MS / 1000 + 2)
    for listener, (zombie, *_) in runs.items():
        assert wait_until(lambda: any(e.kind == "txn_end" and e.outcome == "committed"
                                      and e.participant == f"heir-{listener}" for e in exp.history.events()), 60)
        zombie.resume()
    for listener, (zombie, _common, src, out) in runs.items():
        status = zombie.wait(90)
        exp.participants[f"heir-{listener}"].wait(90)
        exp.final_reads(src, out)
        result = exp.check(out, src)
        written_twice = {a.value_id for a in result.anomalies if a.name == "duplicate"}
        if listener:
            assert status == "fenced" and not written_twice, result.table()
        else:
            assert status == "finished" and written_twice == {f"src-False-{n}>out" for n in range(1, 11)}
            assert exp.history.first("offsets_sent", zombie.name) is not None
