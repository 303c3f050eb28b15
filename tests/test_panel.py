"""The control panel drives real participant processes through the same calls a cell makes; a press and the
background refresh on a fake participant."""

import threading
import time
from types import SimpleNamespace

import pytest

from labkit.core.history import History
from labkit.core.procs import process_state
from labkit.core.waiting import wait_until
from labkit.crashlab.panel import ControlPanel, ParticipantPanel
from labkit.crashlab.participant import Participant
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


class Counting:
    """A participant without a process, whose every action counts (its counter ``actions``). A busy machine
    holds up a thread anywhere: here the panel's thread, for 1 ms after it read the counters and before it shows
    them."""

    name, role, status, stalled_in = "counting", "producer", "running", None
    role_def = SimpleNamespace(clients=("librdkafka",))

    def __init__(self) -> None:
        self.spec, self.actions = {"client": "librdkafka"}, 0

    def counters(self) -> dict[str, int]:
        n = self.actions
        if threading.current_thread().name == "labkit-panel":
            time.sleep(0.001)
        return {"actions": n}

    def pause(self) -> None:
        self.actions += 1


def test_a_press_shows_what_it_did_while_the_thread_refreshes_at_full_speed():
    """A fake participant (:class:`Counting`: no process, so refreshes are as fast as the panel is), a panel
    refreshed in the background without pause: for two seconds the test presses and reads the panel at once, and
    it shows what the press did, never what the thread read before the press (the press's own refresh is not
    overwritten)."""
    counting = Counting()
    panel = ControlPanel([counting], interval_s=1e-6)
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            panel.press("counting", "pause")
            shown = panel.panels["counting"].status.value
            assert shown.endswith(f"actions {counting.actions}"), (shown, counting.actions)
    finally:
        panel.close()
    assert counting.actions > 100


#: DejaVu Sans's advance widths (its ``hmtx`` table, units per em 2048) of the letters of the buttons' labels: the
#: widest of the sans-serif fonts JupyterLab's widget font falls back to on Linux (Arial, Liberation Sans and
#: Helvetica are narrower). A letter not listed counts a whole em.
DEJAVU_SANS = {"C": 1430, "P": 1235, "R": 1423, "a": 1255, "e": 1260, "h": 1298, "m": 1995, "r": 842, "s": 1067,
               "t": 803, "u": 1298}
FONT_PX = 13  # --jp-widgets-font-size (--jp-ui-font-size1)
BUTTON_PADDING_PX, ICON_EM, ICON_MARGIN_PX = 2 * 10, 1.25, 4  # .jupyter-button padding; fa-fw width; its margin


def text_px(label: str) -> float:
    return sum(DEJAVU_SANS.get(ch, 2048) for ch in label) / 2048 * FONT_PX


def test_every_button_shows_its_whole_label_and_the_row_wraps_instead_of_shrinking_them():
    """Issue 37, item 5: at 1280 px with JupyterLab's file browser open, Resume and Restart shrank to "Res…" and
    "Res…". Each button now has its own label and tooltip; it never shrinks (flex 0 0 auto) below a minimum width
    that fits its label (and its icon, if it has one) and its padding; the row wraps (a whole item onto the next
    line), and the status line is never squeezed into a narrow column."""
    panel = ParticipantPanel(Counting())
    buttons = panel.buttons.values()
    for attribute in ("description", "tooltip"):
        values = [getattr(b, attribute) for b in buttons]
        assert all(values) and len(set(values)) == len(values), (attribute, values)
    assert [b.description for b in buttons] == ["Crash", "Pause", "Resume", "Restart"]
    for b in buttons:
        icon = ICON_EM * FONT_PX + ICON_MARGIN_PX if b.icon else 0
        needed = BUTTON_PADDING_PX + icon + text_px(b.description)
        assert b.layout.flex == "0 0 auto" and b.layout.width in (None, "auto"), (b.description, b.layout)
        assert float(b.layout.min_width.removesuffix("px")) >= needed, (b.description, b.layout.min_width, needed)
    assert "wrap" in panel.widget.layout.flex_flow and "wrap" in panel.controls.layout.flex_flow
    assert panel.controls.layout.flex == panel.title.layout.flex == panel.client.layout.flex == "0 0 auto"
    assert float(panel.status.layout.min_width.removesuffix("px")) >= 300, panel.status.layout
    assert list(panel.widget.children) == [panel.title, panel.controls, panel.client, panel.status, panel.message]
