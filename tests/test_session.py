"""labkit.spark.session: the connector jars from Maven, the master, the settings, and the errors that name a fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pyspark
from labkit.errors import JavaError, MavenError
from labkit.spark import session


def test_connector_jars_are_exactly_the_four():
    names = sorted(j.name for j in session.connector_jars(progress=False))
    assert names == ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar",
                     f"spark-sql-kafka-0-10_2.13-{session.SPARK_VERSION}.jar",
                     f"spark-token-provider-kafka-0-10_2.13-{session.SPARK_VERSION}.jar"]


def test_pyspark_matches_the_connector():
    assert pyspark.__version__ == session.SPARK_VERSION
    session.check_pyspark()


def test_pyspark_of_another_release_is_refused(monkeypatch):
    monkeypatch.setattr(pyspark, "__version__", "4.0.0")
    with pytest.raises(session.SparkSetupError, match=r"pip install pyspark==4\.2\.0"):
        session.check_pyspark()


def test_master_is_local_unless_spark_master_is_set():
    assert session.spark_master({}) == "local[2]"
    assert session.spark_master({"SPARK_MASTER": "spark://127.0.0.1:7077"}) == "spark://127.0.0.1:7077"


def test_conf_binds_to_loopback_with_the_jars_and_no_ui():
    conf = session.spark_conf(app_name="t")
    assert conf["spark.master"] == session.spark_master() and conf["spark.ui.enabled"] == "false"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert len(conf["spark.jars"].split(",")) == 4 and "spark.jars.packages" not in conf
    assert str(session.LOG4J) in conf["spark.driver.extraJavaOptions"]


def test_missing_java_names_the_fix(tmp_path):
    env = {"PATH": str(tmp_path), "LABKIT_HOME": str(tmp_path)}
    with pytest.raises(JavaError, match="openjdk-17"):
        session.spark_conf(env=env)


def test_missing_maven_names_the_fix(tmp_path):
    java_dir = os.path.dirname(os.path.realpath(subprocess.run(["which", "java"], capture_output=True, text=True).stdout.strip()))
    env = {"PATH": java_dir, "LABKIT_HOME": str(tmp_path)}
    with pytest.raises(MavenError, match="Install Maven"):
        session.connector_jars(env, progress=False)


def test_a_session_reads_kafka_with_the_connector(bootstrap, tmp_path):
    """A real local[2] session (in a subprocess: one SparkContext per process) reads a topic through the connector;
    its driver JVM maps the driver's class-data archive (the memory maps of the JVM, as the OS reports them)."""
    from labkit.broker import cds, kafka_version
    from labkit.jvm_archives import make_archives
    from labkit.kafka.records import create_topic, produce

    make_archives(kafka_version())  # done by `python -m labkit jars` in make test; a no-op then
    topic = create_topic(bootstrap, "session")
    produce(bootstrap, topic, ["a", "b", "c"])
    job = ("import psutil\nfrom labkit.spark import spark_session\n"
           "s = spark_session(app_name='t')\n"
           f"df = s.read.format('kafka').option('kafka.bootstrap.servers', {bootstrap!r}).option('subscribe', {topic!r}).load()\n"
           "print(sorted(r.v for r in df.selectExpr('CAST(value AS STRING) v').collect()), s.sparkContext.master)\n"
           "print(sorted({m.path for p in psutil.Process().children(recursive=True) if p.name() == 'java' "
           "for m in p.memory_maps() if m.path.endswith('.jsa')}))\n")
    done = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "['a', 'b', 'c'] local[2]" in done.stdout
    archive = cds.archive("spark-driver", session.find_java(), session.driver_class_path())
    assert str(archive) in done.stdout.splitlines()[-1]
