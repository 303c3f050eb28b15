"""The explorer (MODELLED, KIP-1289): it proves small configurations, finds the break it must find with
and without symmetry reduction, and the reduced search gives the unreduced verdicts."""

import pytest

from labkit.models.explore import explore, replay

SMALL = dict(records=3, consumers=2, limit=2, max_faults=1, aborts=0)
RELEASE = {**SMALL, "lock_while_pending": "release"}


def test_the_drafts_answer_holds_in_every_state_of_the_small_configuration():
    result = explore(**SMALL)
    assert result.complete and result.violation is None and result.finals > 0 and result.verdict == "holds"
    assert result.states > 1_000  # every fault kind was in play (no faults: a few dozen canonical states)
    assert explore(**{**SMALL, "max_faults": 0}).states < result.states / 10


@pytest.mark.parametrize("reduce", [True, False])
def test_releasing_a_pending_record_on_lock_expiry_commits_twice_found_with_and_without_reduction(reduce):
    result = explore(reduce=reduce, target="duplicate", **RELEASE)
    assert result.violation.startswith("duplicate") and result.reduced == reduce
    assert ("lock_expiry", "input-0", 0) in result.trace
    world, said = replay(result.trace, **RELEASE)
    assert result.violation in world.violations() and len(said) == len(result.trace)
    effects = [e.value_id for e in world.events if e.kind == "effect"]
    assert len(effects) > len(set(effects))  # the history shows the duplicate the timeline draws


def test_before_the_duplicate_the_release_already_shows_an_output_whose_acknowledgement_was_discarded():
    result = explore(**RELEASE)
    assert "output is committed but the record is AVAILABLE" in result.violation
    assert result.trace[-2:] == [("markers", "tx-c1", "output-0"), ("lock_expiry", "input-0", 0)]


@pytest.mark.parametrize("config", [
    dict(records=2, consumers=2, limit=2, max_faults=1, aborts=0),
    dict(records=2, consumers=2, limit=2, max_faults=1, aborts=0, lock_while_pending="abort"),
    dict(records=2, consumers=2, limit=2, max_faults=1, aborts=0, lock_while_pending="release"),
    dict(records=2, consumers=2, limit=2, max_faults=0, aborts=1, count_on_abort="revert"),
    dict(records=1, partitions=2, consumers=2, limit=2, max_faults=1, aborts=0),
    dict(records=1, partitions=2, consumers=2, limit=2, max_faults=1, aborts=0, lock_while_pending="release"),
    dict(records=1, partitions=3, state_partitions=(0, 0, 1), consumers=2, limit=2, max_faults=0, aborts=0),
    dict(records=1, partitions=2, consumers=2, limit=2, max_faults=1, aborts=0, release_in_txn=True,
         decisions={(1, 0): "RELEASE"}),
])
def test_the_reduced_search_gives_the_unreduced_verdict_in_fewer_states(config):
    reduced = explore(stop_at_first=False, **config)
    full = explore(stop_at_first=False, reduce=False, **config)
    assert reduced.verdict == full.verdict and reduced.complete and full.complete
    assert reduced.states < full.states and reduced.finals <= full.finals


@pytest.mark.parametrize("config, states, steps, finals", [
    (dict(records=2, consumers=2, limit=2, max_faults=1, aborts=0), (1971, 7748), (5414, 18367), (4, 106)),
    (dict(records=1, partitions=2, consumers=2, limit=2, max_faults=1, aborts=0), (862, 4846), (2231, 11408), (4, 60)),
    (dict(records=2, consumers=2, limit=2, max_faults=0, aborts=1, count_on_abort="revert"), (341, 1195), (833, 2514),
     (2, 26)),
])
def test_the_optimised_search_visits_the_states_the_plain_one_did(config, states, steps, finals):
    """The figures of the explorer, reduced and unreduced: a faster key or search loop must not lose or add a
    state. The unreduced ones are those before any speed-up; the reduced ones since the canonical key stopped
    naming who committed a finished record's outputs (fewer classes: 2239, 901 and 380 states before), and
    since it stopped numbering alike finished records by offset (1974 states, 5417 steps before)."""
    for reduce, n in ((True, 0), (False, 1)):
        result = explore(stop_at_first=False, reduce=reduce, **config)
        assert (result.states, result.steps, result.finals) == (states[n], steps[n], finals[n])


def test_the_search_gives_the_garbage_collector_back_as_it_found_it():
    import gc

    explore(max_states=50, **SMALL)
    assert gc.isenabled()
    gc.disable()
    try:
        explore(max_states=50, **SMALL)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_state_limit_stops_it_and_says_so():
    result = explore(max_states=50, **SMALL)
    assert not result.complete and "stopped at the state limit" in str(result) and result.verdict.startswith("unknown")


def test_the_counterexample_figure_shows_the_duplicate_in_virtual_time():
    from labkit.share.timeline import share_timeline_figure
    from labkit.models.kip1289 import INPUT

    world, _ = replay(explore(target="duplicate", **RELEASE).trace, **RELEASE)
    fig = share_timeline_figure(world.events, INPUT, "counterexample", modelled=True)
    duplicate = [t for t in fig.data if t.name == "effect written again: duplicate (sink)"]
    assert len(duplicate) == 1 and list(duplicate[0].y) == [0]
    assert fig.layout.title.text.startswith("MODELLED") and "virtual" in fig.layout.xaxis.title.text
