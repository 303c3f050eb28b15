"""MODELLED, KIP-1289: the steps of a :class:`~labkit.models.kip1289.World` that its brokers take, not its
clients: the transaction coordinator's WriteTxnMarkers (one partition per step), its
``transaction.timeout.ms``, crash and recovery, a share coordinator's crash, an acquisition lock's expiry.
Sources: [KIP-98] markers and recovery (:mod:`labkit.models.txn_coordinator`), [KIP-932] and [KIP-1289
seed §4.3] share partitions (:mod:`labkit.models.share_partition`), and the World's module for our choices.
"""

from __future__ import annotations

from labkit.models.share_partition import PENDING
from labkit.models.txn_coordinator import ONGOING, PREPARE_COMMIT


class CoordinatorSteps:
    """The brokers' steps, mixed into :class:`~labkit.models.kip1289.World` (whose state they change: its
    ``tc``, ``out``, ``sps``, ``state_names``, ``hosted``, clock and history). Each returns what happened, in words."""

    def _markers(self, tid: str, partition: str) -> str:
        t = self.tc.txns[tid]
        commit = t.state == PREPARE_COMMIT
        kind = "COMMIT" if commit else "ABORT"
        if partition == self.out.name:
            written = self.out.marker(t.pid, commit)
            for i, o in written if commit and self.events is not None else []:
                self._emit("effect", t.owner, i, o, value_id=self.value_id(i, o), txn=t.number)
            said = f"{len(written)} records"
        else:
            done = []
            for i in self.hosted[partition]:
                holders = None if self.events is None else [r.holder for r in self.sps[i].offsets]
                for o, ack_type in sorted(self.sps[i].complete(t.pid, commit).items()):
                    done.append((i, o))
                    if holders is not None:
                        self._emit("ack_committed", holders[o] or t.owner, i, o, value_id=self.value_id(i, o),
                                   ack_type=ack_type, error=None if commit else "TRANSACTION_ABORTED", txn=t.number)
            said = f"{len(done)} acknowledgements" + (f" ({', '.join(map(self.label, done))})" if done else "")
        after = self.tc.mark(tid, partition)
        if after.state != t.state:
            said += f"; every partition has its marker: {after.state}"
            if commit:
                self._emit("txn_end", t.owner, txn=t.number, outcome="committed", transactional_id=tid)
        return f"WriteTxnMarkers {kind} for {tid} to {partition}: {said}"

    def _tc_recover(self) -> str:
        self.tc.recover()
        return "transaction coordinator recovered from __transaction_state"

    def _timeout(self, tid: str) -> str:
        t = self.tc.txns[tid]
        self.clock_ms = max(self.clock_ms, t.began_ms + self.txn_timeout_ms)
        self.tc.time_out(tid)
        self._emit("txn_end", t.owner, txn=t.number, outcome="aborted", step="transaction.timeout.ms")
        return f"{tid}'s transaction {t.number} timed out: PREPARE_ABORT, epoch {t.epoch + 1}"

    def _tc_crash(self) -> str:
        self.tc.crash()
        return "transaction coordinator crashed (its markers not sent)"

    def _sc_crash(self, partition: str) -> str:
        hit = self.hosted[partition]
        for i in hit:
            self.sps[i].reload()
        return (f"share coordinator of {partition} crashed and reloaded it: {', '.join(self.names[i] for i in hit)} "
                "lost their acquisitions")

    def _lock_expiry(self, name: str, offset: int) -> str:
        i = self.names.index(name)
        sp, where = self.sps[i], self.label((i, offset))
        r = sp.offsets[offset]
        self.clock_ms = max(self.clock_ms, self.acquired_ms.get((i, offset), 0) + self.lock_ms)
        if r.state == PENDING and sp.lock_while_pending == "abort":
            t = next(t for t in self.tc.txns.values() if t.pid == r.pid)
            if t.state != ONGOING:
                return f"{where}'s lock expired while pending, but {t.tid} is already {t.state}"
            self.tc.time_out(t.tid)
            self._emit("txn_end", t.owner, txn=t.number, outcome="aborted", step="lock expiry")
            return f"{where}'s lock expired while pending: {t.tid}'s transaction is aborted"
        sp.release(offset)
        return f"{where}'s acquisition lock expired: {sp.offsets[offset].state}"
