"""Notebook 06's share group against a consumer group (labkit.lessons.share_throughput): the measuring function on
hand-written histories, clean and bad ones it must not misread (a record processed twice, a refused ACCEPT, a
consumer that never got a record, a consumed record whose offset was never committed, other topics' events); bad
sizes refused before anything runs; and one real run on the broker."""

import pytest

from labkit.core.history import Event
from labkit.crashlab.experiment import Experiment
from labkit.lessons.share_throughput import COLUMNS, GROUPS, measure, throughput, throughput_figure

CG, SG = "cg-topic", "sg-topic"
MS = 1_000_000


def written(topic, n, at=0):
    """A producer's acks of ``n`` records at offsets 0..n-1 of ``topic``."""
    return [Event("ack", "source", mono_ns=at, topic=topic, partition=0, offset=o, value_id=f"source-{o + 1}")
            for o in range(n)]


def consumed(who, offset, at_ms, commit_ms=None, topic=CG):
    """A consumer group member's poll of one record at ``at_ms``, and its offset commit at ``commit_ms`` (none if
    ``None``)."""
    events = [Event("consume", who, mono_ns=at_ms * MS, topic=topic, partition=0, offset=offset,
                    value_id=f"source-{offset + 1}", isolation_level="read_committed")]
    if commit_ms is not None:
        events.append(Event("offsets_committed", who, mono_ns=commit_ms * MS, topic=topic))
    return events


def shared(who, offsets, at_ms, commit_ms, error=None, topic=SG):
    """A share consumer's poll of ``offsets`` at ``at_ms``, and its committed ACCEPT of each at ``commit_ms``."""
    f = dict(topic=topic, partition=0)
    return ([Event("delivered", who, mono_ns=at_ms * MS, offset=o, value_id=f"source-{o + 1}", delivery_count=1, **f)
             for o in offsets]
            + [Event("ack_committed", who, mono_ns=commit_ms * MS, offset=o, value_id=f"source-{o + 1}",
                     ack_type="ACCEPT", error=error, definite=True, **f) for o in offsets])


RUNS = {"consumer group": (CG, ["cg-1", "cg-2", "cg-3"]), "share group": (SG, ["sg-1", "sg-2", "sg-3"])}


def clean():
    """Six records a group, 200 ms each: cg-1 alone processes the consumer group's, one a poll, from 1000 ms (a poll
    every 210 ms, each commit 205 ms after its poll: the last at 2255 ms); the three share consumers two each, in one
    poll, from 1000 ms to 1410 ms."""
    events = written(CG, 6) + written(SG, 6)
    for o in range(6):
        events += consumed("cg-1", o, 1000 + 210 * o, 1205 + 210 * o)
    for i, who in enumerate(("sg-1", "sg-2", "sg-3")):
        events += shared(who, [2 * i, 2 * i + 1], 1000 + i, 1410)
    return sorted(events, key=lambda e: e.mono_ns)


def test_a_clean_run_gives_each_group_its_busy_consumers_their_records_its_seconds_and_its_rate():
    table = measure(clean(), RUNS)
    assert list(table.index) == list(GROUPS) and list(table.columns) == COLUMNS
    cg, sg = table.loc["consumer group"], table.loc["share group"]
    assert (cg.consumers, cg["consumers with records"], cg["records per consumer"]) == (3, 1, [6, 0, 0])
    assert (cg.written, cg.processed, cg["processed again"], cg.commits) == (6, 6, 0, 6)
    assert cg.seconds == pytest.approx(1.255) and cg["records/s"] == pytest.approx(6 / 1.255)
    assert (sg.consumers, sg["consumers with records"], sg["records per consumer"]) == (3, 3, [2, 2, 2])
    assert (sg.written, sg.processed, sg["processed again"], sg.commits) == (6, 6, 0, 3)  # one a poll of two
    assert sg.seconds == pytest.approx(0.41) and sg["records/s"] == pytest.approx(6 / 0.41)


def test_a_record_processed_twice_counts_once_as_processed_and_once_as_processed_again():
    """The consumer group's record 2 committed by cg-1, then consumed and committed again by cg-2 (a rebalance); the
    share group's record 0 accepted by sg-1, then by sg-2 (a broker that lost the first)."""
    events = written(CG, 3) + written(SG, 2) + consumed("cg-1", 0, 0, 200) + consumed("cg-1", 1, 200, 400)
    events += consumed("cg-1", 2, 400, 600) + consumed("cg-2", 2, 700, 900)
    events += shared("sg-1", [0, 1], 0, 400) + shared("sg-2", [0], 500, 700)
    table = measure(sorted(events, key=lambda e: e.mono_ns), RUNS)
    cg, sg = table.loc["consumer group"], table.loc["share group"]
    assert (cg.processed, cg["processed again"], cg["records per consumer"], cg.commits) == (3, 1, [3, 1, 0], 4)
    assert cg["consumers with records"] == 2 and cg["records/s"] == pytest.approx(3 / 0.9)
    assert (sg.processed, sg["processed again"], sg["records per consumer"], sg.commits) == (2, 1, [2, 1, 0], 2)


