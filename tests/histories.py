"""Hand-written histories for the checker and timeline tests."""

from labkit.crashlab.history import Event

OUT, IN = "out", "in"


class H:
    """A hand-written history; every event gets the next tick of a fake clock."""

    def __init__(self):
        self.events, self.t = [], 0

    def add(self, kind, participant, **f):
        self.t += 1
        self.events.append(Event(kind, participant, mono_ns=self.t, **f))
        return self

    def write(self, p, vid, offset, txn=None, topic=OUT, definite=True):
        self.add("send", p, topic=topic, partition=0, value_id=vid, txn=txn)
        return self.add("ack", p, topic=topic, partition=0, offset=offset, value_id=vid, txn=txn, definite=definite)

    def txn(self, p, n, outcome):
        if outcome == "committed":
            self.add("txn_commit_start", p, txn=n)
        return self.add("txn_end", p, txn=n, outcome=outcome, definite=True)

    def final(self, topic, level, records):
        for offset, vid in records:
            self.add("final_read", "lab", topic=topic, partition=0, offset=offset, value_id=vid, isolation_level=level)
        return self.add("final_read", "lab", topic=topic, isolation_level=level)

    def finals(self, records, topic=OUT, uncommitted=None):
        self.final(topic, "read_committed", records)
        return self.final(topic, "read_uncommitted", uncommitted if uncommitted is not None else records)
