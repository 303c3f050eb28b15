"""Whether a notebook runs under the test runner, or in a learner's hands.

Some cells exist for CI only: they press a playground's buttons through the panel's own functions
(``panel.press(...)``, ``panel.close()``) so that nbval exercises the playground headless. In a learner's Run All
they must leave the playground alone, or the learner never gets to play. Such a cell asks :func:`under_test`; so does
a claims cell, for the assertions on what that cell did.

The test run says so in the environment: ``LABKIT_CI=1``, set by ``make test`` and by the repository's
``conftest.py`` (``pytest_configure``), so every kernel nbval starts inherits it. The lab (``make lab``) does not
set it.
"""

from __future__ import annotations

import os

#: The environment variable the test run sets.
ENV = "LABKIT_CI"
_TRUE = ("1", "true", "yes", "on")


def under_test() -> bool:
    """True when the test runner runs this process (``LABKIT_CI`` is ``1``, ``true``, ``yes`` or ``on``); False in a
    learner's lab, where it is unset (or ``0``, ``false``, empty)."""
    return os.environ.get(ENV, "").strip().lower() in _TRUE
