"""Participants as real processes against the real broker; their status beside a thread that restarts them, on
fake processes."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil
import pytest

from labkit.core.history import History
from labkit.core.procs import process_state
from labkit.core.waiting import wait_until
from labkit.crashlab import participant as participant_module
from labkit.crashlab.check import check
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.loop import EXIT_FAILED, EXIT_FENCED
from labkit.crashlab.participant import Participant, ParticipantStateError
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
    assert psutil.Process(p.pid).status() == psutil.STATUS_STOPPED and history.events()[-1].kind == "pause"
    frozen = p.counters()["acked"]
    time.sleep(1)
    assert p.counters()["acked"] == frozen  # a stopped process does nothing
    with pytest.raises(ParticipantStateError, match="already paused"):
        p.pause()
    p.resume()
    assert wait_until(lambda: p.counters()["acked"] > frozen, 30)
    pid = p.pid
    p.crash()
    assert p.status == "crashed" and not psutil.pid_exists(pid)
    assert (p.returncode, p.cause) == (-signal.SIGKILL, "SIGKILL")  # the OS's wait status: killed by SIGKILL
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
from labkit.core.history import History
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


def _run_cell(kc, code: str, cell_id: str | None = None) -> int:
    """Run ``code`` as one cell in the kernel of ``kc`` (with JupyterLab's ``cellId`` in the request's metadata when
    given, as JupyterLab sends it) and return the number it printed."""
    msg = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                         metadata={"cellId": cell_id} if cell_id else {})
    kc.shell_channel.send(msg)
    printed = []
    while True:
        out = kc.get_iopub_msg(timeout=120)
        if out["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        if out["msg_type"] == "stream":
            printed.append(out["content"]["text"])
        elif out["msg_type"] == "error":
            raise AssertionError("\n".join(out["content"]["traceback"]))
        elif out["msg_type"] == "status" and out["content"]["execution_state"] == "idle":
            return int("".join(printed).split()[-1])


def test_a_rerun_cell_replaces_its_own_participant_and_never_another_cells_of_the_same_names(bootstrap, tmp_path):
    """In a real kernel (started as nbval starts one): a cell that starts a participant, run again, kills the process
    its last run left, by its source (nbval sends no cell id) and by JupyterLab's ``cellId`` (the cell edited between
    runs); another cell's experiment of the same name with a participant of the same name (notebook 04's parts 5 and 6
    both run a ``spark-B`` ``driver``) runs on."""
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, start_new_kernel

    topic = create_topic(bootstrap, "rerun")
    cell = (f"from labkit.crashlab.experiment import Experiment\n"
            f"p = Experiment('spark-B', {bootstrap!r}, folder={str(tmp_path)!r}).participant('driver', 'producer', "
            f"topic={topic!r}, iterations=10_000, interval_ms=50).start()\nprint(p.pid)")
    another_cell = cell + "  # part 6"
    running = lambda pid: psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    km, kc = start_new_kernel(kernel_name=CURRENT_ENV_KERNEL_NAME)
    try:
        first = _run_cell(kc, cell)
        neighbour = _run_cell(kc, another_cell)
        again = _run_cell(kc, cell)
        assert not running(first) and running(again) and running(neighbour), (first, again, neighbour)
        in_lab = _run_cell(kc, cell, cell_id="c-1")
        edited = _run_cell(kc, cell + "  # edited", cell_id="c-1")
        assert not running(in_lab) and running(edited) and running(again) and running(neighbour)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert wait_until(lambda: not any(running(pid) for pid in (again, neighbour, edited)), 30)  # gone with the kernel


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


#: The error each client names for a config it refuses: librdkafka's Producer() raises _INVALID_ARG, Kafka's Java
#: client a ConfigException (not a Kafka protocol error: named by its class).
REFUSED_CONFIG = {"librdkafka": "_INVALID_ARG", "java": "ConfigException"}


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_max_in_flight_reaches_the_client(bootstrap, history, client):
    """The producer's max_in_flight is the client's max.in.flight.requests.per.connection: with idempotence both
    clients refuse more than 5 (librdkafka CONFIGURATION.md, enable.idempotence; Java ProducerConfig), and accept 5
    with one record per batch."""
    topic = create_topic(bootstrap, f"inflight-{client}")
    refused = Participant(f"six-{client}", "producer", client=client, history=history, bootstrap=bootstrap,
                          topic=topic, iterations=1, max_in_flight=6)
    # the client refused the config: the participant failed, named the error, and was not killed by a signal
    assert refused.start().wait(60) == f"failed: {REFUSED_CONFIG[client]}" and refused.returncode == EXIT_FAILED
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
    monkeypatch.setattr(participant_module, "_os_stopped", lambda proc: proc.stopped)  # what the OS would say
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


# -- the status says what happened (issue 35, item 3) -------------------------------------------------------------
def _own(history: History, name: str) -> list[tuple[str, str | None]]:
    """``(kind, error)`` of participant ``name``'s lab and ending events."""
    return [(e.kind, e.error) for e in history.events()
            if e.participant == name and e.kind in ("start", "fenced", "failed", "crash", "gave_up")]


