"""Keep one of each per kernel: a cell run again closes what it made before.

What a notebook cell starts (a cluster, a broker) is made through :func:`only`, under a name
the cell gives, so that running the cell again closes what its last run made before making a new one (issue 65).

The run-sheet's routine (``docs/instructor.md``) has a learner lock in the prediction, then press Run All: every cell
runs again, also the one that started the notebook's cluster. Made plainly, the second cluster's four JVMs started
beside the first's, and the first stayed in the kernel (nothing held it any more, nothing closed it, the notebook's own
``cluster.close()`` closed only the second) until ``make stop``: notebook 09's lab peaked at 2,763 MiB against the 1,176
MiB measured for it on the workshop hub (``labkit/doctor/hub-memory.json``). Made with :func:`only`, a kernel holds at
most one of each name at any time.

The registry is this process's (a kernel's): a restarted kernel starts empty, and the JVMs of the one before end with
it (:class:`labkit.broker.EmbeddedBroker` kills its JVMs at exit). A participant needs none of this: a re-run cell
already replaces the participant its last run started (:class:`labkit.crashlab.Participant`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Name -> what the last :func:`only` call of that name made, in this process.
_MADE: dict[str, object] = {}


def only(name: str, make: Callable[[], T]) -> T:
    """Close what the last ``only(name, ...)`` of this kernel made (its ``close()``, else its ``stop()``; once closed,
    a second close must do nothing, as the lab's brokers, clusters and Spark clusters do), then return ``make()``,
    kept under ``name`` for the next call. Use it in a cell that starts something, with a name of its own::

        cluster = labkit.only("cluster", lambda: labkit.EmbeddedCluster(3).start())

    so that a re-run of the cell (Run All after a lock-in, Shift+Enter twice) never leaves the first one running: the
    earlier one is closed before the new one starts, so the two never run at once (the lab's memory peak stays that
    of one). The earlier one is closed even if it was closed already (the notebook's last cell) or ``make`` then
    raises (nothing is kept under ``name`` then).

    Args:
        name: what the cell calls it ("cluster", "broker"); the notebook's own names, one per thing it starts.
        make: makes and starts the thing; called with no argument.
    Returns:
        What ``make`` returned.
    Raises:
        TypeError: what ``make`` returned has neither ``close`` nor ``stop`` (nothing could close it on a re-run); it
            is not kept.
        Whatever ``make`` raises, or the earlier one's ``close``/``stop`` raises (the earlier one is forgotten then,
        so the next call does not try it again).
    """
    earlier = _MADE.pop(name, None)
    if earlier is not None:
        _closer(earlier)()
    made = make()
    _closer(made)  # checked before it is kept: a thing nothing can close would be left running by the next call
    _MADE[name] = made
    return made


def _closer(thing: object) -> Callable[[], object]:
    """``thing``'s ``close``, else its ``stop``. Raises TypeError when it has neither."""
    for method in ("close", "stop"):
        if callable(getattr(thing, method, None)):
            return getattr(thing, method)
    raise TypeError(f"labkit.only keeps only what it can close (a close() or stop() method), "
                    f"not a {type(thing).__name__}")
