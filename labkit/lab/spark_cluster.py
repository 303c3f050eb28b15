"""A local Spark standalone cluster (one master and N workers on 127.0.0.1) run from the pyspark pip package.

The pip package has no ``sbin/start-master.sh``; its ``bin/spark-class`` starts the daemons as Spark's
standalone mode documents (https://spark.apache.org/docs/latest/spark-standalone.html, "Starting a Cluster
Manually"). Command line: ``python -m labkit spark-cluster up|down|status`` (:func:`main`).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import weakref
from collections import deque
from pathlib import Path

from labkit.broker.ports import HOST, RANGE_ENV, ensure_free, free_port
from labkit.broker.runtime import find_java, labkit_home
from labkit.core.errors import LabkitError
from labkit.core.procs import process_state, spawn, start_time, why_not_ours
from labkit.core.waiting import Deadline, wait_until
from labkit.lab import server as lab
from labkit.spark.session import JVM_FLAGS, LOG4J, PORT_RETRIES, block_port, check_pyspark

READY = {"master": "I have been elected leader", "worker": "Successfully registered with master"}
# labkit's errors-only Spark logging, plus the INFO lines (readiness among them) of the two daemon classes
DAEMON_LOG4J = "".join(f"\nlogger.{n}.name = org.apache.spark.deploy.{n}.{n.title()}\nlogger.{n}.level = info"
                       for n in READY)
#: The master's REST submission server off: Spark 4.2's master otherwise listens on 6066 (seen with psutil), a fixed
#: port outside every attendee's block where anyone on the machine could submit an application, unauthenticated
#: (Spark's docs: Security, "Standalone mode"; ``spark.master.rest.enabled``). The lab submits through the driver.
NO_REST = "spark.master.rest.enabled=false"
_LIVE: "weakref.WeakSet[StandaloneCluster]" = weakref.WeakSet()
atexit.register(lambda: [c.stop() for c in list(_LIVE)])


class SparkClusterError(LabkitError):
    """A Spark standalone daemon exited while starting, or was not ready in time; the message names its log."""


def cluster_dir(env: dict[str, str] | None = None) -> Path:
    """``$LABKIT_HOME/spark-cluster``: the default folder of logs, executors' work folders and ``state.json``."""
    return labkit_home(env) / "spark-cluster"


