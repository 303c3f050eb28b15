"""The explorer (MODELLED, KIP-1289): it proves the small configuration, and finds the break it must find."""

from labkit.models.explore import explore, replay

SMALL = dict(records=3, consumers=2, limit=2, max_faults=1, aborts=0)


def test_the_drafts_answer_holds_in_every_state_of_the_small_configuration():
    result = explore(**SMALL)
    assert result.complete and result.violation is None and result.finals > 0
    assert result.states > 10_000  # every fault kind was in play (no faults: a few hundred states)
    assert explore(**{**SMALL, "max_faults": 0}).states < result.states / 10


def test_releasing_a_pending_record_on_lock_expiry_breaks_exactly_once_and_the_trace_replays():
    result = explore(**{**SMALL, "lock_while_pending": "release"})
    assert result.violation and "duplicate" in result.violation
    assert ("lock_expiry", 0) in result.trace
    world, said = replay(result.trace, **{**SMALL, "lock_while_pending": "release"})
    assert result.violation in world.violations() and len(said) == len(result.trace)
    effects = [e.value_id for e in world.events if e.kind == "effect"]
    assert len(effects) > len(set(effects))  # the history shows the duplicate the timeline draws


def test_a_state_limit_stops_it_and_says_so():
    result = explore(max_states=50, **SMALL)
    assert not result.complete and "stopped at the state limit" in str(result)


def test_the_counterexample_figure_shows_the_duplicate_in_virtual_time():
    from labkit.share.timeline import share_timeline_figure
    from labkit.models.kip1289 import INPUT

    options = {**SMALL, "lock_while_pending": "release"}
    world, _ = replay(explore(**options).trace, **options)
    fig = share_timeline_figure(world.events, INPUT, "counterexample", modelled=True)
    duplicate = [t for t in fig.data if t.name == "effect written again: duplicate (sink)"]
    assert len(duplicate) == 1 and list(duplicate[0].y) == [0]
    assert fig.layout.title.text.startswith("MODELLED") and "virtual" in fig.layout.xaxis.title.text
