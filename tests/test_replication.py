"""labkit.lessons.replication (notebook 09): part 3's outcome and exercise on hand-written runs (each anomaly and
answer of its own kind), then part 3 itself on a real cluster (a controller and three brokers, about 40 s): the
unclean election's loss found by the checker, the exercise checked right and wrong against it, and the cluster's
partition state, the leader's log end offset and waits as the run met them; and, on a freshly formatted node of each
release the lab runs, the eligible leader replicas' default that notebook 09 states."""

import pandas as pd
import pytest

from instructor.solutions import SOLUTIONS, WRONG
from labkit.broker.embedded import EmbeddedBroker
from labkit.broker.multinode import EmbeddedCluster
from labkit.broker.settings import FEATURES_BY_VERSION
from labkit.core.errors import BrokerStateError, LabkitError
from labkit.crashlab.check import Anomaly, CheckResult
from labkit.kafka.api_versions import broker_features
from labkit.learn.exercise import UNANSWERED
from labkit.lessons import replication as rp

NAMES = ("duplicate", "lost write", "unprocessed", "aborted read", "precommitted read", "gap", "out-of-order")


def run_of(lost: int, elected: int | None, probe: str | None = None, hw_after: int = 8) -> dict:
    """A hand-written part 3 run: leader 2, follower 3; ``lost`` lost writes; ``elected`` while the leader was down."""
    anomalies = [Anomaly("lost write", f"second-{i}", "committed, not read") for i in range(lost)]
    states = pd.DataFrame([{"moment": "follower's broker back", "leader": elected, "high_watermark": hw_after}])
    return {"leader": 2, "follower": 3, "probe": probe, "elected": elected, "states": states,
            "check": CheckResult(anomalies=anomalies, names=NAMES)}


def test_loss_outcome_reads_the_checker_and_the_election_and_refuses_a_refused_run():
    assert rp.loss_outcome(run_of(6, 3)) == "lost"
    assert rp.loss_outcome(run_of(0, None)) == "offline"
    assert rp.loss_outcome(run_of(0, 3)) == "kept"
    with pytest.raises(LabkitError, match="refused the writes \\(NOT_ENOUGH_REPLICAS\\)"):
        rp.loss_outcome(run_of(0, None, probe="NOT_ENOUGH_REPLICAS"))


