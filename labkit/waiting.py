"""Waiting for a condition, by polling."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Call ``predicate()`` every ``interval_s`` seconds until it is true or ``timeout_s`` passes.
    Returns whether it became true."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def wait_for(predicate: Callable[[], object], what: str, timeout_s: float = 60.0, interval_s: float = 0.05) -> None:
    """Like :func:`wait_until`, but a timeout is an error.

    Raises:
        TimeoutError: "<what> within <timeout> s", naming where to look next.
    """
    if not wait_until(predicate, timeout_s, interval_s):
        raise TimeoutError(f"{what} within {timeout_s:g} s (see the experiment's *.stderr.log files)")
