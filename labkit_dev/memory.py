"""Sample the memory of a lab's processes: proportional set size summed by kind.

What ``bench/hub.py`` (one attendee's processes on the workshop hub) and ``bench/lab_memory.py`` (the processes of a
``make lab``) measure alike. PSS is psutil's ``memory_full_info().pss``: a page shared by n processes counts 1/n in
each, so shared pages count once in a sum. A process is of a kind by its command line (:data:`KINDS`).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable

import psutil

#: What a process is, from its command line: the first kind one of whose markers is an argument (or an argument's
#: last path part; for a ``prefix.`` marker the start of an argument, for a ``.suffix`` one its end). Else "other".
KINDS = {
    # the hub's server (labkit.hub.singleuser), make lab's (`python -m jupyter lab` execs the jupyter-lab script)
    "jupyterlab": ("jupyterhub-singleuser", "labkit.hub.singleuser", "jupyter-lab"),
    "spark driver": ("org.apache.spark.deploy.SparkSubmit",),  # a standalone cluster's daemons and executors apart
    "spark master": ("org.apache.spark.deploy.master.Master",),
    "spark worker": ("org.apache.spark.deploy.worker.Worker",),
    "spark executor": ("org.apache.spark.executor.CoarseGrainedExecutorBackend",),
    "spark": ("org.apache.spark.", "pyspark."),
    "kernel": ("ipykernel_launcher",),
    "broker": ("labkit.broker.Launcher", "kafka.Kafka", "serve-broker"),
    "java participants": ("labkit.participant.Main",),
    "python participants": ("labkit.crashlab.run",),
    "java programs": (".java",),  # single-file programs the lessons run (labkit.kafka.protocol, labkit.lessons)
    "jupyterlab node": ("yarn.js",),  # JupyterLab's build check at each page load (yarn config, in node)
}


def kind(cmdline: list[str]) -> str:
    """The kind (a key of :data:`KINDS`, or "other") of a process with command line ``cmdline``."""
    for name, markers in KINDS.items():
        for arg in cmdline:
            if any(arg == m or arg.rsplit("/", 1)[-1] == m or (m.endswith(".") and arg.startswith(m))
                   or (m.startswith(".") and arg.endswith(m)) for m in markers):
                return name
    return "other"


def pss_by_kind(processes: Iterable[psutil.Process]) -> dict[str, float]:
    """PSS (MiB) of ``processes`` summed per kind, at this moment; processes that end meanwhile, or whose memory this
    process may not read, are left out."""
    sums: dict[str, float] = {}
    for proc in processes:
        try:
            k, pss = kind(proc.cmdline()), proc.memory_full_info().pss / 2**20
        except psutil.Error:
            continue
        sums[k] = sums.get(k, 0.0) + pss
    return sums


class Sampler:
    """Samples :func:`pss_by_kind` of ``processes()`` (called anew each time: the processes alive then) every
    ``interval_s`` seconds in a daemon thread; :meth:`take` returns the peaks since the last take and starts over."""

    def __init__(self, processes: Callable[[], Iterable[psutil.Process]], interval_s: float = 2.0) -> None:
        self.processes, self.interval_s = processes, interval_s
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._samples: list[dict[str, float]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            sample = pss_by_kind(self.processes())
            with self._lock:
                self._samples.append(sample)

    def take(self) -> dict:
        """``{"peak_mib", "at_peak": {kind: MiB}, "peak_by_kind": {kind: MiB}, "samples"}`` since the last take:
        the largest sum of one sample (MiB, rounded), that sample by kind, each kind's own largest, and how many
        samples there were (none: ``peak_mib`` None)."""
        with self._lock:
            samples, self._samples = self._samples, []
        if not samples:
            return {"peak_mib": None, "at_peak": {}, "peak_by_kind": {}, "samples": 0}
        top = max(samples, key=lambda s: sum(s.values()))
        kinds = sorted({k for s in samples for k in s})
        return {"peak_mib": round(sum(top.values())), "at_peak": {k: round(v) for k, v in sorted(top.items())},
                "peak_by_kind": {k: round(max(s.get(k, 0.0) for s in samples)) for k in kinds},
                "samples": len(samples)}

    def close(self) -> None:
        """Stop sampling (waits at most 10 s for the thread)."""
        self._stop.set()
        self._thread.join(10)

    def in_turn(self, notebooks: Iterable[str], measure: Callable[[str], dict], settle_s: float = 20.0,
                say: Callable[[str], None] = print, line: Callable[[dict], str] = str) -> tuple[list[dict], dict]:
        """Run ``measure(notebook)`` for each notebook in turn (a row each, ``say``-ed through ``line``), and after
        the first one, with its kernel ended, let the lab settle ``settle_s`` s and take the idle lab's peak over the
        next ``settle_s`` s. Returns ``(rows, idle)`` (:meth:`take`'s dict; ``{}`` with no notebook)."""
        rows, idle = [], None
        for notebook in notebooks:
            rows.append(measure(notebook))
            say(line(rows[-1]))
            if idle is None:
                time.sleep(settle_s)
                self.take()
                time.sleep(settle_s)
                idle = self.take()
        return rows, idle or {}
