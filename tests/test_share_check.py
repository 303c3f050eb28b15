"""The share-group checker on hand-written histories: it catches each anomaly, and raises no false alarm."""

import pytest

from labkit.share.check import SHARE_ANOMALIES, check_share
from tests.histories import SHARE, S


def clean():
    """Two consumers; c1 releases offset 1 (c2 gets it, delivery 2), both accept; all persisted."""
    h = S().written(3).delivered("c1", 0).delivered("c1", 1).acked("c1", 0).acked("c1", 1, "RELEASE")
    h.delivered("c2", 1, count=2).delivered("c2", 2).acked("c2", 1).acked("c2", 2)
    return h.state(0, 2, "ACKNOWLEDGED", 2).spso(3)


def test_clean_histories_raise_no_alarm():
    assert check_share(clean().events, topic=SHARE).counts() == dict.fromkeys(SHARE_ANOMALIES, 0)
    with_sink = S().written(1).delivered("c", 0).effect("c", 0).acked("c", 0).state(0, 0, "ACKNOWLEDGED").spso(1)
    assert check_share(with_sink.events, topic=SHARE, sink=True).ok
    rejected = S().written(1).delivered("c", 0).acked("c", 0, "REJECT").state(0, 0, "ARCHIVED")  # terminal too
    assert check_share(rejected.events, topic=SHARE).ok
    # A lock that expired (more than lock_ms after the first delivery) may go to another consumer.
    expired = S().written(1).delivered("a", 0).later(5000).delivered("b", 0, 2).acked("b", 0)
    assert check_share(expired.state(0, 0, "ACKNOWLEDGED", 2).events, topic=SHARE).ok
    # A crashed holder releases its records at once (the broker sees the connection close).
    crashed = S().written(1).delivered("a", 0).add("crash", "a").delivered("b", 0, 2).acked("b", 0)
    assert check_share(crashed.state(0, 0, "ACKNOWLEDGED", 2).events, topic=SHARE).ok


def test_a_record_never_delivered_is_caught():
    h = S().written(2).delivered("c", 0).acked("c", 0).state(0, 0, "ACKNOWLEDGED").state(1, 1, "ARCHIVED")
    result = check_share(h.events, topic=SHARE)
    assert result.counts()["not delivered"] == 1 and result.table().value_id.tolist() == ["s-2"]


def test_a_record_left_available_or_never_persisted_is_not_terminal():
    h = S().written(3).delivered("c", 0).delivered("c", 1).delivered("c", 2).acked("c", 0).acked("c", 1, "RELEASE")
    h.state(0, 0, "ACKNOWLEDGED").state(1, 1, "AVAILABLE").spso(1)
    result = check_share(h.events, topic=SHARE)
    assert result.count("not terminal") == 2
    assert set(result.table().offset) == {1, 2} and "AVAILABLE" in result.table().detail.iloc[0]
    assert "never persisted" in result.table().detail.iloc[1]


def test_below_the_spso_every_record_is_terminal():
    h = S().written(2).delivered("c", 0).delivered("c", 1).acked("c", 0).acked("c", 1).spso(2)
    assert check_share(h.events, topic=SHARE).ok


def test_a_delivery_count_above_the_limit_is_caught():
    h = S().written(1)
    for n in range(1, 5):
        h.delivered("c", 0, count=n).acked("c", 0, "RELEASE")
    h.state(0, 0, "ARCHIVED", 4)
    assert check_share(h.events, topic=SHARE, delivery_limit=4).ok
    result = check_share(h.events, topic=SHARE, delivery_limit=3)
    assert result.count("over delivery limit") == 1 and "4th time; the limit is 3" in result.table().detail[0]


def test_a_record_given_to_two_consumers_while_its_lock_holds_is_caught():
    h = S().written(1).delivered("a", 0).later(1000).delivered("b", 0, 2).acked("b", 0).state(0, 0, "ACKNOWLEDGED")
    result = check_share(h.events, topic=SHARE)
    assert result.count("concurrent delivery") == 1 and result.table().participant[0] == "b"
    assert "still held its acquisition lock" in result.table().detail[0]
    # paused is not gone: a paused holder still holds the lock
    paused = S().written(1).delivered("a", 0).add("pause", "a").later(1000).delivered("b", 0, 2)
    assert check_share(paused.events, topic=SHARE).count("concurrent delivery") == 1


def test_an_acknowledged_record_without_effect_is_a_lost_effect():
    h = S().written(2).delivered("c", 0).delivered("c", 1).acked("c", 0).acked("c", 1).effect("c", 1)
    h.state(0, 1, "ACKNOWLEDGED").spso(2)
    result = check_share(h.events, topic=SHARE, sink=True)
    assert result.count("lost effect") == 1 and result.table().value_id.tolist() == ["s-1"]
    assert check_share(h.events, topic=SHARE).ok  # without a sink, effects are not checked


def test_a_refused_acknowledgement_is_not_a_lost_effect():
    h = S().written(1).delivered("a", 0).acked("a", 0, error="INVALID_RECORD_STATE")
    h.delivered("b", 0, 2).effect("b", 0).acked("b", 0).state(0, 0, "ACKNOWLEDGED", 2).spso(1)
    assert check_share(h.events, topic=SHARE, sink=True, lock_ms=0, slack_ms=0).ok


def test_an_effect_written_twice_is_a_duplicate_effect():
    h = S().written(1).delivered("w", 0).effect("w", 0).add("crash", "w").delivered("w", 0, 2).effect("w", 0)
    h.acked("w", 0).state(0, 0, "ACKNOWLEDGED", 2).spso(1)
    result = check_share(h.events, topic=SHARE, sink=True)
    assert result.counts() == {**dict.fromkeys(SHARE_ANOMALIES, 0), "duplicate effect": 1}


def test_an_effect_written_three_times_is_one_duplicate_effect():
    """A duplicate is counted once per record written more than once (issue 35), its writers in the detail."""
    h = S().written(1).delivered("w", 0).effect("w", 0).add("crash", "w").delivered("w", 0, 2).effect("w", 0)
    h.add("crash", "w").delivered("v", 0, 3).effect("v", 0).acked("v", 0).state(0, 0, "ACKNOWLEDGED", 3).spso(1)
    result = check_share(h.events, topic=SHARE, sink=True)
    assert result.counts() == {**dict.fromkeys(SHARE_ANOMALIES, 0), "duplicate effect": 1}
    assert "written 3 times (by w, w, v)" in result.anomalies[0].detail


def test_other_topics_are_not_checked_and_names_are_checked():
    h = clean().add("delivered", "x", topic="elsewhere", partition=0, offset=0, value_id="e-1", delivery_count=99)
    result = check_share(h.events, topic=SHARE, delivery_limit=2)
    assert result.ok
    with pytest.raises(ValueError, match="unknown anomaly 'duplicate'; the anomalies are not delivered"):
        result.count("duplicate")
    assert "No anomalies" in result._repr_html_() and "duplicate effect" in result._repr_html_()
