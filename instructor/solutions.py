"""Reference solutions of the notebooks' exercises, for instructors, and one wrong answer per exercise.
``tests/test_exercise.py`` runs every check with both: the solution must be judged right and the wrong answer
wrong, with a hint (neither unanswered nor an error: a check raises only when the lab failed), so that no check can
pass vacuously. Keys are the notebooks' numbers."""

def finish_batch(producer, consumer, offsets):
    """02: the input offsets join the transaction, with the group's metadata (KIP-447)."""
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())


def commit_first(producer, consumer, offsets):
    """02, wrong: the consumer commits the offsets at once, outside the transaction."""
    consumer.commit(offsets=offsets, asynchronous=False)


def guard(assignment: list[int], offsets: dict[int, int]) -> dict[int, int]:
    """05: keep only the partitions this member holds."""
    return {partition: offset for partition, offset in offsets.items() if partition in assignment}


SOLUTIONS = {
    # 00: the aborted y1, y2 are in the log; read_committed skips them; nobody returns the markers.
    "00": {"read_committed": ["x1", "x2", "p1"], "read_uncommitted": ["x1", "x2", "p1", "y1", "y2"]},
    # 02: send_offsets_to_transaction: offsets and outputs commit, or abort, together.
    "02": finish_batch,
    # 01: idempotence (producer id + sequence numbers); acks=all and bounded in-flight come with it.
    "01": {"enable.idempotence": True},
    # 03: x1 0, x2 1, COMMIT 2, p1 3, y1 4 (open), p2 5: high watermark 6, LSO 4; after y1's commit its
    # COMMIT marker takes offset 6 and read_committed returns all five records.
    "03": {"high_watermark": 6, "last_stable_offset": 4, "read_committed_after_commit": ["x1", "x2", "p1", "y1", "p2"]},
    # 04: after the Kafka commit, before Spark's commits/N: the marker is committed, the replay is skipped.
    "04": "after_commit",
    "05": guard,
    # 06: write the effect first, then acknowledge: a crash in between duplicates, never loses.
    "06": "sink_first",
    # 07 (modelled): the abort returns the record to AVAILABLE; redelivered (count 2), then committed once.
    "07": {"state": "ACKNOWLEDGED", "delivery_count": 2, "outputs_committed": 1},
    # 08: killed after commit_transaction returned: the coordinator has CompleteCommit; nothing to abort; one copy.
    "08": {"outcome": None, "first_input": 4, "read_uncommitted": 1},
    # 09: two writers' first transactions (3 records + COMMIT marker each) are all the follower had: offset 8; the
    # second transactions' 6 records (their markers are no records) are lost.
    "09": {"elected": "follower", "lost": 6, "high_watermark": 8},
}

WRONG = {
    "00": {"read_committed": ["x1", "x2", "p1", "y1", "y2"], "read_uncommitted": ["x1", "x2", "p1", "y1", "y2"]},
    "01": {"acks": "all", "retries": 10},  # durable, retried, and still duplicated
    "02": commit_first,  # a crash before commit_transaction aborts the outputs, the offsets stay committed
    "03": {"high_watermark": 5, "last_stable_offset": 6, "read_committed_after_commit": ["x1", "x2", "p1", "p2"]},
    "04": "before_commit",  # the transaction was open: the restart aborted it and the replay wrote again
    "05": lambda assignment, offsets: offsets,  # no guard at all: part 1's bug
    "06": "ack_first",
    "07": {"state": "ACKNOWLEDGED", "delivery_count": 1, "outputs_committed": 1},
    "08": {"outcome": "aborted", "first_input": 3, "read_uncommitted": 2},  # part 4's answer, not this one's
    "09": {"elected": "follower", "lost": 8, "high_watermark": 16},  # markers counted; the old leader's watermark
}
