"""Participants as real processes against the real broker; their status beside a thread that restarts them, on
fake processes."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from labkit.waiting import wait_until
from labkit.crashlab import participant as participant_module
from labkit.crashlab.check import check
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import Participant, ParticipantStateError
from labkit.history import History
from labkit.procs import process_state
from labkit.kafka.records import committed_offsets, create_topic, read_topic


def producing(name, bootstrap, history):
    """A producer participant that keeps writing (one record every 50 ms) and has had a record acked."""
    p = Participant(name, "producer", history=history, bootstrap=bootstrap, topic=create_topic(bootstrap, name),
                    iterations=10_000, interval_ms=50).start()
    assert wait_until(lambda: p.counters()["acked"] > 0, 30)
    return p


@pytest.fixture
def exp(bootstrap, tmp_path):
    return Experiment("t", bootstrap, folder=tmp_path)


@pytest.fixture
def history(exp):
    return exp.history


def test_idempotent_producer_writes_everything_once(bootstrap, history, exp):
    topic = create_topic(bootstrap, "p")
    p = Participant("p1", "producer", history=history, bootstrap=bootstrap, topic=topic, iterations=5, batch=2)
    assert p.start().wait(60) == "finished"
    assert p.counters()["acked"] == 10
    exp.final_reads(topic)
    result = check(history.events(), output_topic=topic)
    assert result.ok, result.table()
    assert list(read_topic(bootstrap, topic)["value"]) == [f"p1-{n}" for n in range(1, 11)]


def test_crash_before_commit_leaves_that_transaction_out(bootstrap, history, exp):
    topic = create_topic(bootstrap, "tx")
    p = Participant("tx1", "producer", history=history, bootstrap=bootstrap, topic=topic, mode="transactional",
                    transactional_id=f"tx-{uuid.uuid4()}", iterations=3, batch=2, crash_at="before_commit",
                    crash_iteration=2, config={"transaction.timeout.ms": 2000})
    assert p.start().wait(60) == "crashed"
    assert [e.step for e in history.events() if e.kind == "crash"] == ["before_commit"]
    assert p.counters()["committed"] == 1
    exp.final_reads(topic)  # the coordinator aborts txn 2 after 2 s
    assert list(read_topic(bootstrap, topic)["value"]) == ["tx1-1", "tx1-2"]
    assert check(history.events(), output_topic=topic).ok


def test_pause_resume_crash_are_real_signals(bootstrap, history):
    p = producing("slow", bootstrap, history)
    p.pause()
    assert p.status == "paused" and process_state(p.pid) == "T"
    frozen = p.counters()["acked"]
    time.sleep(1)
    assert p.counters()["acked"] == frozen  # a stopped process does nothing
    with pytest.raises(ParticipantStateError, match="already paused"):
        p.pause()
    p.resume()
    assert wait_until(lambda: p.counters()["acked"] > frozen, 30)
    pid = p.pid
    p.crash()
    assert p.status == "crashed" and not os.path.exists(f"/proc/{pid}")
    for action in (p.pause, p.crash):
        with pytest.raises(ParticipantStateError, match="slow is crashed; restart"):
            action()
    with pytest.raises(ParticipantStateError, match="not paused"):
        p.resume()
    p.restart(iterations=2, first=10_000)
    assert p.wait(60) == "finished"


def test_graceful_stop(bootstrap, history):
    p = producing("s", bootstrap, history)
    p.stop()
    assert p.status == "stopped" and history.events()[-1].kind == "stop"


def test_wrong_crash_point_lists_the_steps(history):
    with pytest.raises(ValueError, match="'before_poll' is not a step of a processor; its steps are after_poll, "
                                         "after_produce, after_send_offsets, before_commit, after_commit"):
        Participant("x", "processor", history=history, bootstrap="127.0.0.1:1", crash_at="before_poll")
    with pytest.raises(ValueError, match="unknown role 'broker'"):
        Participant("x", "broker", history=history, bootstrap="127.0.0.1:1")


def test_processor_copies_input_exactly_once_and_stops_once_caught_up(bootstrap, history, exp):
    src, out = create_topic(bootstrap, "in", partitions=2), create_topic(bootstrap, "out", partitions=2)
    for p in (0, 1):
        Participant(f"src{p}", "producer", history=history, bootstrap=bootstrap, topic=src, partition=p,
                    iterations=3).start().wait(60)
    group = f"g-{uuid.uuid4()}"
    spec = dict(history=history, bootstrap=bootstrap, topic=src, output_topic=out, group_id=group, idle_ms=600_000)
    proc = Participant("proc", "processor", transactional_id=f"t-{uuid.uuid4()}", **spec).start()
    # the control: the same processor in the same group, told to wait for more input
    waiting = Participant("waiting", "processor", transactional_id=f"t-{uuid.uuid4()}", stop_when_caught_up=False,
                          **spec).start()
    assert proc.wait(90) == "finished"  # long before its 600 s idle limit: the group committed all 6 inputs
    assert waiting.status == "running"
    waiting.stop()
    assert committed_offsets(bootstrap, group, src) == {0: 3, 1: 3}
    exp.final_reads(src)
    exp.final_reads(out)
    result = check(history.events(), output_topic=out, input_topic=src)
    assert result.ok, result.table()
    assert sorted(read_topic(bootstrap, out)["value"]) == sorted(f"src{p}-{n}>out" for p in (0, 1) for n in (1, 2, 3))


CHILD = """
import sys
from labkit.history import History
from labkit.crashlab.participant import Participant
p = Participant("orphan", "producer", history=History(sys.argv[1]), bootstrap=sys.argv[2], topic=sys.argv[3],
                iterations=100000, interval_ms=100).start()
