"""`make reset`: the lab's topics and experiment files go, everything else stays; with the lab broker running
(here LABKIT_BOOTSTRAP) and with it stopped (its data folder opened, cleaned and closed), on real brokers."""

import subprocess
import sys

import pytest
from confluent_kafka.admin import NewTopic

from labkit.broker import EmbeddedBroker
from labkit.broker.probe import admin
from labkit.crashlab.experiment import Experiment
from labkit.errors import BrokerUnreachableError
from labkit.kafka.records import create_topic
from labkit.reset import lab_topics, reset


def test_which_names_are_the_labs():
    assert lab_topics(["lab-0a1b2c3d", "soak1-input-deadbeef", "orders", "__consumer_offsets", "_labkit_ready",
                       "x-0A1B2C3D", "lab-0a1b2c3", "lab-0a1b2c3d-copy"]) == ["lab-0a1b2c3d", "soak1-input-deadbeef"]


def own_topic(bootstrap: str, name: str) -> None:
    client = admin(bootstrap)
    client.create_topics([NewTopic(name, 1, 1)])[name].result(10)


def topics(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


@pytest.fixture(scope="module")
def bootstrap():  # a broker of its own: reset deletes every lab topic of the broker it is pointed at
    with EmbeddedBroker() as b:
        yield b.bootstrap_servers


def test_reset_against_the_broker_the_lab_uses(bootstrap, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.setenv("LABKIT_BOOTSTRAP", bootstrap)
    exp = Experiment("reset", bootstrap)  # its history goes to $LABKIT_HOME/experiments
    mine = [exp.topic("input"), create_topic(bootstrap, "lab")]
    exp.history.append("start", "lab")
    other = f"orders-{tmp_path.name}"  # a learner's own topic: not the lab's naming
    own_topic(bootstrap, other)
    (tmp_path / "kafka-4.4.0").mkdir()
    (tmp_path / "kafka-4.4.0" / "a.jar").write_text("jar")

    out = subprocess.run([sys.executable, "-m", "labkit", "reset"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{bootstrap}: deleted 2 lab topics" in out.stdout and "experiment files" in out.stdout
    left = topics(bootstrap)
    assert not set(mine) & left and other in left and "_labkit_ready" in left
    assert not (tmp_path / "experiments").exists() and (tmp_path / "kafka-4.4.0" / "a.jar").exists()


def test_reset_opens_a_stopped_lab_brokers_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.delenv("LABKIT_BOOTSTRAP", raising=False)
    data = tmp_path / "lab" / "broker-data-4.4.0"
    with EmbeddedBroker(data, version="4.4.0") as b:
        mine, other = create_topic(b.bootstrap_servers, "lab"), "orders"
        own_topic(b.bootstrap_servers, other)
    assert f"{data}: deleted 1 lab topics" in reset()[0]
    with EmbeddedBroker(data, version="4.4.0") as b:
        left = topics(b.bootstrap_servers)
    assert mine not in left and other in left


def test_an_unreachable_broker_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.setenv("LABKIT_BOOTSTRAP", "127.0.0.1:1")
    with pytest.raises(BrokerUnreachableError, match="127.0.0.1:1"):
        reset()
