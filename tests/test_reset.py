"""`make reset`: the topics the lab created and the experiment files go, everything else stays (a learner's topics
too, whatever their names); with the lab broker running, with it stopped (its data folder opened, cleaned and
closed), and on a broker that is not the lab's (asked first, or `--yes`), on real brokers."""

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka.admin import NewTopic

from labkit.broker import EmbeddedBroker
from labkit.broker.probe import admin
from labkit.core.errors import BrokerUnreachableError
from labkit.crashlab.experiment import Experiment
from labkit.kafka.ledger import ledger, record_created_topic
from labkit.kafka.records import create_topic
from labkit.lab.reset import ResetNotConfirmed, lab_topics, reset
from labkit.lab.server import start_time

#: Users' topics whose names look like the lab's `<prefix>-<8 hex digits>`: never the lab's.
LOOKALIKES = ["orders-20260101", "payments-deadbeef", "audit-log-00000001"]


def cluster_id(bootstrap: str) -> str:
    return admin(bootstrap).list_topics(timeout=10).cluster_id


def test_which_topics_are_the_labs(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    record_created_topic("c1", "lab-0a1b2c3d")
    record_created_topic("c2", "soak1-input-deadbeef")  # another cluster's
    names = ["lab-0a1b2c3d", "soak1-input-deadbeef", "orders", "__consumer_offsets", "_labkit_ready", *LOOKALIKES]
    assert lab_topics("c1", names) == ["lab-0a1b2c3d"]
    assert lab_topics("c2", names) == ["soak1-input-deadbeef"]
    assert lab_topics("c3", names) == []
    assert json.loads(ledger().read_text().splitlines()[0]) == {"cluster": "c1", "topic": "lab-0a1b2c3d"}


def own_topic(bootstrap: str, name: str) -> None:
    client = admin(bootstrap)
    client.create_topics([NewTopic(name, 1, 1)])[name].result(10)


def topics(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


@pytest.fixture(scope="module")
def bootstrap():  # a broker of its own: reset deletes every lab topic of the broker it is pointed at
    with EmbeddedBroker() as b:
        for name in LOOKALIKES:
            own_topic(b.bootstrap_servers, name)
        yield b.bootstrap_servers


def as_the_lab_broker(bootstrap: str, home) -> None:
    """Make ``bootstrap`` the running lab broker of ``home`` (its state file names this test's process)."""
    (home / "lab").mkdir(exist_ok=True)
    (home / "lab" / "broker.json").write_text(json.dumps(
        {"pid": os.getpid(), "started": start_time(os.getpid()), "bootstrap": bootstrap}))


def test_reset_against_the_lab_broker_keeps_users_topics(bootstrap, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.delenv("LABKIT_BOOTSTRAP", raising=False)
    as_the_lab_broker(bootstrap, tmp_path)
    exp = Experiment("reset", bootstrap)  # its history goes to $LABKIT_HOME/experiments
    mine = [exp.topic("input"), create_topic(bootstrap, "lab")]
    exp.history.append("start", "lab")
    other = f"orders-{tmp_path.name}"  # a learner's own topic
    own_topic(bootstrap, other)
    (tmp_path / "kafka-4.4.0").mkdir()
    (tmp_path / "kafka-4.4.0" / "a.jar").write_text("jar")

    out = subprocess.run([sys.executable, "-m", "labkit", "reset"], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)  # the lab's own broker: no question
    assert out.returncode == 0, out.stderr
    assert f"{bootstrap}: deleted 2 lab topics" in out.stdout and "experiment files" in out.stdout
    left = topics(bootstrap)
    assert not set(mine) & left and {other, "_labkit_ready", *LOOKALIKES} <= left
    assert not (tmp_path / "experiments").exists() and (tmp_path / "kafka-4.4.0" / "a.jar").exists()
    assert lab_topics(cluster_id(bootstrap), list(left) + mine) == []  # forgotten once deleted


def test_another_broker_is_asked_first_and_yes_skips_the_question(bootstrap, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.setenv("LABKIT_BOOTSTRAP", bootstrap)  # no lab broker runs: not the lab's own
    mine = create_topic(bootstrap, "lab")
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "h.jsonl").write_text("{}\n")

    no_tty = subprocess.run([sys.executable, "-m", "labkit", "reset"], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert no_tty.returncode == 1 and "--yes" in no_tty.stderr and mine in no_tty.stdout
    assert mine in topics(bootstrap) and (tmp_path / "experiments" / "h.jsonl").exists()  # nothing deleted
    with pytest.raises(ResetNotConfirmed, match="--yes"):
        reset(confirm=lambda where, names: names != [mine])  # said no

    out = subprocess.run([sys.executable, "-m", "labkit", "reset", "--yes"], capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert f"{bootstrap}: deleted 1 lab topics" in out.stdout
    assert mine not in topics(bootstrap) and set(LOOKALIKES) <= topics(bootstrap)


def test_reset_opens_a_stopped_lab_brokers_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.delenv("LABKIT_BOOTSTRAP", raising=False)
    data = tmp_path / "lab" / "broker-data-4.4.0"
    with EmbeddedBroker(data, version="4.4.0") as b:
        mine, other = create_topic(b.bootstrap_servers, "lab"), "orders-20260101"
        own_topic(b.bootstrap_servers, other)
    assert f"{data}: deleted 1 lab topics" in reset(confirm=lambda *_: pytest.fail("the lab's own data: no question"))[0]
    with EmbeddedBroker(data, version="4.4.0") as b:
        left = topics(b.bootstrap_servers)
    assert mine not in left and other in left


def test_an_unreachable_broker_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.setenv("LABKIT_BOOTSTRAP", "127.0.0.1:1")
    with pytest.raises(BrokerUnreachableError, match="127.0.0.1:1"):
        reset()
