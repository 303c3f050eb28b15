"""The supervisor restarts participants on the real broker; its policy is checked before anything runs; its state
is read whole while its thread acts at full speed (on fake participants)."""

import time
from types import SimpleNamespace

import pytest

from labkit.core.waiting import wait_until
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.supervisor import RestartPolicy, Supervisor


def test_policy_refuses_nonsense_and_backs_off_doubling():
    with pytest.raises(ValueError, match="restarts on crashed, fenced, stalled, not finished"):
        RestartPolicy(on=("finished",))
    with pytest.raises(ValueError, match="max_backoff_ms >= backoff_ms"):
        RestartPolicy(backoff_ms=1000, max_backoff_ms=10)
    policy = RestartPolicy(backoff_ms=500, max_backoff_ms=1500)
    assert [policy.backoff_s(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, 1.5]


def test_restarted_processor_fences_and_aborts_what_it_left_then_finishes(bootstrap, tmp_path):
    exp = Experiment("supervised", bootstrap, folder=tmp_path)
    src, out = exp.topic("input"), exp.topic("output")
    exp.participant("source", "producer", topic=src, iterations=6).start().wait(60)
    proc = exp.participant("processor", "processor", topic=src, output_topic=out, group_id=f"{out}-g",
                           transactional_id=f"{out}-tid", batch=1, idle_ms=15000, crash_at="after_produce",
                           crash_iteration=3)
    with Supervisor() as sup:
        sup.supervise(proc.start(), RestartPolicy(backoff_ms=200))
        assert sup.wait(120) == {"processor": "finished"}
    assert sup.restarts == {"processor": 1} and not sup.gave_up
    exp.final_reads(src, out)
    result = exp.check(out, src)
    assert result.ok and result.count("unprocessed") == 0, result.table()

    events = [e for e in exp.history.events() if e.participant == "processor"]
    kinds = [e.kind for e in events]
    assert kinds.index("crash") < kinds.index("restart") < kinds.index("start", kinds.index("restart"))
    restart = next(e for e in events if e.kind == "restart")
    assert restart.step == "crashed"
    init = next(e for e in events if e.kind == "txn_init")
    # the crashed instance's transaction 3 was Ongoing at the coordinator: init_transactions aborted it
    assert (init.state, init.txn, init.outcome) == ("Ongoing", 3, "aborted") and init.producer_epoch > 0
    ended = [e for e in events if e.kind == "txn_end" and e.txn == 3]
    assert [(e.outcome, e.step) for e in ended] == [("aborted", "init_transactions")]
    # its output was written (read_uncommitted) but never committed; the restart wrote it again, once visible
    reads = exp.history.frame()
    uncommitted = reads[(reads.kind == "final_read") & (reads.isolation_level == "read_uncommitted")].value_id
    assert list(uncommitted).count("source-3>out") == 2


def test_gives_up_at_the_limit(bootstrap, tmp_path):
    exp = Experiment("crashloop", bootstrap, folder=tmp_path)
    p = exp.participant("looping", "producer", topic=exp.topic("t"), crash_at="before_produce")
    with Supervisor() as sup:
        sup.supervise(p.start(), RestartPolicy(backoff_ms=50, limit=2, changes={}))  # keeps crashing
        assert sup.wait(60) == {"looping": "crashed"}
    assert sup.restarts == {"looping": 2} and sup.gave_up == {"looping"}
    kinds = [(e.kind, e.step) for e in exp.history.events() if e.participant == "looping" and e.kind != "start"]
    assert kinds == [("crash", "before_produce"), ("restart", "crashed")] * 2 + [("crash", "before_produce"),
                                                                                ("stop", None)]
    assert "restart limit 2" in exp.history.events()[-1].error


def test_a_participant_the_supervisor_restarted_keeps_running_after_stop(bootstrap, tmp_path):
    """The restarted process was started while the supervisor's thread ran the restart: it outlives that thread
    (stop() ends it), running and writing events on until stopped."""
    exp = Experiment("outlives", bootstrap, folder=tmp_path)
    p = exp.participant("endless", "producer", topic=exp.topic("t"), iterations=100_000, interval_ms=50,
                        crash_at="before_produce", crash_iteration=2)

    def events() -> int:
        return sum(e.participant == "endless" for e in exp.history.events())

    sup = Supervisor().start()
    try:
        sup.supervise(p.start(), RestartPolicy(backoff_ms=50))
        assert wait_until(lambda: sup.restarts == {"endless": 1} and p.status == "running", 120), p.status
        sup.stop()
        before = events()
        assert wait_until(lambda: events() >= before + 5, 120), f"the restarted participant is {p.status}"
        assert p.status == "running"
    finally:
        sup.stop()
        p.stop()


class CrashLoop:
    """A participant that has crashed again as soon as it is started: a fake without a process, so the supervisor's
    thread restarts it as fast as it can. Its history adds ``(kind, participant)`` of each event to ``appended``."""

    status = "crashed"

    def __init__(self, name: str, appended: set) -> None:
        self.name, self.spec = name, {}
        self.history = SimpleNamespace(append=lambda kind, participant, **_: appended.add((kind, participant)))

    def start(self) -> "CrashLoop":
        return self


def test_state_read_while_the_thread_restarts_at_full_speed_is_whole():
    """Fake participants (:class:`CrashLoop`, no process) that crash again at once, a supervisor with no interval nor
    back-off: for two seconds the test supervises a new one after another while the thread restarts them and gives up
    on them, and reads the supervisor's state the while. The thread never meets a participant without its restart
    count, and what is read is whole: no more restarts than the limit, and each participant given up on has its
    ``stop`` event written."""
    history: set = set()
    policy = RestartPolicy(backoff_ms=0, max_backoff_ms=0, limit=2, changes={})
    sup = Supervisor(interval_s=0).start()
    try:
        n, deadline = 0, time.monotonic() + 2
        while time.monotonic() < deadline:
            sup.supervise(CrashLoop(f"p{n}", history), policy)
            n += 1
            assert max(sup.restarts.values()) <= 2
            for name in sup.gave_up:
                assert ("stop", name) in history, f"{name} given up on, its stop event not written"
        sup.wait(10)
    finally:
        sup.stop()  # raises what ended the thread
    assert sup.gave_up == {f"p{i}" for i in range(n)} and set(sup.restarts.values()) == {2}


def test_a_failed_participant_is_restarted_to_the_limit_or_left_failed(bootstrap, tmp_path):
    """A participant that failed (here a config librdkafka refuses: "failed: _INVALID_ARG", not "crashed") is
    restarted like a crashed one by default (systemd's Restart=on-failure), each restart event naming the status, and
    given up on at the limit; with ``on_failed=False`` it is left failed at once, and the supervisor settles."""
    exp = Experiment("failing", bootstrap, folder=tmp_path)
    bad = dict(topic=exp.topic("t"), config={"no.such.property": "1"})
    restarted, left = exp.participant("restarted", "producer", **bad), exp.participant("left", "producer", **bad)
    with Supervisor() as sup:
        sup.supervise(restarted.start(), RestartPolicy(backoff_ms=50, limit=1))
        sup.supervise(left.start(), RestartPolicy(on_failed=False))
        assert sup.wait(60) == {"restarted": "failed: _INVALID_ARG", "left": "failed: _INVALID_ARG"}
    assert sup.restarts == {"restarted": 1, "left": 0} and sup.gave_up == {"restarted"}
    steps = [(e.kind, e.step or e.error) for e in exp.history.events() if e.participant == "restarted"]
    assert steps == [("start", None), ("failed", "_INVALID_ARG"), ("restart", "failed: _INVALID_ARG"), ("start", None),
                     ("failed", "_INVALID_ARG"),
                     ("stop", "supervisor gave up: restart limit 1 reached; restarted failed: _INVALID_ARG")]
    assert [e.kind for e in exp.history.events() if e.participant == "left"] == ["start", "failed"]
    assert RestartPolicy().restarts_on("failed: GROUP_ID_NOT_FOUND") and RestartPolicy().restarts_on("fenced")
    assert not RestartPolicy(on_failed=False).restarts_on("failed: GROUP_ID_NOT_FOUND")