class StandaloneCluster:
    """A Spark master and ``workers`` workers on 127.0.0.1, each a JVM in its own process group (a worker's
    executor JVMs join its group). No JVM outlives this Python process (atexit, Linux's parent-death signal:
    :func:`labkit.core.procs.spawn`), whichever thread started it.

    Logs: errors only, plus the INFO lines of the ``Master`` and ``Worker`` classes, which is how :meth:`start`
    sees readiness. Each daemon's stdout and stderr go to ``<folder>/master.log``, ``<folder>/worker-<i>.log``
    (rewritten by each start); executors log to ``<folder>/work/<app id>/<n>/stderr``. One cluster per folder.

    Web UIs: they cannot be turned off (Spark 4.2 has no such setting for the master or worker;
    ``spark.ui.enabled`` is the driver's), so they bind to 127.0.0.1 (``SPARK_LOCAL_IP``), on ports the
    kernel picks with ``ui=False``, on free ports with ``ui=True`` (the master's in :attr:`ui_url`).

    With ``LABKIT_PORT_RANGE`` set (a lab sharing the machine's loopback with other users') every daemon port, the
    master's and each worker's RPC and web UI (the master's REST server is off: :data:`NO_REST`), is picked in the
    attendee's block (:func:`labkit.spark.session.block_port`), never by the kernel: the daemons take no authentication
    (``spark.authenticate`` is false), and a firewall rule can close only the block to other users
    (:func:`labkit.spark.session.block_ports` says why; the executors' ports follow the driver's settings).

    Args:
        workers: number of worker JVMs, at least 1.
        cores: CPU cores each worker offers to executors, at least 1.
        memory: memory each worker offers to executors, a JVM size ("1g", "1536m"). The lab's sessions ask
            for ``spark.executor.memory=1g``: with less, their jobs wait for resources forever.
        folder: logs and work folder; default :func:`cluster_dir`.
        ui: put the web UIs on known free ports, the master's at :attr:`ui_url`.
        master_port: the master's RPC port; ``None`` picks a free one.
        daemon_memory: heap cap (``-Xmx``) of the master and of each worker JVM (``SPARK_DAEMON_MEMORY``).

    Raises (from :meth:`start`):
        JavaError: no Java 17+. SparkSetupError: pyspark missing or of another release.
        PortInUseError: ``master_port`` is taken.
        SparkClusterError: a daemon exited during start (the message holds the last 20 lines of its log and
            the log's path), or was not ready within ``timeout_s``; the cluster is stopped in both cases.
    """

    def __init__(self, workers: int = 1, cores: int = 1, memory: str = "1g", *, folder: str | Path | None = None,
                 ui: bool = False, master_port: int | None = None, daemon_memory: str = "512m") -> None:
        if workers < 1 or cores < 1:
            raise SparkClusterError(f"A cluster needs at least 1 worker of 1 core, not {workers} x {cores}.")
        self.workers, self.cores, self.memory, self.ui, self.daemon_memory = workers, cores, memory, ui, daemon_memory
        self.folder = Path(folder) if folder is not None else cluster_dir()
        self._requested_port = master_port
        self.port: int | None = None
        self.ui_port: int | None = None
        self._procs: list[tuple[str, subprocess.Popen, Path]] = []  # (name, process, log)

    @property
    def master_url(self) -> str:
        """``"spark://127.0.0.1:<port>"``, for ``spark_session(master=...)`` or ``SPARK_MASTER``.
        Raises SparkClusterError if never started (no port yet)."""
        if self.port is None:
            raise SparkClusterError("The Spark cluster has no address yet: call start() first.")
        return f"spark://{HOST}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """``"http://127.0.0.1:<port>"``, the master's web UI (its JSON status at ``/json``) if ``ui=True``."""
        return f"http://{HOST}:{self.ui_port}" if self.ui and self.ui_port else None

    @property
    def is_running(self) -> bool:
        """Whether the master and every worker JVM are alive."""
        return bool(self._procs) and all(p.poll() is None for _, p, _ in self._procs)

    @property
    def pids(self) -> dict[str, int]:
        """Process (and process group) id of each daemon started: ``{"master": pid, "worker-1": pid, ...}``."""
        return {name: p.pid for name, p, _ in self._procs}

    def start(self, timeout_s: float = 90.0) -> "StandaloneCluster":
        """Start the master, wait until it is elected leader, then the workers, and wait until each has
        registered with it; with ``ui=True``, also until the master's web UI answers ``/json`` with every worker
        ALIVE (its log's leader line comes before the UI's server accepts). Returns ``self``. About 12 to 15 s for a
        master and one worker on a busy 2-core machine (each daemon first runs Spark's launcher, a JVM of its own).

        Args:
            timeout_s: seconds for the whole start.
        Raises:
            JavaError, SparkSetupError, PortInUseError, SparkClusterError: see the class.
        """
        if self.is_running:
            raise SparkClusterError(f"The Spark cluster at {self.master_url} is already running.")
        self.stop()
        deadline = Deadline(timeout_s)
        find_java()
        check_pyspark()
        import pyspark

        in_block = bool(os.environ.get(RANGE_ENV))  # every port in the lab's block

        drawn = {self._requested_port} - {None}  # no two daemons' ports the same (free_port's besides)

        def port(wanted: bool) -> int:  # 0: the kernel picks one
            return block_port(besides=drawn) if in_block else free_port(besides=drawn) if wanted else 0

        self.port, self.ui_port = self._requested_port or port(True), port(self.ui)
        ensure_free(self.port, "Spark master RPC port")
        (self.folder / "conf").mkdir(parents=True, exist_ok=True)  # SPARK_CONF_DIR: no spark-env.sh of the user's
        log4j = self.folder / "log4j2-daemons.properties"
        log4j.write_text(LOG4J.read_text() + DAEMON_LOG4J + "\n")
        home = Path(pyspark.__file__).parent
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(self.folder / "conf"),
               "SPARK_LOCAL_IP": HOST, "SPARK_MASTER_HOST": HOST, "SPARK_DAEMON_MEMORY": self.daemon_memory,
               "SPARK_LAUNCHER_OPTS": JVM_FLAGS,
               "SPARK_DAEMON_JAVA_OPTS": f"{JVM_FLAGS} -Dlog4j.configurationFile=file:{log4j} "
                                         f"-Dlog4j2.configurationFile=file:{log4j} -D{NO_REST}"
                                         + (f" -Dspark.port.maxRetries={PORT_RETRIES}" if in_block else "")}
        try:
            self._spawn("master", home, env, "--host", HOST, "--port", str(self.port),
                        "--webui-port", str(self.ui_port))
            self._await(*self._procs[0], deadline)  # workers only register with a leader
            for i in range(1, self.workers + 1):
                self._spawn(f"worker-{i}", home, env, self.master_url, "--host", HOST, "--cores", str(self.cores),
                            "--memory", self.memory, "--port", str(port(False)), "--webui-port", str(port(self.ui)),
                            "--work-dir", str(self.folder / "work"))
            for daemon in self._procs[1:]:
                self._await(*daemon, deadline)
            if self.ui:
                self._await_ui(deadline)
        except BaseException:
            self.stop()
            raise
        _LIVE.add(self)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM each daemon's process group (a worker's executors too), SIGKILL what is left after
        ``timeout_s`` seconds. Logs are kept. Does nothing if nothing runs."""
        for _, proc, _ in self._procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = Deadline(timeout_s)
        for _, proc, _ in self._procs:
            try:
                proc.wait(max(0.1, deadline.remaining_s()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        self._procs = []
        _LIVE.discard(self)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"StandaloneCluster({self.master_url if self.port else 'no address yet'}, {self.workers} worker(s) x "
                f"{self.cores} core(s)/{self.memory}, {'running' if self.is_running else 'stopped'}, "
                f"folder={self.folder})")

    def _spawn(self, name: str, home: Path, env: dict[str, str], *args: str) -> None:
        kind = name.split("-")[0]
        cmd = [str(home / "bin" / "spark-class"), f"org.apache.spark.deploy.{kind}.{kind.title()}", *args]
        with open(self.folder / f"{name}.log", "wb") as out:
            proc = spawn(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                         cwd=self.folder, start_new_session=True)
        self._procs.append((name, proc, Path(out.name)))

    def _await_ui(self, deadline: Deadline) -> None:
        last: object = "no answer"

        def answers() -> bool:
            nonlocal last
            try:
                wait_s = max(0.5, min(5.0, deadline.remaining_s()))
                with urllib.request.urlopen(f"{self.ui_url}/json", timeout=wait_s) as r:
                    last = [w.get("state") for w in json.load(r).get("workers", [])]
            except (OSError, ValueError) as e:  # refused, reset, half-written: the UI is still starting
                last = repr(e)
                return False
            return last == ["ALIVE"] * self.workers

        if not wait_until(answers, deadline.remaining_s(), interval_s=0.2):
            raise SparkClusterError(f"The Spark master's web UI at {self.ui_url}/json did not show {self.workers} ALIVE "
                                    f"worker(s) within {deadline.timeout_s:g} s (last: {last}); raise timeout_s on a "
                                    f"slow machine. The cluster was stopped; see {self._procs[0][2]}.")

    @staticmethod
    def _await(name: str, proc: subprocess.Popen, log: Path, deadline: Deadline) -> None:
        marker = READY[name.split("-")[0]]
        while marker not in log.read_text(errors="replace"):
            if proc.poll() is not None or deadline.expired():
                why = (f"exited during start (exit code {proc.returncode})" if proc.poll() is not None else
                       f"was not ready within {deadline.timeout_s:g} s (no {marker!r} in its log; raise timeout_s on a slow "
                       "machine) and the cluster was stopped")
                with open(log, errors="replace") as f:
                    raise SparkClusterError(f"The Spark {name} {why}; see {log}. Last 20 lines:\n"
                                            + "".join(deque(f, maxlen=20)))
            time.sleep(0.1)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# -- `python -m labkit spark-cluster up|down|status`: a cluster kept by a background `serve` process ---------
def running_cluster() -> dict | None:
    """``{"pid" (of ``serve``), "started" (its start time), "master_url", "pids", "folder"}`` of the cluster
    ``spark-cluster up`` started, from ``<cluster_dir>/state.json``; ``None`` if none runs, or if the pid is no
    longer that ``serve`` process (another start time: the pid was reused, e.g. after a reboot; or a state file
    of an older labkit, without one), which :func:`down` then never signals (:func:`labkit.core.procs.why_not_ours`)."""
    try:
        state = json.loads((cluster_dir() / "state.json").read_text())
        return None if why_not_ours(state) else state
    except (OSError, ValueError, KeyError, TypeError):
        return None


def serve(workers: int = 1, cores: int = 1, memory: str = "1g") -> None:
    """Run a :class:`StandaloneCluster` in this process, noted in ``state.json``, until SIGTERM or SIGINT
    (or a daemon's death), then stop it."""
    stop = lab.stop_on_signal()
    cluster = StandaloneCluster(workers, cores, memory).start()
    lab.serve_until(stop, cluster, cluster_dir() / "state.json", {
        "pid": os.getpid(), "started": start_time(os.getpid()), "master_url": cluster.master_url, "pids": cluster.pids,
        "folder": str(cluster.folder)})


def up(workers: int = 1, cores: int = 1, memory: str = "1g", timeout_s: float = 150.0) -> str:
    """Start a cluster in a ``serve`` process that outlives the caller (its log: ``lab_dir()/spark-cluster.log``),
    or find the running one (whatever its size). Returns the master URL.

    Raises:
        LabkitError: it did not start within ``timeout_s`` seconds (the message holds the end of the log).
    """
    state = running_cluster()
    if not state:
        proc = lab.spawn_daemon([sys.executable, "-m", "labkit", "spark-cluster", "serve", f"--workers={workers}",
                           f"--cores={cores}", f"--memory={memory}"], "spark-cluster.log")
        wait_until(lambda: running_cluster() or proc.poll() is not None, timeout_s, 0.2)
        state = running_cluster()
        if not state:
            proc.kill()
            log = lab.lab_dir() / "spark-cluster.log"
            raise LabkitError(f"The Spark cluster did not start; see {log}:\n{log.read_text(errors='replace')[-3000:]}")
    return state["master_url"]


def down(timeout_s: float = 30.0) -> bool:
    """Stop the cluster :func:`up` started (SIGTERM to ``serve``, which stops it; SIGKILL to every process group
    after ``timeout_s`` seconds). Returns whether one was running."""
    state = running_cluster()
    if not state:
        return False
    os.kill(state["pid"], signal.SIGTERM)
    if not wait_until(lambda: process_state(state["pid"]) in ("", "Z"), timeout_s, 0.2):
        for pid in [state["pid"], *state["pids"].values()]:
            _signal_group(pid, signal.SIGKILL)
    (cluster_dir() / "state.json").unlink(missing_ok=True)
    return True


def main(argv: list[str]) -> int:
    """``python -m labkit spark-cluster up|down|status [--workers N] [--cores C] [--memory M]``; ``up`` prints
    ``export SPARK_MASTER=spark://...`` (alone on stdout, for ``eval``)."""
    parser = argparse.ArgumentParser(prog="python -m labkit spark-cluster", description="A local Spark cluster.")
    parser.add_argument("command", choices=["up", "down", "status", "serve"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="executor memory per worker, e.g. 1g")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.workers, args.cores, args.memory)
    elif args.command == "up":
        print(f"export SPARK_MASTER={up(args.workers, args.cores, args.memory)}")
        print("(`python -m labkit spark-cluster down` stops it)", file=sys.stderr)
    elif args.command == "down":
        print("stopped the Spark cluster" if down() else "no Spark cluster was running")
    else:
        state = running_cluster()
        print(f"Spark cluster: {state['master_url']}, pids {state['pids']}, logs in {state['folder']}" if state
              else "Spark cluster: not running")
    return 0
