"""The short soak (bench/soak.py is the long one), on a broker of the test's own (it is killed)."""

import pytest

from labkit.broker import EmbeddedBroker
from labkit.crashlab.soak import SoakResult, run_schedule, summary


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("soaked")) as b:
        yield b


def test_kip447_processors_survive_kills_and_a_broker_crash_exactly_once(own_broker, tmp_path):
    r = run_schedule(own_broker, tmp_path, seed=1, records=1200)  # seed 1: a processor kill, the broker, a kill
    assert r.faults == ["kill", "broker", "kill"] and r.restarts >= 1
    assert r.clean, r
    assert r.counts["duplicate"] == 0 and r.counts["unprocessed"] == 0
    assert len(r.recovery_s) == 1 and not r.stalls, r
    assert "1 broker kills" in summary([r])


def test_at_least_once_control_duplicates_under_kills(own_broker, tmp_path):
    r = run_schedule(own_broker, tmp_path, seed=2, records=1200, transactional=False)  # seed 2: three kills
    assert r.faults == ["kill", "kill", "kill"]
    assert r.counts["duplicate"] > 0 and r.counts["unprocessed"] == 0 and not r.clean, r


def test_too_few_records_named():
    with pytest.raises(ValueError, match="at least 100 per partition"):
        run_schedule(None, "/nonexistent", seed=0, records=250)


def test_clean_means_only_the_races_losses():
    counts = dict.fromkeys(("duplicate", "lost write", "unprocessed"), 0)
    assert SoakResult(0, 10, [], counts).clean
    assert SoakResult(0, 10, ["broker"], {**counts, "lost write": 5}, race_lost=5).clean
    assert not SoakResult(0, 10, ["broker"], {**counts, "lost write": 5}, race_lost=4).clean
    assert not SoakResult(0, 10, [], {**counts, "duplicate": 1}).clean
