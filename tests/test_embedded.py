"""The embedded broker, against the real Kafka JVM (``LABKIT_KAFKA_VERSION``, 4.4.0 by default)."""

import os
import socket
import subprocess
import sys
import uuid

import pytest

from labkit.broker import EmbeddedBroker
from labkit.broker.settings import FEATURES_BY_VERSION
from labkit.core.waiting import Deadline, wait_until
from labkit.core.errors import (BrokerExitedError, BrokerNotReadyError, BrokerStateError, JavaError, LabkitError,
                           PortInUseError)
from labkit.kafka.records import create_topic, produce, read_topic


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def values(frame):
    return list(frame["value"])


def test_committed_survive_a_crash_and_aborted_stay_hidden(tmp_path):
    with EmbeddedBroker(tmp_path / "b") as broker:
        bs = broker.bootstrap_servers
        topic = create_topic(bs, "crash")
        produce(bs, topic, ["c1", "c2"], transactional_id=f"tx-{uuid.uuid4()}")
        produce(bs, topic, ["a1", "a2"], transactional_id=f"tx-{uuid.uuid4()}", outcome="abort")
        port, pid = broker.port, broker.pid
        # Both COMMIT and ABORT markers are in the log before the crash: a read_committed read reaches the
        # high watermark only once the last stable offset does. (A kill between EndTxn and WriteTxnMarkers
        # can leave the abort pending across the restart: a different lesson, not this test's.)
        assert values(read_topic(bs, topic, "read_committed")) == ["c1", "c2"]

        broker.kill()
        assert not broker.is_running and gone(pid)
        with pytest.raises(BrokerStateError, match="not running"):
            broker.kill()

        mark = broker.log_size()
        broker.restart()
        assert broker.port == port and broker.bootstrap_servers == bs
        assert values(read_topic(bs, topic, "read_committed")) == ["c1", "c2"]
        assert values(read_topic(bs, topic, "read_uncommitted")) == ["c1", "c2", "a1", "a2"]
        assert broker.logged_since(mark, "Kafka Server started")  # this restart's own line
    assert (tmp_path / "b" / "kraft-logs").exists()  # close() keeps a folder the caller gave
    other = next(v for v in FEATURES_BY_VERSION if v != broker.version)
    with pytest.raises(BrokerStateError, match=rf"formatted by Kafka {broker.version}, not {other}.*LABKIT_KAFKA_VERSION"):
        EmbeddedBroker(tmp_path / "b", version=other).start()
    assert (tmp_path / "b" / "kraft-logs" / "meta.properties").exists()  # the refused start touched nothing


def test_two_brokers_side_by_side(broker, tmp_path):
    with EmbeddedBroker() as other:
        assert other.port != broker.port
        topic = create_topic(other.bootstrap_servers, "other")
        produce(other.bootstrap_servers, topic, ["only-here"])
        assert values(read_topic(other.bootstrap_servers, topic)) == ["only-here"]
        from labkit.broker.probe import admin
        assert topic not in admin(broker.bootstrap_servers).list_topics(timeout=5).topics
        data_dir = other.data_dir
    assert not data_dir.exists()  # labkit's own temporary folder is removed by close()


def test_port_in_use_is_refused_before_starting_anything(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        broker = EmbeddedBroker(tmp_path / "b", port=port)
        with pytest.raises(PortInUseError, match=str(port)):
            broker.start()
        assert not broker.is_running


def test_a_picked_port_taken_before_the_jvm_binds_it_is_picked_again(tmp_path, monkeypatch):
    # the race between parallel workers: the port was free when picked, another process binds it first
    from labkit.broker import embedded

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        picks, kernel_pick = iter([taken]), embedded.free_port
        monkeypatch.setattr(embedded, "free_port", lambda: next(picks, None) or kernel_pick())
        monkeypatch.setattr(embedded, "ensure_free", lambda port, what: None)  # the race: free when it was checked
        with EmbeddedBroker(tmp_path / "b") as broker:
            assert broker.port != taken and broker.controller_port != taken
            assert broker.logged_since(0, "Address already in use")  # the first JVM lost the race and exited
            assert values(read_topic(broker.bootstrap_servers, create_topic(broker.bootstrap_servers, "after"),
                                     "read_committed")) == []


def test_broker_exiting_during_start_reports_its_log(tmp_path):
    data = tmp_path / "b"
    with EmbeddedBroker(data) as good:
        topic = create_topic(good.bootstrap_servers, "kept")
        produce(good.bootstrap_servers, topic, ["kept"])
    bad = EmbeddedBroker(data, num_io_threads=0)  # storage is formatted: the broker itself rejects it
    with pytest.raises(BrokerExitedError, match="exited during start(.|\n)*num.io.threads"):
        bad.start()
    assert not bad.is_running
    with EmbeddedBroker(data) as again:  # nothing was lost
        assert values(read_topic(again.bootstrap_servers, topic)) == ["kept"]


def test_invalid_override_fails_at_format_naming_the_config(tmp_path):
    with pytest.raises(BrokerExitedError, match="Invalid value -5 for configuration message.max.bytes"):
        EmbeddedBroker(tmp_path / "b", message_max_bytes=-5).start()


def test_not_ready_in_time_is_an_error_and_leaves_no_jvm(tmp_path):
    broker = EmbeddedBroker(tmp_path / "b", start_timeout_s=0.5)
    with pytest.raises(BrokerNotReadyError, match="not ready within 0.5 s"):
        broker.start()
    assert not broker.is_running


def test_missing_java_is_reported_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaError, match="No Java found"):
        EmbeddedBroker(tmp_path / "b").start()
    assert not (tmp_path / "b").exists()  # no folder made, no config written


