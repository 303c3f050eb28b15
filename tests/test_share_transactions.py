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
    assert sorted(out["read_committed"]) == [0, 1] and not any(out["check"].values())


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
    stepper = Stepper(World(records=1))
    assert "c1: poll" in [b.description for b in stepper._buttons.children]
    for action in st.FLOW + [("commit", "c1"), ("markers", "tx-c1")]:
        stepper.press(action)
    assert transactions(stepper.world).loc[0, "state"] == "COMPLETE_COMMIT"
    assert stepper.figure.layout.title.text.startswith("MODELLED")
    names = {t.name for t in stepper.figure.data}
    assert {"TX_PENDING (broker)", "ACKNOWLEDGED (broker)", "effect written (sink)"} <= names
    assert label(("lock_expiry", 2)) == "lock expiry of offset 2"
    with pytest.raises(ValueError, match="not possible now"):
        stepper.press(("commit", "c1"))
