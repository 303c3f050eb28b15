"""The observer records what the broker persisted, the SPSO and lag, and who holds the partition."""

from labkit.crashlab.experiment import Experiment
from labkit.share.observer import ShareObserver
from labkit.share.group_config import configure_group


def test_observer_sees_persisted_states_offsets_and_members(bootstrap, tmp_path):
    exp = Experiment("observer", bootstrap, folder=tmp_path)
    topic, group = exp.topic("in"), f"observer-{exp.run_id}"
    configure_group(bootstrap, group)
    exp.participant("src", "producer", topic=topic, iterations=1, batch=3).start().wait(60)
    observer = ShareObserver(bootstrap, exp.history, group, topic, interval_s=0.2)
    observer.sample()  # before any member joined: said, not raised
    assert "GROUP_ID_NOT_FOUND" in observer.last_error, observer.last_error
    with observer:
        exp.participant("sc", "share_consumer", topic=topic, group_id=group, idle_ms=5000,  # long enough to be seen
                        decisions={"src-2": "reject"}).start().wait(90)
    events = exp.history.events()
    persisted = {(o, e.state) for e in events if e.kind == "share_state" for o in range(e.offset, e.last_offset + 1)}
    assert {(0, "ACKNOWLEDGED"), (1, "ARCHIVED"), (2, "ACKNOWLEDGED")} <= persisted
    assert ("ACQUIRED" not in {s for _, s in persisted})  # never persisted (KIP-932)
    assert any(e.kind == "share_offsets" and e.lag == 0 for e in events)
    holders = {(e.participant, e.partition) for e in events if e.kind == "share_assignment"}
    assert holders == {("sc", 0)} and observer.topic_id
    delivered = exp.history.first("delivered", "sc").mono_ns
    persisted_at = min(e.mono_ns for e in events if e.kind == "share_state")
    assert persisted_at > delivered  # timed by when the broker wrote it, after the delivery
