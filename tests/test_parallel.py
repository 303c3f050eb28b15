"""The explorer on several processes (MODELLED, KIP-1289): the states, steps, final states and verdicts of
the one-process search, a shortest counterexample that replays, and a failing worker reported, not waited on."""

import pytest

from labkit.models import parallel
from labkit.models.explore import explore, replay
from labkit.models.kip1289 import World
from labkit.models.symmetry import Canon

RELEASE = dict(records=3, consumers=2, limit=2, max_faults=1, aborts=0, lock_while_pending="release")


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("config", [
    dict(records=2, consumers=2, limit=2, max_faults=1, aborts=0),
    dict(records=1, partitions=2, consumers=2, limit=2, max_faults=1, aborts=0),
    dict(records=2, consumers=2, limit=2, max_faults=0, aborts=1, count_on_abort="revert"),
    dict(records=1, consumers=3, limit=2, max_faults=1, aborts=0),
])
def test_several_processes_visit_the_states_one_does(config, workers):
    one = explore(stop_at_first=False, **config)
    many = explore(stop_at_first=False, workers=workers, **config)
    assert (many.states, many.steps, many.finals, many.verdict) == (one.states, one.steps, one.finals, one.verdict)
    assert many.complete and one.verdict == "holds"
    unreduced = explore(stop_at_first=False, reduce=False, workers=workers, **config)
    assert unreduced.states == explore(stop_at_first=False, reduce=False, **config).states


def test_the_lock_release_double_commit_is_found_as_short_and_replays():
    one = explore(target="duplicate", **RELEASE)
    many = explore(target="duplicate", workers=2, **RELEASE)
    assert many.violation.startswith("duplicate") and len(many.trace) == len(one.trace)
    world, said = replay(many.trace, **RELEASE)
    assert many.violation in world.violations() and len(said) == len(many.trace)


def test_a_state_limit_stops_it_and_says_so():
    result = explore(max_states=200, workers=2, **RELEASE)
    assert not result.complete and result.states >= 200 and result.verdict.startswith("unknown")


def test_a_failing_worker_is_reported_with_its_traceback():
    start = World(history=False, **RELEASE)
    canon, calls = Canon(start), [0]

    def key(world):
        calls[0] += 1
        if calls[0] > 30:
            raise KeyError("a key that cannot be made")
        return canon.key(world)

    with pytest.raises(RuntimeError, match=r"(?s)explorer worker \d failed:.*a key that cannot be made"):
        parallel.search(start, key, 10_000, False, None, 2)


def test_no_fewer_than_one_process():
    with pytest.raises(ValueError, match="workers must be at least 1"):
        explore(workers=0, **RELEASE)
