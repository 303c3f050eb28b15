"""A role whose one blocking call outlasts the lab's deadline, with no broker (tests/test_hub_liveview.py): its loop
waits ``wait_s`` seconds inside :meth:`labkit.crashlab.loop.Loop.call`, so the participant's own watchdog writes its
``stalled`` event once ``call_deadline_ms`` passed, as it does for a client call stuck on a broker."""

from __future__ import annotations

import time

from labkit.crashlab.loop import Loop
from labkit.crashlab.registry import Option, Role


def run(loop: Loop) -> None:
    loop.call("wait", time.sleep, timeout_s=loop.spec["wait_s"])


ROLE = Role(name="stall", steps=(), run=run, options={"wait_s": Option(30.0, float, "how long the call waits (s)")})
