"""Notebook 06's playground on the real broker: nothing runs until Start (a Run All learner reaches it alive), and a
re-run of its cell (``labkit.only``) stops the last run's players and shows only its own run (issue 65, item 5)."""

from labkit.core.waiting import wait_until
from labkit.learn.rerun import only
from labkit.lessons.share_groups import playground
from labkit.lessons.share_playground import START, Playground

#: A small playground: 2 records, one a poll, 100 ms each; the broker's shortest lock (1 s); idle 3 s.
SMALL = dict(records=2, players=2, per_record_ms=100, poll_records=1, lock_ms=1000, idle_ms=3000)


def test_nothing_runs_until_start_and_a_rerun_stops_the_last_run_and_counts_its_own(bootstrap, tmp_path):
    first = only("test-playground", lambda: Playground(bootstrap, playground, name="pg-test", **SMALL))
    try:
        assert first.exp is None and first.players == [] and first.button.description == START
        assert len(first.widget.children) == 1  # the button row alone: no panel, no timeline yet
        first.button.click()
        assert first.message.value.startswith("Started"), first.message.value
        assert [p.status for p in first.players] == ["running", "running"]
        assert len(first.widget.children) == 3 and first.button.disabled  # then the panel and the timeline
        assert wait_until(lambda: sum(p.counters()["delivered"] for p in first.players) == 2, 60)
        first.panel.press("player-1", "pause")
        # the cell again: the first playground closed (its players stopped, the paused one resumed first) before the
        # second is made; the second starts from nothing, its history its own
        second = only("test-playground", lambda: Playground(bootstrap, playground, name="pg-test", **SMALL))
        assert {p.status for p in first.players} <= {"stopped", "finished"}, [p.status for p in first.players]
        second.start()
        assert second.exp.history.path != first.exp.history.path
        assert wait_until(lambda: sum(p.counters()["delivered"] for p in second.players) == 2, 60)
        assert not any(e.kind == "pause" for e in second.exp.history.events())
        fig = second.live.widget
        assert not [a.text for a in fig.layout.annotations if "pause" in a.text]
    finally:
        only("test-playground", lambda: Playground(bootstrap, playground)).close()  # the second closed; a third, unstarted


def test_a_failed_start_raises_leaves_nothing_started_and_the_button_can_try_again():
    def refused(exp, **options):
        raise ValueError(f"lock_ms out of range: {options}")

    play = Playground("127.0.0.1:9", refused, lock_ms=0)
    play.button.click()  # the button shows the error instead of raising it into no cell
    assert "ValueError: lock_ms out of range" in play.message.value and not play.button.disabled
    assert play.exp is None and play.players == [] and len(play.widget.children) == 1
    play.close()
    assert play.button.disabled
