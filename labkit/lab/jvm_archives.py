"""Make the class-data sharing archives of the JVMs the lab starts.

The archives (:mod:`labkit.broker.cds`) of the JVMs the lab starts by the hundred: the
broker's and the Java participant's, once per Kafka release, JDK and participant source, and the Spark driver's
(``python -m labkit jars`` does it after resolving the jars; ``make lab`` and ``make test`` run that).

The archive holds the classes one typical run loaded: a broker started, serving a transactional producer (KIP-98) and
a group consumer (KIP-848), then stopped with SIGTERM, when the JVM writes the archive; the Java participant's from
the same transactional producer and consumer run to their end; the Spark driver's from a batch read of their topic
with Spark's Kafka connector and a short streaming query. Classes a later run needs
beyond those load as usual. About 20 s of wall time per release, and 40 s for Spark, once.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile

import psutil

from labkit.broker import EmbeddedBroker, cds, launcher, runtime
from labkit.crashlab import java
from labkit.crashlab.experiment import Experiment
from labkit.spark.session import driver_class_path

#: How long one archive run's participant may take (s), on a machine twice as slow as a laptop.
RUN_TIMEOUT_S = 180


def make_archives(version: str) -> list[str]:
    """Make the archives of the broker, the Java participant and the Spark driver for Kafka ``version`` where they
    are missing (the Spark driver's does not depend on the release: it is made once); returns what was made (e.g.
    ``["broker", "participant", "spark-driver"]``).

    Raises:
        JavaError, MavenError: no Java 17+ (a JDK for the participant) or no jars.
        SparkSetupError: pyspark missing or of another release.
        BrokerExitedError, BrokerNotReadyError: the broker did not start.
        subprocess.CalledProcessError, subprocess.TimeoutExpired: a run failed, or ran past :data:`RUN_TIMEOUT_S`.
    """
    jvm = runtime.find_java()
    class_paths = {"broker": launcher.class_path(version)[0],
                   "participant": java.class_path(version), "spark-driver": driver_class_path()}
    missing = [kind for kind, cp in class_paths.items() if not cds.archive(kind, jvm, cp).exists()]
    if not missing:
        return []
    with contextlib.ExitStack() as stack:  # unwound in reverse: the broker stops (SIGTERM: its JVM writes its archive
        # as it ends), then each archive is published
        flags = {kind: stack.enter_context(cds.dumping(kind, jvm, class_paths[kind])) for kind in missing}
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="labkit-cds-"))
        broker = stack.enter_context(EmbeddedBroker(version=version, class_data=flags.get("broker")))
        topic = _run_participants(broker.bootstrap_servers, folder, version, flags.get("participant"))
        if "spark-driver" in flags:
            _run_spark(broker.bootstrap_servers, topic, flags["spark-driver"])
    return missing


def _run_participants(bootstrap: str, folder: str, version: str, class_data: list[str] | None) -> str:
    """A Java transactional producer and a Java group consumer of its records, each run to its end with
    ``class_data`` (``None``: the participant archive's flags); returns their topic."""
    exp = Experiment("cds", bootstrap, folder=folder)
    topic = exp.topic("records")
    specs = [exp.participant("producer", "producer", client="java", topic=topic, mode="transactional",
                             transactional_id=f"{topic}-tid", iterations=3, batch=5),
             exp.participant("consumer", "consumer", client="java", topic=topic, group_id=f"{topic}-group",
                             idle_ms=1000)]
    for p in specs:
        subprocess.run([*java.command(version, class_data=class_data), json.dumps(p.spec)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S)
    return topic


#: The Spark driver's run: a batch read of the topic with Spark's Kafka connector, a small aggregation and a short
#: streaming query; it prints the pids of its JVMs, which write the archive once the driver's Python has ended.
SPARK_RUN = """
import json, sys, time, psutil
from labkit.spark.session import spark_session
spark = spark_session(class_data=json.loads(sys.argv[1]), app_name="labkit-cds")
spark.read.format("kafka").option("kafka.bootstrap.servers", sys.argv[2]).option("subscribe", sys.argv[3]).load() \
    .selectExpr("CAST(value AS STRING) AS v").groupBy("v").count().collect()
query = spark.readStream.format("rate").option("rowsPerSecond", 50).load().writeStream.format("noop").start()
time.sleep(3)
query.stop()
print(json.dumps([p.pid for p in psutil.Process().children(recursive=True) if p.name() == "java"]))
spark.stop()
"""


def _run_spark(bootstrap: str, topic: str, class_data: list[str]) -> None:
    """A Spark driver's run (:data:`SPARK_RUN`) with ``class_data``; returns once its JVM has ended."""
    out = subprocess.run([sys.executable, "-c", SPARK_RUN, json.dumps(class_data), bootstrap, topic], check=True,
                         capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    jvms = [psutil.Process(pid) for pid in json.loads(out.stdout.strip().splitlines()[-1]) if psutil.pid_exists(pid)]
    psutil.wait_procs(jvms, timeout=RUN_TIMEOUT_S)
