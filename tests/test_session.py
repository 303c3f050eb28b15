"""labkit.spark.session: the connector jars from Maven, the master, the settings, and the errors that name a fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import pyspark
from labkit.core.errors import JavaError, MavenError
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
    from labkit.lab.jvm_archives import make_archives
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


def test_connector_jars_are_read_from_the_shared_cache_first(tmp_path):
    """A finished ``spark-kafka-<version>`` of ``LABKIT_SHARED_CACHE`` is used as it is (no Maven: PATH is empty);
    an unfinished one (no ``.complete``) is not, and the jars are then made in ``$LABKIT_HOME``, not there."""
    shared = tmp_path / "shared" / f"spark-kafka-{session.SPARK_VERSION}"
    shared.mkdir(parents=True)
    (shared / "kafka-clients-3.9.2.jar").write_bytes(b"jar")
    env = {"PATH": "", "LABKIT_HOME": str(tmp_path / "home"), "LABKIT_SHARED_CACHE": str(tmp_path / "shared")}
    with pytest.raises(MavenError, match=str(tmp_path / "home")):
        session.connector_jars(env, progress=False)
    (shared / ".complete").touch()
    assert session.connector_jars(env, progress=False) == [shared / "kafka-clients-3.9.2.jar"]
    assert not (tmp_path / "home").exists()


def _a_block() -> range:
    """A block of 100 of the lab's ports, at random (``LABKIT_PORT_RANGE``: labs sharing one machine's loopback)."""
    from labkit.broker.ports import PORT_RANGE, free_port

    start = min(free_port(), PORT_RANGE.stop - 100)
    return range(start, start + 100)


def test_without_a_port_block_spark_picks_its_ports():
    assert session.block_ports(True, {}) == {}


def test_block_ports_leave_room_for_spark_retries():
    block = _a_block()
    conf = session.block_ports(True, {"LABKIT_PORT_RANGE": f"{block.start}-{block.stop - 1}"})
    assert conf["spark.port.maxRetries"] == str(session.PORT_RETRIES)
    ports = [int(conf[k]) for k in ("spark.driver.port", "spark.blockManager.port", "spark.ui.port")]
    assert all(block.start <= p < block.stop - session.PORT_RETRIES for p in ports)


def test_a_driver_given_a_port_range_listens_only_in_it():
    """With ``LABKIT_PORT_RANGE`` set, a real local[2] driver with its UI, after a job, listens
    (as the OS reports its JVM's sockets) only on ports of the block, but for pyspark's py4j gateway (a
    secret-guarded port pyspark picks); the UI's port is one of them."""
    block = _a_block()
    job = ("import json, psutil\nfrom labkit.spark import spark_session\n"
           "s = spark_session(app_name='t', ui=True)\nassert s.range(100).count() == 100\n"
           "ports = sorted({c.laddr.port for p in psutil.Process().children(recursive=True) if p.name() == 'java' "
           "for c in p.net_connections('inet') if c.status == psutil.CONN_LISTEN})\n"
           "print(json.dumps([ports, s.sparkContext._gateway.gateway_parameters.port, s.sparkContext.uiWebUrl]))\n")
    env = {**os.environ, "LABKIT_PORT_RANGE": f"{block.start}-{block.stop - 1}"}
    done = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ports, gateway, ui_url = json.loads(done.stdout.strip().splitlines()[-1])
    assert gateway in ports and gateway not in block
    inside = set(ports) - {gateway}
    assert len(inside) >= 3 and inside <= set(block), (ports, block)  # RPC, block manager, UI
    assert int(ui_url.rsplit(":", 1)[1]) in inside
