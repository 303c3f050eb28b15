import threading
import time

import pytest

from labkit.core.background import Periodic
from labkit.core.waiting import wait_for


def test_it_runs_every_interval_and_stops_within_the_deadline():
    rounds = []
    p = Periodic("test-periodic", lambda: rounds.append(threading.current_thread().name), 0.01)
    p.start()
    wait_for(lambda: len(rounds) >= 3, "three rounds", 5)
    started = time.monotonic()
    p.stop(timeout_s=2)
    assert time.monotonic() - started < 2 and not p.running
    assert set(rounds) == {"test-periodic"}
    after = len(rounds)
    time.sleep(0.05)
    assert len(rounds) == after
    p.start()  # again, after a stop
    wait_for(lambda: len(rounds) > after, "a round after a restart", 5)
    p.stop()


def test_the_first_and_last_rounds():
    rounds = []
    p = Periodic("test-periodic", lambda: rounds.append(time.monotonic()), 60, first_now=False, last_round=True)
    p.start()
    time.sleep(0.05)
    assert rounds == []  # the first round waits the interval
    p.stop(timeout_s=2)
    assert len(rounds) == 1  # the last round ran on stop
    p = Periodic("test-periodic", lambda: rounds.append(time.monotonic()), 60)
    p.start()
    wait_for(lambda: len(rounds) == 2, "a first round at once", 5)
    p.stop(timeout_s=2)
    assert len(rounds) == 2


def test_starting_twice_and_stopping_unstarted():
    p = Periodic("test-periodic", lambda: None, 60)
    p.stop()  # never started: nothing to wait for
    p.start()
    with pytest.raises(RuntimeError, match="test-periodic is already running"):
        p.start()
    p.stop(timeout_s=2)


def test_a_stuck_round_is_a_timeout():
    release = threading.Event()
    p = Periodic("test-stuck", lambda: release.wait(5), 60)
    p.start()
    with pytest.raises(TimeoutError, match="test-stuck still running 0.1 s after"):
        p.stop(timeout_s=0.1)
    release.set()
    p.stop(timeout_s=2)


def test_an_exception_ends_the_thread_is_reported_and_raised_by_stop(monkeypatch):
    reported = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append((args.thread.name, args.exc_value)))
    calls = []

    def work():
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("broken round")

    p = Periodic("test-failing", work, 0.01)
    p.start()
    wait_for(lambda: not p.running, "the thread ended by its error", 5)
    assert len(calls) == 2
    assert [(name, str(exc)) for name, exc in reported] == [("test-failing", "broken round")]
    assert isinstance(p.error, ValueError)
    with pytest.raises(ValueError, match="broken round"):
        p.stop()
