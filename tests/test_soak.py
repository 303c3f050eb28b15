"""The short soak (bench/soak.py is the long one), on a broker of the test's own (it is killed), and one
schedule on a cluster with a separate KRaft controller."""

import pandas as pd
import pytest

from labkit.broker import EmbeddedBroker
from labkit.broker.multinode import EmbeddedCluster
from labkit.crashlab.check import check
from labkit_dev.soak import FAULTS, LOAD_RACE, SoakResult, race_losses, run_schedule, summary
from tests.histories import OUT, H


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("soaked")) as b:
        yield b


def test_kip447_processors_survive_kills_and_a_broker_crash_exactly_once(own_broker, tmp_path):
    r = run_schedule(own_broker, tmp_path, seed=1, records=1200)  # seed 1: a processor kill, the broker, a kill
    assert carried_out_or_skipped(r) == ["broker", "kill", "kill"] and "broker" in r.faults and r.restarts >= 1
    assert r.clean, r
    # Kafka's marker race (docs/marker-race.md; about 1 run in 8 here): a commit in flight when the broker dies can
    # end with its offsets marker written and its output's not; the soak aborts that hanging transaction, so its
    # outputs are lost writes and their inputs, whose offsets committed, unprocessed. Both are counted as the race's.
    assert r.counts["duplicate"] == 0 and r.counts["unprocessed"] == r.race_unprocessed <= r.race_lost
    # (a flush may be flagged stalled if the broker takes longer than the 20 s call deadline to come back on a
    # loaded machine: the supervisor restarts that processor, and the run must still be clean)
    assert len(r.recovery_s) == 1 and all(s.endswith(" in flush") for s in r.stalls), r
    assert "1 broker kills" in summary([r])


def test_at_least_once_control_duplicates_under_kills(own_broker, tmp_path):
    # seed 4: proc-0 SIGKILLs itself after_produce in its 2nd batch (its outputs written, its offsets not
    # committed: the batch runs again), proc-1 after_commit in its 3rd; no kill at a random moment (faults=0),
    # which could come first and spare the crash point (a restart clears it)
    r = run_schedule(own_broker, tmp_path, seed=4, records=1200, transactional=False, faults=0)
    assert sorted(r.faults) == ["kill at after_commit", "kill at after_produce"], r
    assert r.counts["duplicate"] > 0 and r.counts["unprocessed"] == 0 and not r.clean, r


def test_a_schedule_on_a_cluster_with_a_separate_controller(tmp_path):
    with EmbeddedCluster(1, tmp_path / "cluster") as cluster:  # the broker fault kills broker 2, never controller 1
        r = run_schedule(cluster, tmp_path, seed=1, records=600)
        assert cluster.controller.is_running and cluster.brokers[2].is_running
    assert "broker" in r.faults and len(r.recovery_s) == 1
    assert r.clean and r.counts["duplicate"] == 0 and r.counts["unprocessed"] == 0, r


def carried_out_or_skipped(r: SoakResult) -> list[str]:
    """The faults drawn for random moments, whether carried out or skipped ("kill (proc-1 restarting)"), sorted."""
    return sorted([f for f in r.faults if f in FAULTS] + [s.split()[0] for s in r.skipped])


def test_too_few_records_named():
    with pytest.raises(ValueError, match="at least 100 per partition"):
        run_schedule(None, "/nonexistent", seed=0, records=250)


def test_clean_means_only_the_races_losses():
    counts = dict.fromkeys(("duplicate", "lost write", "unprocessed"), 0)
    assert SoakResult(0, 10, [], [], counts).clean
    assert SoakResult(0, 10, ["broker"], [], {**counts, "lost write": 5}, race_lost=5).clean
    assert not SoakResult(0, 10, ["broker"], [], {**counts, "lost write": 5}, race_lost=4).clean
    race_seen_from_both_sides = {**counts, "lost write": 5, "unprocessed": 5}
    assert SoakResult(0, 10, ["broker"], [], race_seen_from_both_sides, race_lost=5, race_unprocessed=5).clean
    assert not SoakResult(0, 10, ["broker"], [], race_seen_from_both_sides, race_lost=5, race_unprocessed=4).clean
    assert not SoakResult(0, 10, [], [], {**counts, "duplicate": 1}).clean


def _race_history():
    """proc-a (transactional.id "a") and proc-b ("b") write partition 0; a broker kill leaves a's transaction hanging
    from offset 4; both have a write at or after offset 4 that the final read lacks."""
    h = H()
    for p, tid, n, vid, offset in (("proc-a", "a", 1, "s-1>out", 0), ("proc-b", "b", 1, "s-2>out", 2),
                                   ("proc-a", "a", 2, "s-3>out", 4),  # the marker race: hanging, then aborted
                                   ("proc-b", "b", 2, "s-4>out", 6)):  # after it, another producer's: not the race
        h.add("txn_begin", p, txn=n, transactional_id=tid)
        h.write(p, vid, offset, txn=n).txn(p, n, "committed")
    h.finals([(0, "s-1>out"), (2, "s-2>out")])
    return h.events


def hanging_of(tid):
    """find_hanging's row of a transaction hanging from offset 4 of partition 0, the coordinator naming ``tid``."""
    return pd.DataFrame([{"partition": 0, "producer_id": 7, "start_offset": 4, "transactional_id": tid}])


def test_only_the_hanging_transactions_own_producer_explains_a_loss():
    events = _race_history()
    anomalies = check(events, output_topic=OUT).anomalies
    assert sorted(a.value_id for a in anomalies if a.name == "lost write") == ["s-3>out", "s-4>out"]
    assert race_losses(events, anomalies, hanging_of("a")) == {"s-3>out"}  # proc-b's loss at offset 6 is a real one
    counts = dict.fromkeys(("duplicate", "lost write", "unprocessed"), 0)
    race_lost = len(race_losses(events, anomalies, hanging_of("a")))
    assert not SoakResult(0, 4, ["broker"], [], {**counts, "lost write": 2}, race_lost=race_lost).clean
    assert race_losses(events, anomalies, hanging_of("b")) == {"s-4>out"}  # had b's been the one left hanging
    assert race_losses(events, anomalies, hanging_of(None)) == set()  # no coordinator names it: not excused


def test_the_coordinator_load_race_is_found_in_the_broker_log_after_a_mark(tmp_path):
    broker = EmbeddedBroker(tmp_path)  # not started: only its server.log is read
    broker.log_file.write_text("[2026-11-23 14:13:19,113] INFO [GroupCoordinator id=1] Finished loading of metadata "
                               "from __consumer_offsets-0 with epoch 18 in 1924ms\n")
    mark = broker.log_size()
    assert not broker.logged_since(0, LOAD_RACE)
    with open(broker.log_file, "a") as f:
        f.write("[2026-11-23 14:13:19,441] INFO [GroupCoordinator id=1] Ignored load completion from "
                "__consumer_offsets-0 because context is in ACTIVE state.\n")
    assert broker.logged_since(mark, LOAD_RACE) and broker.logged_since(0, LOAD_RACE)
    assert not broker.logged_since(broker.log_size(), LOAD_RACE)  # only what came after the mark counts


def test_summary_counts_the_guard_and_the_operator():
    counts = dict.fromkeys(("duplicate", "lost write", "unprocessed"), 0)
    line = summary([SoakResult(0, 1200, ["broker"], [], counts, resets=2, reloads=1)])
    assert "2 starts below the committed offset corrected" in line and "1 broker restarts for a group stuck" in line
