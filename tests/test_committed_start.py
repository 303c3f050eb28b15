"""librdkafka starts a partition below its committed offset when the assignment changes while an open
transaction holds that partition's offsets; the processor role's guard starts it at the committed offset.
Both on the real broker, through notebook 08's :func:`labkit.lessons.broker_crashes.start_below_committed`."""

from labkit.crashlab.experiment import Experiment
from labkit.lessons.broker_crashes import start_below_committed


def test_librdkafka_starts_below_the_committed_offset_and_the_guard_does_not(bootstrap, tmp_path):
    exp = Experiment("unstable", bootstrap, folder=tmp_path)
    table = start_below_committed(exp, committed=50, pending=80).set_index("consumer")
    # the client bug (librdkafka 2.16, rd_kafka_assignment_apply_offsets): if this fails, librdkafka no longer
    # has it, and labkit/crashlab/committed_start.py can go
    assert table.loc["librdkafka consumer", "first offset"] == 0, table
    guarded = table.loc["labkit processor (guard)"]
    assert guarded["first offset"] == 50 and guarded["offset_reset"] >= 1, table
    events = exp.history.events()
    consumed = sorted({e.offset for e in events if e.kind == "consume" and e.partition == 0})
    assert consumed == list(range(50, 200)), "partition 0 processed from the committed offset on, nothing below"
    resets = {(e.partition, e.offset, e.last_offset) for e in events if e.kind == "offset_reset"}
    assert resets == {(0, 50, 0)}, resets
