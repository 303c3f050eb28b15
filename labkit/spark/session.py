"""A SparkSession for the lab: ``local[2]`` by default, any cluster through ``SPARK_MASTER``, with Spark's
Kafka connector on its classpath.

The pyspark pip package (pinned at :data:`SPARK_VERSION`) brings Spark itself but not its Kafka
connector. :func:`connector_jars` resolves the connector's four jars (``jvm/spark-kafka.xml``) once with
Maven, non-transitively, into ``$LABKIT_HOME/spark-kafka-<version>/``; :func:`spark_session` passes them
with ``spark.jars`` (the driver and every executor load them; no Ivy resolution at run time). On the workshop hub
the folder is read from the shared read-only cache first (``LABKIT_SHARED_CACHE``,
:func:`labkit.broker.runtime.cache_path`), where the hub's set-up resolved it; it is only ever made in
``$LABKIT_HOME``.

With ``LABKIT_PORT_RANGE`` set, a Spark driver's listening ports are also in that block (:func:`block_ports`): see
there why.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from labkit.broker import cds
from labkit.broker.ports import RANGE_ENV, free_port, lab_ports
from labkit.broker.runtime import cache_path, find_java, maven_jars
from labkit.core.errors import LabkitError

#: The Spark release of the pyspark pin and of the connector jars: the newest whose connector
#: (``spark-sql-kafka-0-10_2.13``) is on Maven Central. 4.3.0 lacks it and ``spark-catalyst_2.13``, though its
#: ``spark-core_2.13`` is there; 4.2.1 lacks it and ``spark-core_2.13`` (``mvn dependency:get``, 2026-12-07).
SPARK_VERSION = "4.2.0"
POM = Path(__file__).resolve().parents[2] / "jvm" / "spark-kafka.xml"
LOG4J = Path(__file__).with_name("log4j2.properties")
#: Where a pipeline runs unless ``SPARK_MASTER`` says otherwise: Spark in this process, 2 worker threads.
LOCAL_MASTER = "local[2]"


class SparkSetupError(LabkitError):
    """pyspark is missing or of another release than the connector jars."""


#: The driver's and executors' JVM flags besides the log settings (a standalone cluster's master and workers get them
#: too): C1 only and the serial collector. A lab's driver lives a minute or two on a few thousand records, where C2's
#: compiler threads cost more CPU than they save (a driver's start and one short query: 30 CPU s with Spark's
#: defaults, 16 with these). A heap that starts at 32 MiB (``-Xms32m``; the JVM's default start is 1/64 of the
#: machine's memory, 384 MiB on 24 GiB, and the serial collector fills its young generation before its first
#: collection) and grows as the work needs: a driver's proportional set size 410 to 342 MiB on the same job, for the
#: same CPU, and in notebook 04's cluster part the master and worker 225 to 131 MiB each, the executor 275 to 191
#: (issue 38's memory goal for a hub attendee). None of them changes what Spark computes. The launcher JVM that
#: ``spark-submit`` runs first gets them too (``SPARK_LAUNCHER_OPTS``).
JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xms32m"


#: How many ports above its configured one Spark tries when that one is taken (``spark.port.maxRetries``; Spark's
#: default is 16), on the hub: :func:`block_port` leaves this many ports of the block above each port it picks.
PORT_RETRIES = 8


def block_port(env: dict[str, str] | None = None, besides: set[int] | None = None) -> int:
    """A free port of the attendee's block (``$LABKIT_PORT_RANGE``, :func:`labkit.broker.ports.lab_ports`) for one
    Spark listener, at least :data:`PORT_RETRIES` below the block's top: Spark's retries on a taken port walk up one
    port at a time (``spark.port.maxRetries``, ``Utils.startServiceOnPort``), so every retry stays in the block.
    ``besides``: ports not to pick, the picked one added (:func:`labkit.broker.ports.free_port`).

    Raises:
        PortInUseError: no port of the block could be bound. LabkitError: ``LABKIT_PORT_RANGE`` is malformed.
    """
    block = lab_ports(env)
    return free_port(ports=range(block.start, max(block.start + 1, block.stop - PORT_RETRIES)), besides=besides)


def block_ports(ui: bool = False, env: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark settings that put a driver's listening ports in the attendee's port block when ``LABKIT_PORT_RANGE`` is
    set (a lab sharing the machine's loopback); ``{}`` when it is not (Spark's defaults: ports the kernel picks).

    Why: a driver listens on its RPC port (``spark.driver.port``), on its block manager's
    (``spark.blockManager.port``, also an executor's on a standalone worker) and, with ``ui``, on its web UI
    (``spark.ui.port``), none of them authenticated (``spark.authenticate`` is false by default). On ports the kernel
    picks (the ephemeral range) any local user could connect to them: submit work to the driver (code run as the
    attendee), read its blocks, watch its UI. The hub's nftables rule refuses other users' connections to the
    attendee's block only (:mod:`labkit.hub.firewall`), so the ports must be in the block: each from
    :func:`block_port`, no two the same, with ``spark.port.maxRetries`` = :data:`PORT_RETRIES` so that a port taken
    meanwhile (a race with another process) moves up within the block. Spark's docs: Configuration,
    "Networking"; Security, "Configuring Ports for Network Security".

    Not moved: the py4j gateway the driver JVM opens for pyspark's Python (a kernel-picked port on 127.0.0.1; pyspark
    has no setting for it), which answers only a client that first sends its per-process secret (py4j's
    ``auth_token``, pyspark's ``java_gateway.launch_gateway``).

    Raises:
        PortInUseError, LabkitError: see :func:`block_port`.
    """
    env = os.environ if env is None else env
    if not env.get(RANGE_ENV):
        return {}
    names = ["spark.driver.port", "spark.blockManager.port", *(["spark.ui.port"] if ui else [])]
    drawn: set[int] = set()
    return {**{name: str(block_port(env, drawn)) for name in names}, "spark.port.maxRetries": str(PORT_RETRIES)}


