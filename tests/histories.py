"""Hand-written histories for the checker and timeline tests."""

from labkit.core.history import Event

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


SHARE = "work"


class S(H):
    """A hand-written share-group history (KIP-932): writer "w" wrote ``s-<offset + 1>`` at each offset."""

    def written(self, n):
        for offset in range(n):
            self.write("w", f"s-{offset + 1}", offset, topic=SHARE)
        return self

    def later(self, ms):
        self.t += ms * 1_000_000
        return self

    def delivered(self, c, offset, count=1):
        return self.add("delivered", c, topic=SHARE, partition=0, offset=offset, value_id=f"s-{offset + 1}",
                        delivery_count=count)

    def acked(self, c, offset, ack_type="ACCEPT", error=None):
        f = dict(topic=SHARE, partition=0, offset=offset, value_id=f"s-{offset + 1}", ack_type=ack_type)
        return self.add("acknowledged", c, **f).add("ack_committed", c, **f, error=error, definite=True)

    def state(self, first, last, state, count=1):
        return self.add("share_state", "broker", topic=SHARE, partition=0, offset=first, last_offset=last,
                        state=state, delivery_count=count)

    def spso(self, offset):
        return self.add("share_offsets", "broker", topic=SHARE, partition=0, offset=offset, lag=0)

    def effect(self, c, offset):
        return self.add("effect", c, topic=SHARE, partition=0, offset=offset, value_id=f"s-{offset + 1}")
