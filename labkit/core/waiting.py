"""Wait for a condition by polling, within a deadline.

Also the deadlines of loops that do work each round."""

from __future__ import annotations

import time
from collections.abc import Callable


class Deadline:
    """A moment ``timeout_s`` seconds after this object was made, on the monotonic clock. For a loop that does
    work each round and may need the time left (as a client call's timeout); :func:`wait_until` when a
    predicate is all there is."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._at = time.monotonic() + timeout_s

    def remaining_s(self) -> float:
        """Seconds left, 0.0 once expired."""
        return max(0.0, self._at - time.monotonic())

    def expired(self) -> bool:
        """Whether the moment has come."""
        return time.monotonic() >= self._at


def wait_until(predicate: Callable[[], object], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Call ``predicate()`` every ``interval_s`` seconds until it is true or ``timeout_s`` seconds pass (it is
    called once more at the end). Returns whether it became true; raises what ``predicate`` raises."""
    deadline = Deadline(timeout_s)
    while not predicate():
        if deadline.expired():
            return False
        time.sleep(interval_s)
    return True


def wait_for(predicate: Callable[[], object], what: str, timeout_s: float = 60.0, interval_s: float = 0.05,
             hint: str = "the experiment's *.stderr.log files") -> None:
    """Like :func:`wait_until`, but a timeout is an error.

    Args:
        hint: what to look at when it times out: by default the participants' logs; e.g. "the broker's
            server.log" for a wait on the broker.
    Raises:
        TimeoutError: "<what> within <timeout_s> s (see <hint>)".
    """
    if not wait_until(predicate, timeout_s, interval_s):
        raise TimeoutError(f"{what} within {timeout_s:g} s (see {hint})")