def connector_jars(env: dict[str, str] | None = None, *, progress: bool = True) -> list[Path]:
    """Paths of Spark's Kafka connector jars (``spark-sql-kafka-0-10_2.13``,
    ``spark-token-provider-kafka-0-10_2.13``, ``kafka-clients`` 3.9.2, ``commons-pool2`` 2.13.1), resolved with
    Maven on first use.

    Cached in ``spark-kafka-<version>/`` of the shared cache if it holds them finished, else of ``$LABKIT_HOME``
    (:func:`labkit.broker.runtime.cache_path`), where Maven resolves them if missing: the shared cache is never
    written.

    Raises:
        MavenError: not cached, and Maven is missing or cannot reach Maven Central.
    """
    env = dict(os.environ if env is None else env)
    return maven_jars(POM, cache_path(f"spark-kafka-{SPARK_VERSION}", env), f"Spark {SPARK_VERSION} Kafka connector",
                      ["-DexcludeTransitive=true"], env=env, progress=progress)


def spark_master(env: dict[str, str] | None = None) -> str:
    """The master URL pipelines use: ``$SPARK_MASTER`` (e.g. ``spark://127.0.0.1:7077`` of
    :class:`~labkit.lab.spark_cluster.StandaloneCluster`), else :data:`LOCAL_MASTER`."""
    env = os.environ if env is None else env
    return env.get("SPARK_MASTER") or LOCAL_MASTER


