import pytest

from labkit.waiting import wait_for, wait_until


def test_wait_until_returns_whether_it_became_true():
    assert wait_until(lambda: True, 0.1)
    assert not wait_until(lambda: False, 0.2, 0.05)
    calls = iter([False, False, True])
    assert wait_until(lambda: next(calls), 5, 0.01)


def test_wait_for_names_what_did_not_happen():
    wait_for(lambda: True, "never raised")
    with pytest.raises(TimeoutError, match="instance-2 never wrote within 0.1 s"):
        wait_for(lambda: False, "instance-2 never wrote", 0.1)
