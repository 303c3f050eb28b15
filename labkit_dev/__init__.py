"""Tooling no learner runs, for ``tests/``, ``bench/`` and ``docs/`` (never copied into a workshop hub's install).

* :mod:`labkit_dev.browser`: Debian's Chromium driven by Playwright, and what a page shows that a learner cannot read.
* :mod:`labkit_dev.drive`: a real workshop hub driven as a room would: sign-ins, Run All, the live view.
* :mod:`labkit_dev.soak`: read-process-write under random faults (``bench/soak.py``, ``tests/test_soak.py``).
* :mod:`labkit_dev.offline_check`: the bundle built and the lab set up from it with no network.
"""