def test_a_refused_accept_is_not_processed_the_record_counts_for_the_consumer_whose_accept_counted_and_is_timed_by_it():
    """sg-1's ACCEPT of record 1 came after its lock expired (INVALID_RECORD_STATE); sg-2 got it again and accepted
    it: one record processed, by sg-2, nothing processed again."""
    events = written(SG, 2) + shared("sg-1", [0], 0, 200) + shared("sg-1", [1], 0, 6000, error="INVALID_RECORD_STATE")
    events += shared("sg-2", [1], 5100, 5300)
    table = measure(sorted(events, key=lambda e: e.mono_ns), {"share group": RUNS["share group"]})
    sg = table.loc["share group"]
    assert (sg.processed, sg["processed again"], sg["records per consumer"]) == (2, 0, [1, 1, 0])
    assert sg.commits == 2  # sg-1's commit of the refused ACCEPT carried no processed record
    assert sg.seconds == pytest.approx(5.3)  # to the last ACCEPT that counted, not to the refused one


def test_a_consumer_that_never_got_a_record_counts_among_the_consumers_with_zero_records():
    events = written(SG, 4) + shared("sg-1", [0, 1], 0, 400) + shared("sg-3", [2, 3], 10, 410)
    sg = measure(sorted(events, key=lambda e: e.mono_ns), {"share group": RUNS["share group"]}).loc["share group"]
    assert (sg.consumers, sg["consumers with records"], sg["records per consumer"]) == (3, 2, [2, 0, 2])


def test_a_consumed_record_whose_offset_was_never_committed_is_neither_processed_nor_timed():
    """cg-1 consumed record 2 and was stopped before its commit: two records processed, timed to the last commit."""
    events = written(CG, 3) + consumed("cg-1", 0, 0, 200) + consumed("cg-1", 1, 200, 400) + consumed("cg-1", 2, 400)
    cg = measure(events, {"consumer group": RUNS["consumer group"]}).loc["consumer group"]
    assert (cg.written, cg.processed, cg["records per consumer"], cg.seconds, cg.commits) == (3, 2, [2, 0, 0], 0.4, 2)


def test_events_of_other_topics_and_of_participants_outside_the_group_are_left_out():
    """Part 1's share-1 on its own topic, a consumer outside the run reading the run's topic, the observer's states."""
    events = clean() + shared("share-1", [0, 1, 2], 0, 100, topic="many") + consumed("reader", 0, 0, 10)
    events += [Event("share_state", "broker", mono_ns=5, topic=SG, partition=0, offset=0, last_offset=5,
                     state="ACKNOWLEDGED", delivery_count=1)]
    assert measure(sorted(events, key=lambda e: e.mono_ns), RUNS).equals(measure(clean(), RUNS))


def test_nothing_processed_nothing_to_time_an_unknown_kind_or_a_run_without_consumers_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="no consumer of the share group processed a record of sg-topic"):
        measure(written(SG, 3), {"share group": RUNS["share group"]})
    with pytest.raises(ValueError, match="unknown kind of group 'queue'; the kinds are 'consumer group', 'share"):
        measure(clean(), {"queue": (SG, ["sg-1"])})
    with pytest.raises(ValueError, match="names no consumer: pass every consumer of the group"):
        measure(clean(), {"share group": (SG, [])})
    with pytest.raises(ValueError, match="all handed out and committed at one instant: nothing to time"):
        measure(shared("sg-1", [0], 7, 7), {"share group": RUNS["share group"]})


def test_the_figure_has_one_bar_per_consumer_for_each_group_and_gives_each_rate_in_its_title():
    fig = throughput_figure({"table": measure(clean(), RUNS), "partitions": 1, "per_record_ms": 200})
    assert [(bar.name, list(bar.y)) for bar in fig.data] == [("consumer group", [6, 0, 0]), ("share group", [2, 2, 2])]
    assert list(fig.data[0].x) == ["consumer 1", "consumer 2", "consumer 3"] and list(fig.data[0].text) == ["6", "0", "0"]
    title = fig.layout.title.text
    assert "3 consumers, 1 partition, 200 ms a record" in title
    assert f"consumer group {6 / 1.255:.1f} records/s" in title and f"share group {6 / 0.41:.1f} records/s" in title


@pytest.mark.parametrize("sizes, message", [
    (dict(consumers=2, partitions=2), r"consumers \(2\) must exceed partitions \(2\)"),
    (dict(records=2), r"records \(2\) must be at least consumers \(3\)"),
    (dict(per_record_ms=0), "must be at least 1"),
    (dict(poll_records=20, per_record_ms=200), r"at most half the acquisition lock .*lower poll_records"),
])
def test_bad_sizes_are_refused_naming_the_fix_before_anything_runs(tmp_path, sizes, message):
    exp = Experiment("share", "127.0.0.1:1", folder=tmp_path)
    with pytest.raises(ValueError, match=message):
        throughput(exp, **sizes)
    assert exp.history.events() == [] and not exp.participants


def test_real_broker_each_group_processes_every_record_the_share_group_uses_every_consumer_and_outpaces_the_other(
        bootstrap, tmp_path):
    """The notebook's run (3 consumers, 1 partition, 40 records, 200 ms each): nothing lost or processed twice, one
    consumer group member busy, all three share consumers busy, the consumer group committing once a record and the
    share group less often (once a poll of up to two), the share group faster by more than 1.5 times; every member
    stopped by the lab at the end."""
    run = throughput(Experiment("tp", bootstrap, folder=tmp_path))
    table = run["table"]
    assert (table.written == 40).all() and (table.processed == 40).all() and (table["processed again"] == 0).all()
    assert list(table["consumers with records"]) == [1, 3], table
    assert table.loc["consumer group", "commits"] == 40 and 20 <= table.loc["share group", "commits"] < 40, table
    rate = table["records/s"]
    assert rate["share group"] > 1.5 * rate["consumer group"], table
    assert {p.status for r in run["runs"].values() for p in r["consumers"]} == {"stopped"}