def test_check_loss_right_and_each_kind_of_wrong_on_a_hand_written_run():
    run = run_of(6, 3)
    assert rp.check_loss(run, UNANSWERED).state == "unanswered"
    assert rp.check_loss(run, {"elected": "follower"}).message.startswith("The answer is a dict with exactly the keys")
    assert rp.check_loss(run, SOLUTIONS["09"]).state == "right"
    markers = rp.check_loss(run, WRONG["09"])  # COMMIT markers counted as records, the old leader's watermark
    assert markers.state == "wrong" and markers.message.endswith("(wrong: lost, high_watermark)")
    assert "control record" in markers.message
    old_leader = rp.check_loss(run, {**SOLUTIONS["09"], "elected": "old leader"})
    assert old_leader.state == "wrong" and old_leader.message.endswith("(wrong: elected)")
    as_text = rp.check_loss(run, {**SOLUTIONS["09"], "lost": "6"})  # a number written as text is not the count
    assert as_text.state == "wrong" and as_text.message.endswith("(wrong: lost)")
    with pytest.raises(LabkitError, match="elected no leader"):
        rp.check_loss(run_of(0, None), SOLUTIONS["09"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with EmbeddedCluster(3, tmp_path_factory.mktemp("c")) as c:
        yield c


def test_an_unclean_election_loses_the_committed_transactions_the_checker_finds_and_the_exercise_reads(cluster, tmp_path):
    from labkit.crashlab.experiment import Experiment

    exp = Experiment("unclean", cluster.bootstrap_servers, folder=tmp_path)
    run = rp.follower_lost(exp, cluster, rp.LOWERED)
    states = run["states"].set_index("moment")
    assert run["probe"] is None and run["elected"] == run["follower"] != run["leader"]
    assert pd.isna(states.loc["leader's broker killed", "leader"])  # offline: partition_state's None, shown <NA>
    spare = [n for n in cluster.brokers if n not in (run["leader"], run["follower"])]
    assert states.loc["leader's broker killed", "live"] == spare  # the third broker only, by the lab
    lost = sorted(a.value_id for a in run["check"].anomalies)
    assert lost == sorted(f"second-{c}-{i}" for c in ("java", "librdkafka") for i in (4, 5, 6)), lost
    assert rp.loss_outcome(run) == "lost" and rp.elr_version(cluster.live_bootstrap) == 1  # KIP-966, the default
    # The leader's log end offset: both first transactions (2 x 3 records and a COMMIT marker each) and, on the leader
    # alone, both second ones; after the unclean election, the follower's log, which ends where its copy did. Nothing
    # else comes between: the follower killed is never the transaction coordinator's broker (rp.pair), whose kill had
    # the next coordinator write the first transactions' COMMIT markers again (a run read 9 before the second writers)
    assert states.loc["first transactions committed", "log_end_offset"] == 8, run["states"]
    assert next(e.offset for e in exp.history.events() if e.kind == "log_end") == 8
    assert states.loc["second transactions committed on the leader alone", "log_end_offset"] == 16, run["states"]
    assert states.loc["follower's broker back", "log_end_offset"] == 8, run["states"]
    assert pd.isna(states.loc["leader's broker killed", "log_end_offset"]), run["states"]
    assert rp.log_end_offset(cluster.brokers[spare[0]].bootstrap_servers, run["output"]) is None  # holds no replica
    assert rp.check_loss(run, SOLUTIONS["09"]).state == "right"
    assert rp.check_loss(run, WRONG["09"]).state == "wrong"
    offline = exp.topic("offline", replicas=[run["leader"]])  # one replica: offline with its broker
    assert cluster.kill_leader(offline) == run["leader"]
    cluster.await_partition(offline, lambda s: s["leader"] is None, "the partition offline")
    with pytest.raises(BrokerStateError, match="has no leader to kill: it is offline"):
        cluster.kill_leader(offline)
    cluster.restart(run["leader"])
    with pytest.raises(TimeoutError, match="a leader on broker 99 did not happen within 0.5 s \\(last seen: "):
        cluster.await_partition(run["output"], lambda s: s["leader"] == 99, "a leader on broker 99", timeout_s=0.5)


def test_sample_log_end_writes_each_reading_of_the_partitions_log_end_offset(bootstrap, tmp_path):
    """Issue 65: notebook 09's figure draws a write not in the log until these readings show it appended."""
    from labkit.core.waiting import wait_until
    from labkit.crashlab.experiment import Experiment
    from labkit.kafka.records import create_topic, produce

    exp = Experiment("log-end", bootstrap, folder=tmp_path)
    topic = create_topic(bootstrap, "log-end")
    sampler = rp.sample_log_end(exp, bootstrap, "broker-1", topic, interval_s=0.05)
    try:
        assert wait_until(lambda: exp.history.events(), 10)  # the first reading: the empty log ends at 0
        produce(bootstrap, topic, ["a", "b", "c"])
        assert wait_until(lambda: exp.history.events()[-1].offset == 3, 10)
    finally:
        sampler.stop()
    readings = [(e.kind, e.participant, e.topic, e.partition, e.offset) for e in exp.history.events()]
    assert readings[0] == ("log_end", "broker-1", topic, 0, 0) and readings[-1][-1] == 3, readings
    assert [r[-1] for r in readings] == sorted(r[-1] for r in readings) and len(readings) >= 3, readings


#: Kafka's ``MetadataVersion.IBP_4_1_IV0`` feature level: from it on a newly formatted cluster finalizes
#: ``eligible.leader.replicas.version`` 1 (``EligibleLeaderReplicasVersion.ELRV_1``'s bootstrap metadata version).
METADATA_VERSION_4_1_IV0 = 26


@pytest.mark.parametrize("version", list(FEATURES_BY_VERSION))
def test_a_freshly_formatted_node_of_each_release_finalizes_eligible_leader_replicas_on(version, tmp_path):
    """Notebook 09 (part 3 and "What you saw") says KIP-966's eligible leader replicas are on in a cluster formatted
    by either release the lab runs, as their default metadata version is 4.1-IV0 or later: a node formatted as the
    lab formats one (no release version given: the release's default) answers ApiVersions with both."""
    with EmbeddedBroker(tmp_path / "b", version=version) as broker:
        features = broker_features(broker.bootstrap_servers)
        elr = rp.elr_version(broker.bootstrap_servers)
    where = "notebooks/09_replication.ipynb's part 3 and 'What you saw' (ELR on by default) and the README's line on 09"
    assert features["metadata.version"]["finalized"] >= METADATA_VERSION_4_1_IV0, (version, features, where)
    assert elr == 1, (f"Kafka {version} formats with eligible.leader.replicas.version={elr}: correct {where}")
