import re
import subprocess
from pathlib import Path

import pytest

from labkit.broker import runtime
from labkit.broker.settings import (CONSUMER_SESSION_TIMEOUT_MS, DEFAULT_KAFKA_VERSION, FEATURES_BY_VERSION,
                                    LAB_SETTINGS, SHARE_LOCK_MS, config_key, kafka_at_least, kafka_version,
                                    lab_settings, render_log4j2, render_server_properties)
from labkit.core.errors import LabkitError

REPO = Path(__file__).resolve().parents[1]


def parse(props: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in props.splitlines() if line and not line.startswith("#"))


def test_server_properties_is_kraft_combined_on_loopback(tmp_path):
    props = parse(render_server_properties(data_dir=tmp_path, port=1234, controller_port=5678, settings={}))
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:1234,CONTROLLER://127.0.0.1:5678"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1234"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:5678"
    assert props["log.dirs"] == str(tmp_path / "kraft-logs")


def test_lab_settings_are_rendered_and_overridable(tmp_path):
    settings = lab_settings({"transaction_max_timeout_ms": 30000, "group.share.record.lock.duration.ms": None,
                             "auto.create.topics.enable": False})
    props = parse(render_server_properties(data_dir=tmp_path, port=1, controller_port=2, settings=settings))
    assert props["transaction.max.timeout.ms"] == "30000"
    assert "group.share.record.lock.duration.ms" not in props  # None: Kafka's default applies
    assert props["auto.create.topics.enable"] == "false"
    assert props["offsets.topic.replication.factor"] == "1"
    assert LAB_SETTINGS["transaction.max.timeout.ms"] == "60000"  # the defaults are not mutated


def test_config_key_maps_underscores_to_dots():
    assert config_key("group_share_record_lock_duration_ms") == "group.share.record.lock.duration.ms"
    assert config_key("already.dotted") == "already.dotted"


def test_single_node_settings_are_all_there():
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "share.coordinator.state.topic.replication.factor",
                "share.coordinator.state.topic.min.isr"):
        assert LAB_SETTINGS[key] == "1"
    assert LAB_SETTINGS["group.initial.rebalance.delay.ms"] == "0"


def test_the_timings_the_lessons_read_are_the_broker_settings():
    assert SHARE_LOCK_MS == int(LAB_SETTINGS["group.share.record.lock.duration.ms"]) == 5000
    assert CONSUMER_SESSION_TIMEOUT_MS == int(LAB_SETTINGS["group.consumer.session.timeout.ms"]) == 10_000


def test_kafka_version_is_4_4_0_unless_the_variable_says_otherwise():
    assert DEFAULT_KAFKA_VERSION == "4.4.0" == kafka_version(env={})
    assert kafka_version(env={"LABKIT_KAFKA_VERSION": "4.3.2"}) == "4.3.2"
    assert kafka_version("4.4.0", env={"LABKIT_KAFKA_VERSION": "4.3.2"}) == "4.4.0"  # explicit wins
    with pytest.raises(LabkitError, match=r"Kafka 3\.9\.0 is not a release labkit runs.*4\.4\.0, 4\.3\.2"):
        kafka_version(env={"LABKIT_KAFKA_VERSION": "3.9.0"})


@pytest.mark.parametrize("version", sorted(FEATURES_BY_VERSION))
def test_features_are_the_release_defaults(version):
    """What labkit formats with is what the release's own StorageTool maps its newest metadata version to."""
    jars = runtime.ensure_jars(version=version, progress=False)
    out = subprocess.run([runtime.find_java(), "-cp", runtime.classpath(jars), "kafka.tools.StorageTool",
                          "version-mapping"], capture_output=True, text=True, timeout=120).stdout
    mapping = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for feature, level in FEATURES_BY_VERSION[version].items():
        assert mapping[feature] == level, (version, feature, out)
    assert mapping["metadata.version"].split()[1].startswith(f"({version.rsplit('.', 1)[0]}-")


def test_log4j2_writes_to_the_given_file(tmp_path):
    text = render_log4j2(tmp_path / "server.log")
    assert f"appender.file.fileName = {tmp_path / 'server.log'}" in text
    assert "rootLogger.appenderRef.file.ref = FILE" in text


def test_pom_pins_the_same_kafka_version():
    pom = (REPO / "jvm" / "pom.xml").read_text()
    assert re.search(r"<kafka.version>([^<]+)</kafka.version>", pom).group(1) == DEFAULT_KAFKA_VERSION
    for artifact in ("kafka_2.13", "log4j-slf4j2-impl", "log4j-core"):
        assert f"<artifactId>{artifact}</artifactId>" in pom


def test_proxied_listener_is_advertised_at_the_proxy(tmp_path):
    props = parse(render_server_properties(data_dir=tmp_path, port=1, controller_port=2, settings={},
                                           proxied=(3, 4)))
    assert props["listeners"].endswith(",PROXIED://127.0.0.1:3")
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1,PROXIED://127.0.0.1:4"
    assert props["listener.security.protocol.map"].endswith(",PROXIED:PLAINTEXT")


def test_a_release_is_compared_number_by_number():
    assert kafka_at_least("4.4", "4.4.0") and kafka_at_least("4.3.2", "4.4.0") and kafka_at_least("4.3", "4.3.2")
    assert not kafka_at_least("4.4", "4.3.2") and not kafka_at_least("4.10", "4.4.0")