def check_pyspark() -> None:
    """Check that pyspark is installed at :data:`SPARK_VERSION`.

    Raises:
        SparkSetupError: naming the fix (``make lab`` / ``pip install pyspark==<version>``).
    """
    try:
        import pyspark
    except ImportError:
        raise SparkSetupError(f"pyspark is not installed: run `make lab` (or `pip install pyspark=={SPARK_VERSION}`)") \
            from None
    if pyspark.__version__ != SPARK_VERSION:
        raise SparkSetupError(f"pyspark is {pyspark.__version__} but the Kafka connector jars are Spark "
                              f"{SPARK_VERSION}: `pip install pyspark=={SPARK_VERSION}` (requirements.txt pins it)")


def driver_class_path(env: dict[str, str] | None = None) -> str:
    """What the driver JVM loads its classes from, as one string: pyspark's ``jars/*`` (the class path
    ``spark-submit`` gives it) and the connector jars (``spark.jars``); the key of its class-data archive
    (:mod:`labkit.broker.cds`)."""
    import pyspark

    return os.pathsep.join([str(Path(pyspark.__file__).parent / "jars" / "*"),
                            *map(str, connector_jars(env, progress=False))])


def spark_conf(master: str | None = None, *, app_name: str = "labkit", ui: bool = False,
               env: dict[str, str] | None = None, class_data: list[str] | None = None) -> dict[str, str]:
    """The Spark settings of a lab session (also what :func:`spark_session` uses): the connector jars,
    everything bound to 127.0.0.1, the UI off (or on 127.0.0.1), errors-only logs, 2 shuffle partitions, the
    driver's JVM flags (:data:`JVM_FLAGS`) and class-data archive; on the hub, its listening ports in the attendee's
    block (:func:`block_ports`).

    Args:
        master: Spark master URL; default :func:`spark_master`.
        app_name: the application's name (Spark UI, the standalone master's list).
        ui: start the Spark UI (on 127.0.0.1; its port is in ``SparkContext.uiWebUrl``).
        class_data: the driver JVM's class-data sharing flags; ``None``: its archive's, if it was made
            (:func:`labkit.broker.cds.flags`; a driver start's CPU about a third lower).
    Raises:
        JavaError: no Java 17+ (Spark 4 needs it). MavenError: the connector jars cannot be resolved.
        SparkSetupError: pyspark missing or of another release.
        PortInUseError, LabkitError: on the hub, see :func:`block_port`.
    """
    env = os.environ if env is None else env
    check_pyspark()
    java = find_java(env)
    log = f"{JVM_FLAGS} -Dlog4j.configurationFile=file:{LOG4J} -Dlog4j2.configurationFile=file:{LOG4J}"
    sharing = cds.flags("spark-driver", java, driver_class_path(env)) if class_data is None else class_data
    return {"spark.master": master or spark_master(env), "spark.app.name": app_name,
            "spark.jars": ",".join(str(j) for j in connector_jars(env)),
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": str(ui).lower(), "spark.sql.shuffle.partitions": "2",
            "spark.driver.extraJavaOptions": " ".join([log, *sharing]), "spark.executor.extraJavaOptions": log,
            "spark.executor.memory": "1g", "spark.ui.showConsoleProgress": "false", **block_ports(ui, env)}


def spark_session(master: str | None = None, *, app_name: str = "labkit", ui: bool = False,
                  class_data: list[str] | None = None):
    """A ``pyspark.sql.SparkSession`` with :func:`spark_conf` (``getOrCreate``: a second call in the same
    process returns the running session). Starting one takes 5 to 30 s (a JVM).

    Args:
        master: Spark master URL; default :func:`spark_master` (``local[2]`` unless ``SPARK_MASTER`` is set).
        app_name: the application's name.
        ui: start the Spark UI on 127.0.0.1.
        class_data: the driver JVM's class-data sharing flags (:func:`spark_conf`).
    Raises:
        JavaError, MavenError, SparkSetupError, PortInUseError: see :func:`spark_conf`.
    """
    conf = spark_conf(master, app_name=app_name, ui=ui, class_data=class_data)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LAUNCHER_OPTS", JVM_FLAGS)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # a cluster's executors run Python of this venv
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
