"""Notebook 07's scenarios (MODELLED): the seed's corner cases, the open questions, metrics, 2PC."""

import pytest

from labkit.lessons import share_transactions as st
from labkit.models.kip1289 import World
from labkit.models.stepper import Stepper, label, transactions


@pytest.mark.parametrize("name", list(st.SCENARIOS) + list(st.NOTEBOOK_06))
def test_every_corner_case_ends_exactly_once(name):
    world, said = st.run({**st.SCENARIOS, **st.NOTEBOOK_06}[name])
    out = st.outcome(world)
    assert out["states"] == ["ACKNOWLEDGED"] * 2 and out["outputs"] == [1, 1] and out["violations"] == []
    assert sorted(out["read_committed"]) == ["input-0:0", "input-0:1"] and not any(out["check"].values())


@pytest.mark.parametrize("name", list(st.MULTI_SCENARIOS))
def test_every_multi_partition_case_ends_exactly_once_on_both_share_partitions(name):
    world, said = st.run(st.MULTI_SCENARIOS[name], **st.MULTI)
    out = st.outcome(world)
    assert out["states"] == ["ACKNOWLEDGED"] * 2 and out["outputs"] == [1, 1] and out["violations"] == []
    assert sorted(out["read_committed"]) == ["input-0:0", "input-1:0"] and not any(out["check"].values())


def test_multi_partition_failures_redeliver_both_records_or_neither():
    table = st.scenario_table(st.MULTI_SCENARIOS, **st.MULTI).set_index("scenario")
    assert table.loc["commit across two share partitions", "delivery_counts"] == [1, 1]
    assert table.loc["coordinator crash between two markers", "delivery_counts"] == [1, 1]
    assert table.loc["crash after send_share_acks", "delivery_counts"] == [2, 2]
    # input-1's acquisition was lost with its share coordinator (count not persisted): the abort gave input-0 back
    assert table.loc["share coordinator of input-1 crashes before send_share_acks", "delivery_counts"] == [2, 1]


def test_the_lock_release_duplicate_is_found_across_two_share_partitions_too():
    found = st.first_duplicate(**st.MULTI, consumers=2, limit=2, max_faults=1, aborts=0, lock_while_pending="release")
    assert found.violation.startswith("duplicate") and any(a[0] == "lock_expiry" for a in found.trace)


def test_failed_transactions_redeliver_and_committed_ones_do_not():
    table = st.scenario_table().set_index("scenario")
    assert table.loc["commit", "delivery_counts"] == [1, 1]
    for failed in ("abort", "crash after send_share_acks (critical case)", "zombie fenced", "transaction timeout"):
        assert table.loc[failed, "delivery_counts"] == [2, 1], failed
    assert table.loc["coordinator crash after PREPARE_COMMIT", "delivery_counts"] == [1, 1]


def test_open_questions_have_the_consequences_the_notebook_states():
    assert st.poison_pill("keep").sp.offsets[0].state == "ARCHIVED"
    revert = st.poison_pill("revert", rounds=10)
    assert revert.sp.offsets[0].state == "AVAILABLE" and sum(e.kind == "delivered" for e in revert.events) == 10
    forbidden, allowed = st.outcome(st.release_question(False)), st.outcome(st.release_question(True))
    assert forbidden["outputs"] == [0] and forbidden["violations"] == []
    assert allowed["outputs"] == [2] and allowed["check"]["duplicate effect"] == 1


def test_metrics_count_aborts_timeouts_and_times():
    world, _ = st.run(st.SCENARIOS["transaction timeout"])
    m = st.metrics(world.events)
    assert m["share-transaction-timeout-total"] == 1 and m["share-transaction-abort-total"] == 1
    assert m["share-transaction-active"] == 1 and all(t > 0 for t in m["share-transaction-commit-time-ms"])


@pytest.mark.parametrize("crash", [None, "after_prepare", "between"])
def test_two_phase_commit_with_sqlite_recovers_exactly_once(tmp_path, crash):
    result = st.two_phase_commit(tmp_path / "sink.sqlite", crash)
    assert result["effects"] == [0] and result["states"] == ["ACKNOWLEDGED"]
    assert result["rounds"] == (2 if crash == "after_prepare" else 1)
    with pytest.raises(ValueError, match="crash must be"):
        st.two_phase_commit(tmp_path / "x.sqlite", "sometime")


def test_the_stepper_redraws_what_the_model_did():
    stepper = st.Stepper(World(records=1))
    assert "c1: poll" in [b.description for b in stepper._buttons.children]
    for action in st.FLOW + [("commit", "c1")] + st.markers():
        stepper.press(action)
    assert transactions(stepper.world).loc[0, "state"] == "COMPLETE_COMMIT"
    [figure] = stepper.figures
    assert figure.layout.title.text.startswith("MODELLED")
    names = {t.name for t in figure.data}
    assert {"TX_PENDING (broker)", "ACKNOWLEDGED (broker)", "effect written (sink)"} <= names
    assert label(("lock_expiry", "input-0", 2)) == "lock expiry of input-0:2"
    assert label(("markers", "tx-c1", "output-0")) == "markers tx-c1 → output-0"
    with pytest.raises(ValueError, match="not possible now"):
        stepper.press(("commit", "c1"))


def test_the_stepper_draws_each_share_partition_and_the_markers_written_so_far():
    stepper = Stepper(World(**st.MULTI), draw=st.share_timeline_figure, title="two")
    for action in st.FLOW + [("commit", "c1"), ("markers", "tx-c1", st.STATE_1)]:
        stepper.press(action)
    assert [f.layout.title.text for f in stepper.figures] == ["MODELLED: two: input-0", "MODELLED: two: input-1"]
    assert transactions(stepper.world).loc[0, "markers written"] == st.STATE_1
    assert "markers tx-c1 → output-0" in [b.description for b in stepper._buttons.children]
