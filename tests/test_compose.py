"""docker-compose.yml is not run here (no Docker engine); these tests keep it equal to the
embedded broker's settings so the two never drift."""

from pathlib import Path

import yaml

from labkit.broker.settings import DEFAULT_KAFKA_VERSION, LAB_SETTINGS

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text())
KAFKA = COMPOSE["services"]["kafka"]
ENV = KAFKA["environment"]


def env_to_config(name: str) -> str:
    """The apache/kafka image's rule: KAFKA_ prefix, '_' for '.'."""
    return name.removeprefix("KAFKA_").lower().replace("_", ".")


def test_image_is_the_pinned_kafka():
    assert KAFKA["image"] == f"apache/kafka:{DEFAULT_KAFKA_VERSION}"


def test_every_lab_setting_is_in_compose_with_the_same_value():
    compose_settings = {env_to_config(k): str(v) for k, v in ENV.items()}
    for key, value in LAB_SETTINGS.items():
        assert compose_settings.get(key) == value, key


def test_compose_has_no_lab_setting_the_broker_lacks():
    structural = {"node.id", "process.roles", "controller.quorum.voters", "listeners", "advertised.listeners",
                  "controller.listener.names", "inter.broker.listener.name", "listener.security.protocol.map",
                  "heap.opts"}
    extra = {env_to_config(k) for k in ENV} - set(LAB_SETTINGS) - structural
    assert extra == set()


def test_one_kraft_node_bound_to_loopback():
    assert ENV["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert ENV["KAFKA_NODE_ID"] == "1"
    assert all(str(p).startswith("127.0.0.1:") for p in KAFKA["ports"])
    assert ENV["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://127.0.0.1:9092,PROXIED://127.0.0.1:9094"


def test_proxied_listener_matches_what_the_embedded_broker_renders(tmp_path):
    from labkit.broker.settings import render_server_properties

    props = dict(line.split("=", 1) for line in render_server_properties(
        data_dir=tmp_path, port=9092, controller_port=9093, settings={}, proxied=(9095, 9094)).splitlines())
    assert props["advertised.listeners"] == ENV["KAFKA_ADVERTISED_LISTENERS"]
    assert props["listener.security.protocol.map"] == ENV["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
    assert "127.0.0.1:9095:9095" in KAFKA["ports"]