print(p.pid, flush=True)
import os, signal
if sys.argv[4] == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_no_participant_outlives_its_kernel(bootstrap, tmp_path, how):
    topic = create_topic(bootstrap, "orphan")
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "h.jsonl"), bootstrap, topic, how],
                          capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.split()[0])
    assert wait_until(lambda: not os.path.exists(f"/proc/{pid}") or process_state(pid) == "Z", 10)


def test_rerunning_a_cell_replaces_the_old_process_of_that_experiment_only(bootstrap, tmp_path):
    topic = create_topic(bootstrap, "rerun")
    endless = dict(topic=topic, iterations=10_000, interval_ms=50)
    first = Experiment("cell", bootstrap, folder=tmp_path).participant("same", "producer", **endless).start()
    other = Experiment("other-cell", bootstrap, folder=tmp_path).participant("same", "producer", **endless).start()
    old_pid = first.pid
    rerun = Experiment("cell", bootstrap, folder=tmp_path)  # the cell again: a new run of the same experiment
    second = rerun.participant("same", "producer", topic=topic, iterations=1).start()
    assert first.status == "crashed" and not os.path.exists(f"/proc/{old_pid}")
    assert second.wait(60) == "finished"
    assert other.status == "running"  # another experiment's participant of the same name runs on
    other.stop()


def test_at_least_once_processor_commits_offsets_after_writing(bootstrap, history, exp):
    src, out = create_topic(bootstrap, "in"), create_topic(bootstrap, "out")
    Participant("src", "producer", history=history, bootstrap=bootstrap, topic=src, iterations=4).start().wait(60)
    proc = Participant("alo", "processor", history=history, bootstrap=bootstrap, topic=src, output_topic=out,
                       group_id=f"g-{uuid.uuid4()}", transactional=False, idle_ms=4000, batch=1)
    assert proc.start().wait(120) == "finished"
    kinds = [e.kind for e in history.events() if e.participant == "alo"]
    assert kinds.count("offsets_committed") == 4 and "txn_begin" not in kinds
    exp.final_reads(src, out)
    assert exp.check(out, src).ok


def test_a_restarted_transactional_producer_numbers_its_transactions_on(bootstrap, history):
    topic = create_topic(bootstrap, "txn-numbers")
    p = Participant("numbered", "producer", history=history, bootstrap=bootstrap, topic=topic, mode="transactional",
                    transactional_id=f"n-{uuid.uuid4()}", iterations=2)
    p.start().wait(60)
    p.restart(first=3).wait(60)
    ends = [e.txn for e in history.events() if e.participant == "numbered" and e.kind == "txn_end"]
    assert ends == [1, 2, 3, 4]


