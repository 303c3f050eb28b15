"""labkit: a teaching lab for Kafka exactly-once semantics and share groups, on a real broker.

The names a notebook uses are here, imported when first used (a participant process, which imports
``labkit.crashlab.run``, pays for none of them): ``import labkit`` then ``labkit.connect()``,
``labkit.Experiment(...)``, ``labkit.timeline_figure(...)``; ``labkit.under_test()`` tells a CI-only cell whether the
test runner runs it (``LABKIT_CI``, :mod:`labkit.learn.testmode`); ``labkit.only("cluster", make)`` lets a cell that
starts a cluster or a broker run again without leaving the first one running (:mod:`labkit.learn.rerun`). Each lesson's
own functions are in ``labkit.lessons.<notebook name>``; a notebook's claims cell ends with ``labkit.claims_hold("All
claims hold ...")`` (:mod:`labkit.learn.claims`). In a kernel on the workshop hub, importing labkit starts reporting
exercise checks and claims cells to the instructor's live view (:mod:`labkit.hub.report`) and telling the learner when
their lab reached its memory limit (:mod:`labkit.hub.memory_notice`).
"""

from __future__ import annotations

import importlib
import os

if os.environ.get("LABKIT_LIVEVIEW_URL"):  # a kernel on the workshop hub: report to the instructor's live view, and
    from labkit.hub.memory_notice import install as _install_memory_notice  # say when the lab hit its memory limit
    from labkit.hub.report import install as _install_report

    _install_report()
    _install_memory_notice()

#: Public name -> the module that defines it.
_PUBLIC = {
    "EmbeddedBroker": "labkit.broker", "kafka_version": "labkit.broker", "kafka_at_least": "labkit.broker",
    "EmbeddedCluster": "labkit.broker.multinode",
    "connect": "labkit.lab.connection", "fault_proxy": "labkit.lab.connection",
    "Experiment": "labkit.crashlab.experiment", "Participant": "labkit.crashlab.participant",
    "ControlPanel": "labkit.crashlab.panel", "Supervisor": "labkit.crashlab.supervisor",
    "LiveTimeline": "labkit.crashlab.timeline", "timeline_figure": "labkit.crashlab.timeline",
    "contradictions": "labkit.crashlab.figure_truth", "last_drawn_states": "labkit.crashlab.figure_truth",
    "History": "labkit.core.history",
    "read_topic": "labkit.kafka.records", "transaction_log": "labkit.kafka.txnlog",
    "describe_producers": "labkit.kafka.producers", "find_hanging": "labkit.kafka.hanging",
    "plot_offsets": "labkit.kafka.offsets",
    "ShareObserver": "labkit.share.observer", "Sink": "labkit.share.sink", "check_share": "labkit.share.check",
    "share_timeline_figure": "labkit.share.timeline",
    "StandaloneCluster": "labkit.lab.spark_cluster",
    "wait_for": "labkit.core.waiting", "wait_until": "labkit.core.waiting",
    "under_test": "labkit.learn.testmode",
    "claims_hold": "labkit.learn.claims",
    "only": "labkit.learn.rerun",
    "predict": "labkit.learn.predictions", "reveal": "labkit.learn.predictions", "check_reveal": "labkit.learn.predictions",
}
#: Public module name -> the module.
_MODULES = {"records": "labkit.kafka.records", "logview": "labkit.lab.logview"}
__all__ = sorted([*_PUBLIC, *_MODULES])


def __getattr__(name: str) -> object:
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name not in _PUBLIC:
        raise AttributeError(f"module 'labkit' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)


def __dir__() -> list[str]:
    return __all__