def test_state_errors_are_clear(tmp_path):
    broker = EmbeddedBroker(tmp_path / "b")
    with pytest.raises(BrokerStateError, match="call start"):
        broker.bootstrap_servers
    with pytest.raises(BrokerStateError, match="not running"):
        broker.kill()
    broker.stop()  # stopping a stopped broker does nothing
    assert broker.log_tail() == ""


def test_a_controller_is_ready_once_this_start_logged_its_server_started(tmp_path):
    """A controller has no client listener, so its log says when it is up; Kafka 4.4 logs two config dumps (450
    lines) right after "Kafka Server started" (CI once waited 60 s for a controller up in 3: it read the last 400)."""
    controller = EmbeddedBroker(tmp_path, roles="controller")  # not started: only its server.log is read
    controller.log_file.write_text("[2026-11-23 20:36:54,931] INFO [KafkaRaftServer nodeId=1] Kafka Server started "
                                   "(kafka.server.KafkaRaftServer)\n" + "\tsome.config = value\n" * 450)
    assert controller._ready(Deadline(1))
    assert controller.logged_since(0, "Kafka Server started")
    assert not controller.logged_since(controller.log_size(), "Kafka Server started")  # a later start's mark


CHILD = """
import os, signal, sys
from labkit.broker import EmbeddedBroker
b = EmbeddedBroker().start()
print(b.pid, flush=True)
if sys.argv[1] == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_no_jvm_outlives_the_interpreter(how):
    done = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True, text=True, timeout=120)
    jvm_pid = int(done.stdout.split()[0])
    assert wait_until(lambda: gone(jvm_pid), 30), f"JVM {jvm_pid} outlived its Python ({how})"


def test_the_hubs_heap_setting_caps_the_broker_and_its_cleaner_buffer(tmp_path, monkeypatch):
    """``LABKIT_BROKER_HEAP_MB`` (the workshop hub sets it) is the default heap cap and shrinks the log cleaner's
    dedupe buffer to 16 MiB; an explicit ``heap_mb`` or buffer wins; unset, 768 MiB and Kafka's buffer; a bad value is
    refused naming the variable (at construction: no folder made, no JVM)."""
    from labkit.broker.embedded import HEAP_ENV, HEAP_MB, SMALL_HEAP_DEDUPE_BUFFER

    dedupe = "log.cleaner.dedupe.buffer.size"
    monkeypatch.delenv(HEAP_ENV, raising=False)
    plain = EmbeddedBroker(tmp_path / "a")
    assert plain.heap_mb == HEAP_MB == 768 and dedupe not in plain.settings
    monkeypatch.setenv(HEAP_ENV, "256")
    hub = EmbeddedBroker(tmp_path / "b")
    assert hub.heap_mb == 256 and hub.settings[dedupe] == str(SMALL_HEAP_DEDUPE_BUFFER)
    given = EmbeddedBroker(tmp_path / "c", heap_mb=512, log_cleaner_dedupe_buffer_size=2**25)
    assert given.heap_mb == 512 and given.settings[dedupe] == str(2**25)
    for bad in ("abc", "32"):
        monkeypatch.setenv(HEAP_ENV, bad)
        with pytest.raises(LabkitError, match=HEAP_ENV):
            EmbeddedBroker(tmp_path / "d")
        assert not (tmp_path / "d").exists()
