import multiprocessing
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from labkit.core.history import COLUMNS, History


def test_events_round_trip_with_their_fields(tmp_path):
    h = History(tmp_path / "h.jsonl")
    h.append("send", "p1", topic="t", partition=0, value_id="p1-1", transactional_id="tx", txn=1)
    h.append("ack", "p1", topic="t", partition=0, offset=0, value_id="p1-1", producer_id=7, producer_epoch=0,
             definite=True)
    events = History(tmp_path / "h.jsonl").events()
    assert [e.kind for e in events] == ["send", "ack"]
    assert events[1].offset == 0 and events[1].producer_id == 7 and events[1].definite is True
    assert events[0].mono_ns < events[1].mono_ns and events[0].wall_ms > 1_600_000_000_000
    frame = History(tmp_path / "h.jsonl").frame()
    assert list(frame.columns) == COLUMNS and len(frame) == 2


def test_first_finds_the_earliest_matching_event(tmp_path):
    h = History(tmp_path / "h.jsonl")
    h.append("consume", "c1", value_id="a")
    second = h.append("consume", "c2", value_id="b")
    h.append("consume", "c2", value_id="b")
    assert h.first("consume", "c2", "b") == second
    assert h.first("consume").value_id == "a"
    assert h.first("ack") is None and h.first("consume", "c3") is None
    with pytest.raises(ValueError, match="unknown event kind 'acked'"):
        h.first("acked")


def test_unknown_kind_and_field_are_refused(tmp_path):
    h = History(tmp_path / "h.jsonl")
    with pytest.raises(ValueError, match="unknown event kind 'sent'.*the kinds are send"):
        h.append("sent", "p1")
    with pytest.raises(TypeError):
        h.append("send", "p1", colour="red")
    assert h.events() == []  # nothing half-written


def _writer(path, name, n):
    h = History(path)
    for i in range(n):
        h.append("send", name, value_id=f"{name}-{i}", key="k" * 200)


def test_concurrent_processes_never_interleave_lines(tmp_path):
    path = tmp_path / "h.jsonl"
    procs = [multiprocessing.Process(target=_writer, args=(path, f"w{i}", 300)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    events = History(path).events()  # every line parses
    assert len(events) == 1200
    for i in range(4):
        ids = [e.value_id for e in events if e.participant == f"w{i}"]
        assert ids == [f"w{i}-{n}" for n in range(300)]  # one clock for all processes: order kept


def test_a_batch_line_expands_to_one_event_per_record(tmp_path):
    h = History(tmp_path / "h.jsonl")
    h.append("start", "p")
    h.append_batch("ack", "p", {"mono_ns": [10**18, 10**18 + 5], "value_id": ["p-1", "p-2"], "offset": [0, 1]},
                   topic="t", definite=True)
    h.append_batch("ack", "p", {"mono_ns": [], "value_id": []})  # nothing to write
    assert len((tmp_path / "h.jsonl").read_text().splitlines()) == 2
    acks = [e for e in h.events() if e.kind == "ack"]
    assert [(e.value_id, e.offset, e.topic, e.definite) for e in acks] == [("p-1", 0, "t", True), ("p-2", 1, "t", True)]


def test_bad_batches_are_refused(tmp_path):
    h = History(tmp_path / "h.jsonl")
    with pytest.raises(ValueError, match="differ in length"):
        h.append_batch("ack", "p", {"mono_ns": [1, 2], "value_id": ["x"]})
    with pytest.raises(TypeError):
        h.append_batch("ack", "p", {"mono_ns": [1], "colour": ["red"]})
    assert h.events() == []


def test_a_line_still_being_written_is_left_out(tmp_path):
    history = History(tmp_path / "h.jsonl")
    history.append("start", "p")
    with open(history.path, "a") as f:
        f.write('{"kind": "send", "participant": "p", "value_id": "p-1')  # another process, mid-write
    assert [e.kind for e in history.events()] == ["start"]
    with open(history.path, "a") as f:
        f.write('"}\n')
    assert sorted(e.kind for e in history.events()) == ["send", "start"]


def test_reads_are_incremental_and_agree_with_a_fresh_read(tmp_path):
    history = History(tmp_path / "h.jsonl")
    history.append("start", "p")
    history.events()
    read_to = history._read_to
    history.append_batch("send", "p", {"mono_ns": [1, 2], "value_id": ["p-1", "p-2"]}, topic="t")
    history.append("stop", "p")
    events = history.events()
    assert history._read_to > read_to  # only the new lines were parsed
    assert events == History(history.path).events()
    assert [e.kind for e in events] == ["send", "send", "start", "stop"]  # in mono_ns order, the batch's early


def test_threads_reading_one_history_see_each_event_once(tmp_path):
    history = History(tmp_path / "h.jsonl")
    for i in range(2000):
        history.append("send", "p", value_id=f"p-{i}")
    with ThreadPoolExecutor(8) as pool:
        reads = list(pool.map(lambda _: len(history.events()), range(8)))
    assert reads == [2000] * 8 and len(history.events()) == 2000


def test_a_short_write_is_followed_by_the_rest_of_the_line(tmp_path, monkeypatch):
    real_write, sizes = os.write, []

    def short_first_write(fd, data):  # the kernel may take part of a write (a signal, the file size limit)
        sizes.append(len(data))
        return real_write(fd, data[:len(data) // 2] if len(sizes) == 1 else data)

    monkeypatch.setattr(os, "write", short_first_write)
    history = History(tmp_path / "h.jsonl")
    history.append("send", "p", value_id="p-1")
    history.append("ack", "p", value_id="p-1", offset=0)
    monkeypatch.undo()
    assert [(e.kind, e.value_id) for e in History(history.path).events()] == [("send", "p-1"), ("ack", "p-1")]
    assert len(sizes) == 3  # the first line took two writes