def test_paused_is_what_the_os_reports(bootstrap, history):
    """"paused" is read from the OS, not from a flag pause() set: a process resumed behind the lab's back (SIGCONT
    from elsewhere) is "running" again and resume() refuses; pause() works again after."""
    p = producing("os-paused", bootstrap, history)
    p.pause()
    assert p.status == "paused" and psutil.Process(p.pid).status() == psutil.STATUS_STOPPED
    os.kill(p.pid, signal.SIGCONT)  # not through the lab
    assert wait_until(lambda: psutil.Process(p.pid).status() != psutil.STATUS_STOPPED, 5, 0.01)
    assert p.status == "running"
    with pytest.raises(ParticipantStateError, match="os-paused is running, not paused"):
        p.resume()
    p.pause()
    assert p.status == "paused"
    p.crash()


def test_pause_raises_when_the_process_does_not_stop(bootstrap, history, monkeypatch):
    """pause() waits for the OS to report the process stopped: a SIGSTOP that never arrives (the signal swallowed
    here) is an error naming the participant and the state the OS reports, not a "paused" label and no event."""
    p = producing("unstoppable", bootstrap, history)
    monkeypatch.setattr(participant_module, "SIGNAL_DEADLINE_S", 0.5)
    real_signal = Participant._signal
    monkeypatch.setattr(Participant, "_signal",
                        lambda self, sig, group=True: None if sig == signal.SIGSTOP else real_signal(self, sig, group))
    with pytest.raises(ParticipantStateError, match=r"pause\(\): unstoppable \(pid \d+\) did not stop within 0.5 s of "
                                                    r"SIGSTOP: the OS reports it (running|sleeping|disk-sleep)"):
        p.pause()
    assert p.status == "running" and "pause" not in [e.kind for e in history.events() if e.participant == p.name]
    p.crash()


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_a_bad_config_ends_failed_not_crashed(bootstrap, history, client):
    """A config the client refuses (librdkafka: an unknown property; Java: a bad value, its unknown properties are only
    warned about) is the learner's bug, not a crash: "failed: <error>", from the participant's failed event."""
    bad = {"librdkafka": {"no.such.property": "1"}, "java": {"acks": "maybe"}}[client]
    p = Participant(f"bad-config-{client}", "producer", client=client, history=history, bootstrap=bootstrap,
                    topic=create_topic(bootstrap, f"bad-config-{client}"), config=bad)
    assert p.start().wait(60) == f"failed: {REFUSED_CONFIG[client]}", p.stderr_log.read_text()
    assert p.returncode == EXIT_FAILED and p.cause == REFUSED_CONFIG[client]
    assert _own(history, p.name) == [("start", None), ("failed", REFUSED_CONFIG[client])]


