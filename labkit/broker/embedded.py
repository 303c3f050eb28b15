"""A real Apache Kafka broker (4.4.0 by default, or 4.3.2), in KRaft combined mode, run by labkit as a JVM."""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import subprocess
import tempfile
import time
import uuid
import weakref
from collections import deque
from pathlib import Path

from labkit.broker import cds, launcher, probe, runtime
from labkit.broker.ports import HOST, ensure_free, free_port
from labkit.broker.settings import (FEATURES_BY_VERSION, LOG_DIRS, config_key, kafka_version, lab_settings,
                                    render_log4j2, render_server_properties)
from labkit.core.errors import BrokerExitedError, BrokerNotReadyError, BrokerStateError, LabkitError
from labkit.core.procs import spawn
from labkit.core.waiting import Deadline

_LIVE: "weakref.WeakSet[EmbeddedBroker]" = weakref.WeakSet()
#: How many times :meth:`EmbeddedBroker.start` tries ports it picked itself when the JVM finds one taken.
BIND_ATTEMPTS = 3
#: The broker JVM's flags besides its heap: C1 only (``-XX:TieredStopAtLevel=1``) halves a start's CPU (the lab's
#: brokers live minutes, not the hours C2's optimisations pay back in), and class-data sharing
#: (:mod:`labkit.broker.cds`) halves it again. Neither changes what Kafka does.
JVM_FLAGS = ("-Xss1m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
#: The environment variable giving a broker's default heap cap in MiB (else :data:`HEAP_MB`): the workshop hub's
#: spawner sets it for every attendee (:mod:`labkit.hub.config`, sized by ``bench/hub.py``); tests and ``make lab``
#: leave it unset.
HEAP_ENV = "LABKIT_BROKER_HEAP_MB"
HEAP_MB = 768
#: With :data:`HEAP_ENV` set, the log cleaner's dedupe buffer (``log.cleaner.dedupe.buffer.size``, bytes) unless
#: given: Kafka's default, 128 MiB, is allocated on the heap as the broker starts (half of a 256 MiB heap, and as much
#: resident memory); 16 MiB holds about 600,000 keys per cleaning (24 bytes each, load factor 0.9: Kafka's
#: ``SkimpyOffsetMap``), far more than a lab's compacted topics (the internal offsets, transaction and share-state
#: topics) hold. Measured: a fresh broker's PSS 265 MiB with the default, 156 MiB with this.
SMALL_HEAP_DEDUPE_BUFFER = 16 * 2**20
#: With :data:`HEAP_ENV` set, the collector and the heap's start, in place of G1: a hub attendee's broker on G1 with a
#: 256 MiB cap grew from 203 MiB PSS idle to 372-387 MiB over notebooks 00-07 (G1 lets its young generation take up to
#: 60 % of the heap and fills it before collecting, so the whole cap ends up resident); the serial collector, from a
#: 32 MiB start, grows the heap only when what survives a collection needs it. Its pauses on a heap this small are a
#: few milliseconds to tens of them, far below every timeout the lessons use (sessions, transactions: seconds).
SMALL_HEAP_FLAGS = ("-XX:+UseSerialGC", "-Xms32m")


def _heap_mb() -> int:
    """``$LABKIT_BROKER_HEAP_MB`` (:data:`HEAP_ENV`) if set, else :data:`HEAP_MB`.

    Raises:
        LabkitError: the variable is set to something other than a whole number of MiB of at least 64.
    """
    value = os.environ.get(HEAP_ENV, str(HEAP_MB))
    if not value.isdigit() or int(value) < 64:
        raise LabkitError(f"{HEAP_ENV}={value!r}: give the broker's heap cap as a whole number of MiB, at least 64 "
                          f"(e.g. 256), or unset it for {HEAP_MB}.")
    return int(value)


@atexit.register
def _kill_all() -> None:
    for broker in list(_LIVE):
        broker.close()


def new_cluster_id() -> str:
    """A random KRaft cluster id (a UUID in URL-safe base64, 22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class EmbeddedBroker:
    """One Kafka node (``process.roles=broker,controller``, ``node.id=1``) on 127.0.0.1.

    The JVM is started from the jars of ``version`` resolved by :func:`labkit.broker.runtime.ensure_jars`;
    its storage is formatted with ``kafka.tools.StorageTool format --standalone`` (in the broker's own JVM:
    :mod:`labkit.broker.launcher`) and the release's share-group feature level
    (:data:`~labkit.broker.settings.FEATURES_BY_VERSION`: KIP-932, and on 4.4 the DLQ of KIP-1191). Its log goes
    to ``<data_dir>/server.log``.
    No JVM outlives the Python process that started it (atexit, and Linux's parent-death signal).

    Args:
        data_dir: folder for the configs, the log and the topic data. ``None``: a temporary folder,
            removed by :meth:`close`. A given folder is kept, and a formatted one is reused by the
            same release (its release is noted in ``<data_dir>/kafka-version``).
        version: Kafka release, e.g. "4.3.2"; default :func:`~labkit.broker.settings.kafka_version`
            (``$LABKIT_KAFKA_VERSION``, else 4.4.0).
        port: client listener port; ``None`` picks a free one.
        controller_port: KRaft controller listener port; ``None`` picks a free one.
        heap_mb: JVM heap cap (``-Xmx``), in MiB; ``None``: ``$LABKIT_BROKER_HEAP_MB`` (:data:`HEAP_ENV`, and then
            the smaller cleaner buffer :data:`SMALL_HEAP_DEDUPE_BUFFER` and the serial collector from a small start,
            :data:`SMALL_HEAP_FLAGS`), else :data:`HEAP_MB`.
        start_timeout_s: how long :meth:`start` waits for readiness, in seconds.
        proxy_listener: also open listener PROXIED, advertised at :attr:`proxy_port`, for a
            :class:`labkit.crashlab.proxy.FaultProxy` to listen on (see ``render_server_properties``).
        **overrides: broker configs over :data:`labkit.broker.settings.LAB_SETTINGS`, with dots or
            underscores (``transaction_max_timeout_ms=30000``); ``None`` restores Kafka's default.
        node_id, roles, quorum, cluster_id: for a node of a multi-node cluster
            (:class:`labkit.broker.multinode.EmbeddedCluster`): its ``node.id``, ``process.roles``
            ("controller" or "broker" for KRaft isolated mode), its controller's address for a broker, and
            the cluster id every node's storage is formatted with (default: a new one).
        class_data: the JVM's class-data sharing flags; ``None``: the broker archive's, if it was made
            (:func:`labkit.broker.cds.flags`); :func:`labkit.broker.cds.dumping` gives the flags that make it.

    Raises:
        LabkitError: ``version`` is not a release labkit supports, or ``$LABKIT_BROKER_HEAP_MB`` is not a number of
            MiB (at construction).

    Raises (from :meth:`start`):
        JavaError, MavenError: no Java 17+, or no jars and no Maven.
        BrokerStateError: ``data_dir`` holds storage formatted by another Kafka release.
        PortInUseError: a given port is taken.
        BrokerExitedError: the JVM exited while starting (the message holds the last 40 log lines).
        BrokerNotReadyError: not ready within ``start_timeout_s``.
    """

    def __init__(self, data_dir: str | Path | None = None, *, version: str | None = None, port: int | None = None,
                 controller_port: int | None = None, heap_mb: int | None = None,
                 start_timeout_s: float = 60.0, proxy_listener: bool = False, node_id: int = 1,
                 roles: str = "broker,controller", quorum: str | None = None, cluster_id: str | None = None,
                 class_data: list[str] | None = None, **overrides: object) -> None:
        self.version = kafka_version(version)
        self.heap_mb = _heap_mb() if heap_mb is None else heap_mb  # checked before the folder is made
        dedupe = "log.cleaner.dedupe.buffer.size"
        self._small_heap = heap_mb is None and HEAP_ENV in os.environ
        if self._small_heap and all(config_key(name) != dedupe for name in overrides):
            overrides[dedupe] = SMALL_HEAP_DEDUPE_BUFFER
        self._owns_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="labkit-broker-") if data_dir is None else data_dir)
        self._requested = (port, controller_port)
        self.port: int | None = None
        self.controller_port: int | None = None
        self.proxy_listener = proxy_listener
        self.proxy_port: int | None = None  # where the fault proxy listens (advertised to clients)
        self.proxied_listener_port: int | None = None  # the broker's PROXIED listener behind it
        self.start_timeout_s = start_timeout_s
        self.settings = lab_settings(overrides)
        self.node_id, self.roles, self.quorum, self.cluster_id = node_id, roles, quorum, cluster_id
        self.class_data = class_data
        self._launcher = False  # whether the JVM's main class is labkit.broker.Launcher (set by start)
        self._proc: subprocess.Popen | None = None
        self._log_mark = 0  # server.log's size when the JVM last started (bytes)

    # -- state -----------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:<port>"``, the address clients bootstrap from.

        Raises:
            BrokerStateError: the broker was never started, so it has no port yet.
        """
        if self.port is None:
            raise BrokerStateError("The broker has no address yet: call start() first.")
        return f"{HOST}:{self.port}"

    @property
    def is_running(self) -> bool:
        """Whether the JVM process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """OS process id of the JVM, or ``None`` if it is not running."""
        return self._proc.pid if self.is_running else None

    @property
    def log_dirs(self) -> Path:
        """Kafka's ``log.dirs``, ``<data_dir>/kraft-logs``: one folder per partition (``<topic>-<partition>``,
        holding its segments), the KRaft metadata log and ``meta.properties``."""
        return self.data_dir / LOG_DIRS

    @property
    def log_file(self) -> Path:
        """The broker's log4j2 log, ``<data_dir>/server.log``."""
        return self.data_dir / "server.log"

    def log_size(self) -> int:
        """The size of ``server.log`` now (bytes; 0 before it exists): a mark for :meth:`logged_since`."""
        return self.log_file.stat().st_size if self.log_file.exists() else 0

    def logged_since(self, mark: int, text: str) -> bool:
        """Whether ``server.log`` has ``text`` after its first ``mark`` bytes (a :meth:`log_size`; every start of
        the JVM appends to the same file)."""
        if not self.log_file.exists():
            return False
        with open(self.log_file, "rb") as f:
            f.seek(mark)
            return text.encode() in f.read()

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of ``server.log`` ("" if there is none yet)."""
        if not self.log_file.exists():
            return ""
        with open(self.log_file, errors="replace") as f:
            return "".join(deque(f, maxlen=n))

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> "EmbeddedBroker":
        """Format storage if needed, start the JVM and return once the broker is ready: it answers
        a metadata request and topic ``_labkit_ready`` exists with a leader. Returns ``self``.

        A port labkit picked itself (none was given) can be taken by another process between the pick and the
        JVM's bind (parallel test workers, an outgoing connection): the start is then tried again on freshly
        picked ports, up to :data:`BIND_ATTEMPTS` times; a port the caller gave fails at once."""
        if self.is_running:
            raise BrokerStateError(f"The broker at {self.bootstrap_servers} is already running.")
        java = runtime.find_java()
        self._check_storage_version()
        cp, self._launcher = launcher.class_path(self.version, runtime.ensure_jars(version=self.version))
        sharing = cds.flags("broker", java, cp) if self.class_data is None else self.class_data
        flags = JVM_FLAGS
        if self._small_heap:  # the serial collector in place of G1 (SMALL_HEAP_FLAGS)
            flags = (*(f for f in JVM_FLAGS if f != "-XX:+UseG1GC"), *SMALL_HEAP_FLAGS)
        jvm = [java, f"-Xmx{self.heap_mb}m", *flags, *sharing,
               f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}", f"-Dkafka.logs.dir={self.data_dir}",
               "-cp", cp]
        picked_now = self.port is None  # restarts keep the ports of the first start
        attempt = 1
        while True:
            self._pick_ports()
            try:
                self._launch(jvm)
                return self
            except BrokerExitedError:
                lost_race = picked_now and self.logged_since(self._log_mark, "Address already in use")
                if not lost_race or attempt == BIND_ATTEMPTS:
                    raise
            attempt += 1
            self.port = self.controller_port = self.proxied_listener_port = self.proxy_port = None

    def _launch(self, jvm: list[str]) -> None:
        """Write the configs for the picked ports, format storage if it is new, spawn the JVM, wait until ready."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = self.data_dir / "server.properties"
        props.write_text(render_server_properties(
            data_dir=self.data_dir, port=self.port, controller_port=self.controller_port, settings=self.settings,
            proxied=(self.proxied_listener_port, self.proxy_port) if self.proxy_listener else None,
            node_id=self.node_id, roles=self.roles, quorum=self.quorum))
        (self.data_dir / "log4j2.properties").write_text(render_log4j2(self.log_file))
        formatting = None if (self.log_dirs / "meta.properties").exists() else self._format_args(props)
        if formatting is not None:
            (self.data_dir / "kafka-version").write_text(self.version + "\n")
            if not self._launcher:  # a JRE: StorageTool in a JVM of its own
                self._format(jvm, formatting)
        main = launcher.main_args(props, formatting) if self._launcher else ["kafka.Kafka", str(props)]
        self._log_mark = self.log_size()  # a controller's readiness is read in what this start logs
        jvm_out = self.data_dir / "jvm.out"
        out_mark = jvm_out.stat().st_size if jvm_out.exists() else 0
        with open(jvm_out, "ab") as out:
            self._proc = spawn(jvm + main, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
        _LIVE.add(self)
        try:
            self._wait_ready()
        except BrokerExitedError:
            if self._launcher and formatting is not None and self._proc.returncode == launcher.FORMAT_FAILED:
                with open(jvm_out, errors="replace") as f:
                    f.seek(out_mark)
                    raise self._format_failed(self._proc.returncode, f.read()) from None
            raise

    def stop(self, timeout_s: float = 30.0) -> None:
        """Shut the broker down cleanly (SIGTERM, then SIGKILL after ``timeout_s`` seconds).
        Data is kept, so :meth:`restart` finds it. Does nothing if it is not running."""
        if self.is_running:
            self._proc.terminate()
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def kill(self) -> None:
        """SIGKILL the JVM: a crash, no clean shutdown. Data is kept.

        Raises:
            BrokerStateError: the broker is not running.
        """
        if not self.is_running:
            raise BrokerStateError("kill(): the broker is not running; start() or restart() it first.")
        self._proc.kill()
        self._proc.wait()

    def restart(self) -> "EmbeddedBroker":
        """Stop the broker if it runs, then start it again on the same data folder and ports."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the broker and remove its data folder if labkit created it."""
        self.stop()
        _LIVE.discard(self)
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"{HOST}:{self.port}" if self.port else "no address yet"
        state = "running" if self.is_running else "stopped"
        return f"EmbeddedBroker(Kafka {self.version}, {where}, {state}, data_dir={self.data_dir})"

    # -- helpers ----------------------------------------------------------------------------
    def _pick_ports(self) -> None:
        if self.port is None:  # first start (or one again after a lost bind race): the requested ports, or free ones
            picked: set[int] = set()

            def pick(requested: int | None = None) -> int:
                port = requested or free_port()
                while port in picked:
                    port = free_port()
                picked.add(port)
                return port

            self.port, self.controller_port = pick(self._requested[0]), pick(self._requested[1])
            if self.proxy_listener:
                self.proxied_listener_port, self.proxy_port = pick(), pick()
        ensure_free(self.port, "Kafka client listener")
        ensure_free(self.controller_port, "KRaft controller listener")
        if self.proxy_listener:
            ensure_free(self.proxied_listener_port, "PROXIED listener")

    def _check_storage_version(self) -> None:
        noted = self.data_dir / "kafka-version"
        formatted = (self.log_dirs / "meta.properties").exists()
        release = noted.read_text().strip() if noted.exists() else None
        if formatted and release and release != self.version:
            raise BrokerStateError(
                f"{self.data_dir} holds storage formatted by Kafka {release}, not {self.version} (newer storage is not "
                f"readable by older brokers). Use another data_dir, or LABKIT_KAFKA_VERSION={release}; its data is "
                "left as it is.")

    def _format_args(self, props: Path) -> list[str]:
        """StorageTool's ``format`` arguments for this node: a new cluster id (or the cluster's), the release's
        feature levels, and the controller quorum (``--standalone`` for a controller)."""
        cluster_id = self.cluster_id or new_cluster_id()
        features = [arg for name, level in FEATURES_BY_VERSION[self.version].items()
                    for arg in ("--feature", f"{name}={level}")]
        quorum = "--standalone" if "controller" in self.roles else "--no-initial-controllers"
        # --cluster-id=<id>, not -t <id>: a random id can start with "-", which argparse takes for an option
        return [quorum, f"--cluster-id={cluster_id}", "-c", str(props), *features]

    def _format(self, jvm: list[str], format_args: list[str]) -> None:
        """Format the storage with ``kafka.tools.StorageTool`` in a JVM of its own (no launcher: a JRE)."""
        done = subprocess.run(jvm + ["kafka.tools.StorageTool", "format", *format_args],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise self._format_failed(done.returncode, done.stdout + done.stderr)

    def _format_failed(self, code: int, output: str) -> BrokerExitedError:
        return BrokerExitedError(f"Formatting the broker's storage in {self.data_dir} failed (exit {code}): check the "
                                 f"overrides you passed. Output:\n{output}")

    def _ready(self, deadline: Deadline) -> bool:
        if self.roles == "controller":  # no client listener: it logs when its KRaft server is up (then config dumps
            return self.logged_since(self._log_mark, "Kafka Server started")  # of 450 lines may follow at once)
        probe_s = min(2.0, max(0.2, deadline.remaining_s()))
        if self.roles == "broker":  # a cluster's broker: unfenced and serving, whatever the other brokers' state (the
            return (self.logged_since(self._log_mark, "Kafka Server started")  # probe topic may lead on a dead one)
                    and probe.lists_broker(self.bootstrap_servers, self.node_id, probe_s))
        return probe.is_ready(self.bootstrap_servers, timeout_s=probe_s)

    def _wait_ready(self) -> None:
        deadline = Deadline(self.start_timeout_s)
        while not deadline.expired():
            if not self.is_running:
                code = self._proc.returncode
                raise BrokerExitedError(
                    f"The Kafka broker exited during start (exit code {code}); see {self.log_file}. "
                    f"Last 40 lines of server.log:\n{self.log_tail(40)}")
            if self._ready(deadline):
                return
            time.sleep(0.1)
        self.kill()
        raise BrokerNotReadyError(
            f"The Kafka broker at {self.bootstrap_servers} was not ready within {self.start_timeout_s:g} s and "
            f"was stopped; raise start_timeout_s on a slow machine. Last 40 lines of {self.log_file}:\n"
            f"{self.log_tail(40)}")
