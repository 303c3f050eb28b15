"""The share consumer participant: its settings are checked up front; on the real broker it releases,
accepts, crashes at a named step, writes a sink, and gives up when no record comes."""

import pytest

from labkit.core.waiting import wait_until
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.registry import CLIENTS
from labkit.share.group_config import configure_group
from labkit.share.roles.share_consumer import decision
from labkit.share.sink import Sink


def test_bad_settings_name_the_choices(tmp_path):
    exp = Experiment("role", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="unknown decision 'keep'; the decisions are accept, release, reject, hold"):
        exp.participant("s", "share_consumer", topic="t", group_id="g", decisions={"x": ["release", "keep"]})
    with pytest.raises(ValueError, match="unknown order 'later' for a share_consumer; the choices are sink_first, ack_first"):
        exp.participant("s", "share_consumer", topic="t", group_id="g", sink="x.db", order="later")
    with pytest.raises(ValueError, match="order= needs sink="):
        exp.participant("s", "share_consumer", topic="t", group_id="g", order="ack_first")
    with pytest.raises(ValueError, match="'before_poll' is not a step of a share_consumer; its steps are after_poll"):
        exp.participant("s", "share_consumer", topic="t", group_id="g", crash_at="before_poll")


def test_a_list_of_decisions_is_one_per_delivery():
    spec = {"decisions": {"a": ["release", "accept"], "b": "reject"}, "default": "hold"}
    assert [decision(spec, "a", n) for n in (1, 2, 3)] == ["release", "accept", "accept"]
    assert decision(spec, "b", 4) == "reject" and decision(spec, "c", 1) == "hold"


def test_sink_keeps_every_write_in_order(tmp_path):
    sink = Sink(tmp_path / "s.sqlite")
    sink.write(["a", "b"])
    sink.write(["a"])
    assert Sink(tmp_path / "s.sqlite").effects() == ["a", "b", "a"]


def test_release_then_accept_and_a_crash_at_a_step(bootstrap, tmp_path):
    exp = Experiment("role", bootstrap, folder=tmp_path)
    topic, group = exp.topic("in"), f"role-{exp.run_id}"
    configure_group(bootstrap, group)
    exp.participant("src", "producer", topic=topic, iterations=1, batch=2).start().wait(60)
    c = exp.participant("sc", "share_consumer", topic=topic, group_id=group, idle_ms=2000,
                        decisions={"src-1": ["release", "accept"]}).start()
    assert c.wait(90) == "finished"
    got = [(e.value_id, e.delivery_count) for e in exp.history.events() if e.kind == "delivered"]
    assert got == [("src-1", 1), ("src-2", 1), ("src-1", 2)]
    committed = [(e.value_id, e.ack_type, e.error) for e in exp.history.events() if e.kind == "ack_committed"]
    assert committed == [("src-1", "RELEASE", None), ("src-2", "ACCEPT", None), ("src-1", "ACCEPT", None)]
    assert c.counters()["delivered"] == 3 and c.counters()["ack_committed"] == 3

    topic2 = exp.topic("crash")
    exp.participant("src2", "producer", topic=topic2, iterations=1, batch=2).start().wait(60)
    w = exp.participant("w", "share_consumer", topic=topic2, group_id=group, sink=str(tmp_path / "w.sqlite"),
                        order="ack_first", crash_at="before_sink").start()
    assert wait_until(lambda: w.status == "crashed", 60)
    assert exp.history.first("crash", "w").step == "before_sink"
    assert w.counters()["ack_committed"] == 2 and Sink(tmp_path / "w.sqlite").effects() == []



@pytest.mark.parametrize("client", CLIENTS)
def test_a_share_consumer_that_gets_no_record_within_first_ms_gives_up_saying_why(bootstrap, tmp_path, client):
    exp = Experiment("first", bootstrap, folder=tmp_path)
    topic, group = exp.topic("empty"), f"first-{exp.run_id}"
    c = exp.participant("sc", "share_consumer", client=client, topic=topic, group_id=group, first_ms=3000)
    assert c.start().wait(60) == "gave up"
    [gave_up] = [e for e in exp.history.events() if e.kind == "gave_up"]
    assert (gave_up.participant, gave_up.error) == (
        "sc", f"no record of {topic} was delivered within first_ms (3000 ms) of the start")
    assert exp.history.events()[-1] == gave_up  # no "finished" after it
