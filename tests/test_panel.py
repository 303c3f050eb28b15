"""The control panel drives real participant processes through the same calls a cell makes."""

import pytest

from labkit.waiting import wait_until
from labkit.history import History
from labkit.crashlab.panel import ControlPanel, ParticipantPanel
from labkit.crashlab.participant import Participant
from labkit.procs import process_state
from labkit.kafka.records import create_topic


@pytest.fixture
def producer(bootstrap, tmp_path):
    p = Participant("panel-p", "producer", history=History(tmp_path / "h.jsonl"), bootstrap=bootstrap,
                    topic=create_topic(bootstrap, "panel"), iterations=10_000, interval_ms=50).start()
    yield p
    p.stop()


def test_buttons_pause_resume_crash_restart_the_process(producer):
    panel = ParticipantPanel(producer)
    assert wait_until(lambda: producer.counters()["acked"] > 0, 30)
    panel.buttons["pause"].click()
    assert process_state(producer.pid) == "T" and "<code>paused</code>" in panel.status.value
    panel.buttons["resume"].click()
    assert producer.status == "running" and "<code>running</code>" in panel.status.value
    panel.buttons["crash"].click()
    assert producer.status == "crashed" and "<code>crashed</code>" in panel.status.value
    panel.buttons["pause"].click()  # a wrong action shows an error, and changes nothing
    assert "crashed; restart() it first" in panel.message.value and producer.status == "crashed"
    panel.buttons["restart"].click()
    assert producer.status == "running" and panel.message.value == ""


def test_the_client_selector_restarts_the_participant_on_kafkas_java_client(producer):
    panel = ParticipantPanel(producer)
    assert panel.client.options == ("librdkafka", "java") and "producer on librdkafka" in panel.title.value
    panel.client.value = "java"
    assert producer.spec["client"] == "librdkafka"  # nothing happens until Restart
    before = producer.counters()["acked"]
    panel.press("restart")
    assert producer.spec["client"] == "java" and "producer on java" in panel.title.value
    assert wait_until(lambda: producer.counters()["acked"] > before, 60)
    with open(f"/proc/{producer.pid}/cmdline", "rb") as f:
        assert b"labkit.participant.Main" in f.read()  # a JVM now


def test_control_panel_refreshes_counters_in_the_background(producer):
    panel = ControlPanel([producer], interval_s=0.2)
    try:
        assert wait_until(lambda: "acked 0 " not in panel.panels["panel-p"].status.value, 30)
        panel.press("panel-p", "pause")
        assert producer.status == "paused"
        with pytest.raises(ValueError, match="unknown action 'freeze'"):
            panel.press("panel-p", "freeze")
    finally:
        panel.close()


def test_a_share_consumer_panel_counts_deliveries_not_sends(tmp_path):
    share = Participant("sc", "share_consumer", history=History(tmp_path / "h.jsonl"), bootstrap="127.0.0.1:1",
                        topic="t", group_id="g")
    panel = ParticipantPanel(share)
    assert not panel.client.disabled
    assert panel.status.value == "<code>not started</code> · delivered 0 · ack committed 0 · effects 0"