def test_an_exception_in_a_learners_step_ends_failed_with_its_message(bootstrap, tmp_path):
    """notebook 02's exercise runs the learner's function in the processor: an exception there (their bug) ends the
    participant "failed: <type>: <message>", with its traceback in the stderr log; no "fenced", no "crashed"."""
    exp = Experiment("step-bug", bootstrap, folder=tmp_path)
    src, out = exp.topic("in"), exp.topic("out")
    exp.participant("source", "producer", topic=src, iterations=2).start().wait(60)
    step = "def finish_batch(producer, consumer, offsets):\n    raise ValueError('my bug')\n"
    p = exp.participant("proc", "processor", topic=src, output_topic=out, group_id=f"g-{uuid.uuid4().hex[:6]}",
                        transactional_id=f"t-{uuid.uuid4().hex[:6]}", idle_ms=6000,
                        offsets_step={"source": step, "name": "finish_batch"})
    assert p.start().wait(90) == "failed: ValueError: my bug"
    assert _own(exp.history, "proc") == [("start", None), ("failed", "ValueError: my bug")]
    assert "ValueError: my bug" in p.stderr_log.read_text()


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_a_fatal_error_that_is_not_a_fencing_ends_failed(bootstrap, history, client):
    """transaction.timeout.ms above the broker's transaction.max.timeout.ms (60 s in the lab): the coordinator answers
    InitProducerId with INVALID_TRANSACTION_TIMEOUT, fatal on librdkafka (it used to end the participant "fenced") and
    on Java (it used to end it "crashed"). Nothing fenced it: "failed: INVALID_TRANSACTION_TIMEOUT"."""
    p = Participant(f"too-long-{client}", "producer", client=client, history=history, bootstrap=bootstrap,
                    topic=create_topic(bootstrap, f"too-long-{client}"), mode="transactional",
                    transactional_id=f"too-long-{uuid.uuid4().hex[:8]}", config={"transaction.timeout.ms": 120_000})
    assert p.start().wait(60) == "failed: INVALID_TRANSACTION_TIMEOUT", p.stderr_log.read_text()[-2000:]
    assert _own(history, p.name) == [("start", None), ("failed", "INVALID_TRANSACTION_TIMEOUT")]


def test_send_offsets_timing_out_is_a_failure_not_a_fencing(bootstrap, tmp_path):
    """An offsets step whose send_offsets_to_transaction times out met no fencing: the transaction is aborted and the
    processor ends "failed: _TIMED_OUT". The step raises what librdkafka raises when the call's deadline passes (a
    retriable _TIMED_OUT KafkaException): a real 1 ms deadline usually passes, but not always (a run finished)."""
    exp = Experiment("offsets-timeout", bootstrap, folder=tmp_path)
    src, out = exp.topic("in"), exp.topic("out")
    exp.participant("source", "producer", topic=src, iterations=2).start().wait(60)
    step = ("from confluent_kafka import KafkaError, KafkaException\n"
            "def finish_batch(producer, consumer, offsets):\n"
            "    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, 'send_offsets_to_transaction timed out',\n"
            "                                    retriable=True))\n")
    p = exp.participant("proc", "processor", topic=src, output_topic=out, group_id=f"g-{uuid.uuid4().hex[:6]}",
                        transactional_id=f"t-{uuid.uuid4().hex[:6]}", idle_ms=6000,
                        offsets_step={"source": step, "name": "finish_batch"})
    assert p.start().wait(90) == "failed: _TIMED_OUT", p.stderr_log.read_text()[-2000:]
    assert _own(exp.history, "proc") == [("start", None), ("failed", "_TIMED_OUT")]
    assert exp.history.first("failed", "proc").step == "your finish_batch"
    assert [e.outcome for e in exp.history.events() if e.kind == "txn_end" and e.participant == "proc"] == ["aborted"]


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_a_producer_fenced_by_a_second_instance_ends_fenced_with_the_error(bootstrap, history, client):
    """A second instance with the same transactional.id bumps the epoch (KIP-98): the first ends "fenced", its fenced
    event naming Kafka's error (librdkafka: its fatal _FENCED; Java: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, or
    INVALID_TXN_STATE when its EndTxn reached the coordinator for the transaction the new instance aborted)."""
    topic, tid = create_topic(bootstrap, f"fence-{client}"), f"fence-{uuid.uuid4().hex[:8]}"
    old = Participant(f"old-{client}", "producer", client=client, history=history, bootstrap=bootstrap, topic=topic,
                      mode="transactional", transactional_id=tid, iterations=10_000, interval_ms=100).start()
    assert wait_until(lambda: old.counters()["committed"] > 0, 60)
    Participant(f"new-{client}", "producer", client=client, history=history, bootstrap=bootstrap, topic=topic,
                mode="transactional", transactional_id=tid, iterations=1).start().wait(60)
    assert old.wait(60) == "fenced" and old.returncode == EXIT_FENCED
    fenced = [error for kind, error in _own(history, old.name) if kind == "fenced"]
    assert len(fenced) == 1 and fenced[0] in {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH",
                                              "INVALID_TXN_STATE"}, fenced
    assert old.cause == fenced[0] and "failed" not in [kind for kind, _ in _own(history, old.name)]
