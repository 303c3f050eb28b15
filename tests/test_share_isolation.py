"""A share group reading a transactional topic (notebook 06): the group config ``share.isolation.level`` on the real
broker, on both clients. One run of :func:`share_isolation` (module fixture) is checked claim by claim; what depends
on the release (whether the config exists, its default) is read from the broker's own answer."""

import uuid

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.registry import CLIENTS
from labkit.lessons.share_isolation import (CONFIG, RECORDS, SETTINGS, isolation_config, runnable, share_group_at,
                                            share_isolation)


@pytest.fixture(scope="module")
def run(bootstrap, tmp_path_factory):
    exp = Experiment("iso", bootstrap, folder=tmp_path_factory.mktemp("iso"))
    result = share_isolation(exp, CLIENTS, ("default", "read_committed"), timeout_s=90)
    if result["skipped"]:
        pytest.skip(result["skipped"])
    return result


def rows(run, level):
    """The table's rows of the groups the broker reports at ``level`` (both clients)."""
    table = run["table"]
    picked = table[table.level == level]
    assert sorted(picked.client) == sorted(CLIENTS), table
    return picked.to_dict("records")


def test_the_broker_reports_the_config_and_its_default(bootstrap):
    """A group that never set it has the broker's default (read_uncommitted in the 4.3.2 and 4.4.0 jars:
    ``GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT``); setting it is reported as the group's own value."""
    fresh = isolation_config(bootstrap, f"iso-never-configured-{uuid.uuid4().hex[:6]}")
    if fresh is None:
        pytest.skip(f"this broker has no group config {CONFIG}")
    assert fresh == {"value": "read_uncommitted", "default": True}
    group = f"iso-committed-{uuid.uuid4().hex[:6]}"
    assert share_group_at(bootstrap, group, "read_committed") == {"value": "read_committed", "default": False}


def test_the_default_setting_is_the_brokers_default(run):
    table = run["table"]
    assert set(table[table.setting == "default"].level) == {run["default_level"]}
    assert set(table[table.setting == "read_committed"].level) == {"read_committed"}


def test_read_uncommitted_delivers_aborted_and_open_transactions(run):
    """At read_uncommitted the broker fetches up to the high watermark: every record, the aborted transaction's and
    the open one's (delivered while it was open) too, on both clients."""
    for row in rows(run, "read_uncommitted"):
        assert row["committed"] == RECORDS["committed"] and row["aborted"] == RECORDS["aborted"], row
        assert row["while open"] == RECORDS["open"] + RECORDS["plain"], row
        assert row["deliveries"] == sum(map(len, RECORDS.values())), row


def test_read_committed_skips_aborted_and_waits_for_the_open_transaction(run):
    """At read_committed: no aborted record; nothing at or past the open transaction's first offset (the LSO while
    it was open) before the commit, not even the plain record after it; all of it after the commit."""
    assert run["lso_while_open"] == run["offsets"]["open"][0] < run["hw_while_open"]
    for row in rows(run, "read_committed"):
        assert row["committed"] == RECORDS["committed"] and row["aborted"] == [], row
        assert row["while open"] == [], row
        assert row["after commit"] == RECORDS["open"] + RECORDS["plain"], row
        assert row["deliveries"] == len(RECORDS["committed"] + RECORDS["open"] + RECORDS["plain"]), row


def test_no_control_record_is_ever_delivered(run):
    assert run["offsets"]["markers"] == [2, 5, 9]  # COMMIT, ABORT, then the open transaction's COMMIT
    assert run["table"].markers.map(len).sum() == 0, run["table"]


def test_settings_without_the_config_are_skipped_with_a_reason(monkeypatch):
    monkeypatch.setenv("LABKIT_KAFKA_VERSION", "4.3.2")
    assert runnable(("default", "read_committed"), {"value": "read_uncommitted", "default": True}) == (
        ("default", "read_committed"), None)
    settings, why = runnable(("default", "read_committed"), None)
    assert settings == ("default",) and "Kafka 4.3.2" in why and CONFIG in why and "read_committed" in why
    assert runnable(("default",), None) == (("default",), None)
    with pytest.raises(ValueError, match="setting must be one of " + ", ".join(SETTINGS)):
        runnable(("serializable",), None)
