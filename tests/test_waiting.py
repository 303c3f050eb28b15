import time

import pytest

from labkit.core.waiting import Deadline, wait_for, wait_until


def test_wait_until_returns_whether_it_became_true():
    assert wait_until(lambda: True, 0.1)
    assert not wait_until(lambda: False, 0.2, 0.05)
    calls = iter([False, False, True])
    assert wait_until(lambda: next(calls), 5, 0.01)


def test_wait_until_gives_up_after_its_timeout():
    started = time.monotonic()
    assert not wait_until(lambda: False, 0.3, 0.05)
    assert 0.3 <= time.monotonic() - started < 2


def test_wait_for_names_what_did_not_happen_and_where_to_look():
    wait_for(lambda: True, "never raised")
    with pytest.raises(TimeoutError, match=r"instance-2 never wrote within 0.1 s \(see the experiment's "
                                           r"\*.stderr.log files\)"):
        wait_for(lambda: False, "instance-2 never wrote", 0.1)
    with pytest.raises(TimeoutError, match=r"the broker never started within 0.1 s \(see the broker's server.log\)"):
        wait_for(lambda: False, "the broker never started", 0.1, hint="the broker's server.log")


def test_deadline_counts_down_then_expires():
    deadline = Deadline(0.3)
    assert deadline.timeout_s == 0.3
    assert not deadline.expired()
    assert 0.1 < deadline.remaining_s() <= 0.3
    time.sleep(0.35)
    assert deadline.expired()
    assert deadline.remaining_s() == 0.0
    assert Deadline(0).expired()