def test_a_call_stuck_past_the_deadline_is_reported_stalled(broker, history):
    """The broker stops answering (a black-holed proxy): the producer's flush(30) blocks, and after the lab's
    deadline (here 3 s) the participant says it is stalled, and in which call, in its status, its panel
    and the history."""
    from labkit.crashlab.panel import ParticipantPanel
    from labkit.crashlab.proxy import FaultProxy

    with FaultProxy.for_broker(broker) as proxy:
        topic = create_topic(broker.bootstrap_servers, "stall")
        p = Participant("stuck", "producer", history=history, bootstrap=proxy.bootstrap_servers, topic=topic,
                        iterations=10_000, interval_ms=50, call_deadline_ms=3000,
                        config={"message.timeout.ms": 60_000}).start()
        assert wait_until(lambda: p.counters()["acked"] > 0, 30)
        proxy.black_hole()
        assert wait_until(lambda: p.status == "stalled", 20, 0.2), p.status
        assert p.stalled_in == "flush"
        stalled = [e for e in history.events() if e.kind == "stalled"]
        assert stalled[0].step == "flush" and "deadline of 3 s" in stalled[0].error
        panel = ParticipantPanel(p)
        assert "stalled in flush" in panel.status.value
        p.crash()
        assert p.status == "crashed" and p.stalled_in is None


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_max_in_flight_reaches_the_client(bootstrap, history, client):
    """The producer's max_in_flight is the client's max.in.flight.requests.per.connection: with idempotence both
    clients refuse more than 5 (librdkafka CONFIGURATION.md, enable.idempotence; Java ProducerConfig), and accept 5
    with one record per batch."""
    topic = create_topic(bootstrap, f"inflight-{client}")
    refused = Participant(f"six-{client}", "producer", client=client, history=history, bootstrap=bootstrap,
                          topic=topic, iterations=1, max_in_flight=6)
    assert refused.start().wait(60) == "crashed"
    assert "max.in.flight" in refused.stderr_log.read_text(), refused.stderr_log.read_text()  # librdkafka's alias
    five = Participant(f"five-{client}", "producer", client=client, history=history, bootstrap=bootstrap, topic=topic,
                       iterations=2, batch=5, max_in_flight=5, single_record_batches=True)
    assert five.start().wait(60) == "finished" and five.counters()["acked"] == 10
    assert list(read_topic(bootstrap, topic)["value"]) == [f"five-{client}-{n}" for n in range(1, 11)]


def test_a_producer_refuses_max_in_flight_below_one(history):
    with pytest.raises(ValueError, match="max_in_flight must be at least 1, not 0"):
        Participant("p", "producer", history=history, bootstrap="127.0.0.1:1", topic="t", max_in_flight=0)


class FakeProcess:
    """A process that is not there (``subprocess.Popen``'s part a participant uses): alive until killed, stopped
    when SIGSTOPped. Each poll notes, in the polling thread, which process it was."""

    polled = threading.local()

    def __init__(self, *args, **kwargs) -> None:
        self.pid, self.returncode, self.stopped = 2 ** 22 + 1, None, False  # above Linux's highest pid

    def poll(self) -> int | None:
        FakeProcess.polled.process = self
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode


def fake_signal(participant: Participant, sig: int, group: bool = True) -> None:
    if sig == signal.SIGKILL:
        participant._proc.returncode = -9
    elif sig == signal.SIGSTOP:
        participant._proc.stopped = True


def test_status_read_while_a_thread_restarts_at_full_speed_is_whole(monkeypatch, tmp_path):
    """Fake processes (:class:`FakeProcess`, signals to them faked) so that a thread can pause, crash and restart a
    participant as fast as it can, as a learner's Pause and Crash and a supervisor's restart do, while the test reads
    its status for two seconds: "paused" is only ever said of a process that was paused, never of the new process
    of a restart (started while the flag the pause left was still set)."""
    monkeypatch.setattr(subprocess, "Popen", FakeProcess)
    monkeypatch.setattr(Participant, "_signal", fake_signal)
    monkeypatch.setattr(participant_module, "_LIVE", {})
    p = Participant("fake", "producer", history=History(tmp_path / "h.jsonl"), bootstrap="127.0.0.1:1",
                    topic="t").start()
    done, rounds = threading.Event(), []

    def restart_at_full_speed() -> None:
        while not done.is_set():
            p.pause()
            p.crash()
            p.start()
            rounds.append(1)
        p.crash()

    thread = threading.Thread(target=restart_at_full_speed)
    thread.start()
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            status = p.status
            assert status != "paused" or FakeProcess.polled.process.stopped, "a running process said paused"
    finally:
        done.set()
        thread.join()
    assert len(rounds) > 10
