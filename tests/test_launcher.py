"""labkit.broker.launcher: a new broker formats its storage in the JVM that runs it; a Java without javac formats in
a JVM of its own; a bad config fails at format either way, naming it. Real brokers."""

import psutil
import pytest

from labkit.broker import EmbeddedBroker, javac, launcher
from labkit.core.errors import BrokerExitedError
from labkit.kafka.records import create_topic, produce, read_topic


def test_a_new_broker_formats_its_storage_in_the_jvm_that_runs_it(tmp_path):
    with EmbeddedBroker(tmp_path / "b") as broker:
        cmdline = psutil.Process(broker.pid).cmdline()
        assert cmdline[cmdline.index(launcher.MAIN):][:3] == [launcher.MAIN, str(tmp_path / "b" / "server.properties"),
                                                              "format"]
        assert "Formatting dynamic metadata voter directory" in (tmp_path / "b" / "jvm.out").read_text()  # StorageTool, in it
        topic = create_topic(broker.bootstrap_servers, "launcher")
        produce(broker.bootstrap_servers, topic, ["a"])
        assert list(read_topic(broker.bootstrap_servers, topic)["value"]) == ["a"]
        assert (tmp_path / "b" / "kafka-version").read_text().strip() == broker.version


def without_javac(*args, **kwargs):
    raise javac.NoJavacError("no javac (a JRE)")


def test_without_javac_the_storage_is_formatted_in_a_jvm_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(javac, "compiled", without_javac)
    with pytest.raises(BrokerExitedError, match="Invalid value -5 for configuration message.max.bytes"):
        EmbeddedBroker(tmp_path / "bad", message_max_bytes=-5).start()
    with EmbeddedBroker(tmp_path / "b") as broker:
        cmdline = psutil.Process(broker.pid).cmdline()
        assert launcher.MAIN not in cmdline and cmdline[-2:] == ["kafka.Kafka", str(tmp_path / "b" / "server.properties")]
        assert "Formatting" not in (tmp_path / "b" / "jvm.out").read_text()
        assert (broker.log_dirs / "meta.properties").exists()
