"""Tell whether a notebook runs under the test runner or in a learner's hands.

Some cells exist for CI only: they press a playground's buttons through the panel's own functions
(``panel.press(...)``, ``panel.close()``) so that nbval exercises the playground headless. In a learner's Run All
they must leave the playground alone, or the learner never gets to play. Such a cell asks :func:`under_test`; so does
a claims cell, for the assertions on what that cell did.

The test run says so in the environment: ``LABKIT_CI=1``, set by ``make test`` and by the repository's
``conftest.py`` (``pytest_configure``), so every kernel nbval starts inherits it. The lab (``make lab``) does not
set it.

:func:`stop_on_sigterm` makes a SIGTERM (``timeout``, a CI job's time limit) stop the test run as Ctrl-C does, so that
every fixture's teardown still runs: the hub's test must remove the Unix users and nftables table it made.
"""

from __future__ import annotations

import os
import signal

import psutil

#: The environment variable the test run sets.
ENV = "LABKIT_CI"
_TRUE = ("1", "true", "yes", "on")


def under_test() -> bool:
    """True when the test runner runs this process (``LABKIT_CI`` is ``1``, ``true``, ``yes`` or ``on``); False in a
    learner's lab, where it is unset (or ``0``, ``false``, empty)."""
    return os.environ.get(ENV, "").strip().lower() in _TRUE


#: What the command line of a pytest-xdist worker holds: execnet's bootstrap, which its controller starts.
WORKER_MARK = "import sys;exec(eval(sys.stdin.readline()))"


def stop_on_sigterm(controller: bool) -> None:
    """From now on, a SIGTERM to this process stops the test run as Ctrl-C does, every fixture's teardown first, where
    Python's default action (ending at once) leaves whatever the fixtures made (a hub, its Unix users and nftables
    table, brokers). ``timeout`` signals the whole process group, a job runner may signal the test run's first process
    only: both end the same way.

    In a pytest-xdist worker, or a run without workers, SIGTERM raises ``KeyboardInterrupt`` in the main thread, once
    (later ones are ignored, so a teardown under way is not cut short). In xdist's controller (``controller``), it is
    passed on to the worker processes the controller started (its direct children running execnet's bootstrap,
    :data:`WORKER_MARK`) and the controller goes on: each worker tears down, reports its interruption, and the
    controller ends the run on that report ("received keyboard-interrupt"); the controller's own ``KeyboardInterrupt``
    would end its workers 10 s later, mid-teardown. Must be called from the main thread (``signal.signal``)."""

    def interrupted(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        workers = []
        for child in psutil.Process().children() if controller else []:
            try:
                if WORKER_MARK in " ".join(child.cmdline()):
                    child.send_signal(signal.SIGTERM)
                    workers.append(child)
            except psutil.NoSuchProcess:
                continue
        if not workers:
            raise KeyboardInterrupt("SIGTERM: the test run stops, each fixture's teardown first")

    signal.signal(signal.SIGTERM, interrupted)
