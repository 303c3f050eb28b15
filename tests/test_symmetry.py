"""Canonical state keys (MODELLED, KIP-1289): renamings of one state get one key, and states that can
behave differently get different ones."""

from labkit.models.kip1289 import World
from labkit.models.share_partition import ACKNOWLEDGED, Record
from labkit.models.symmetry import Canon
from labkit.models.txn_coordinator import DataRecord


def _finished_twice(*held: tuple) -> World:
    """Both records of the one share partition ACKNOWLEDGED with one committed output each, and the
    instances ``held`` names (instance, offset) still holding them: the lock expired under them."""
    w = World(records=2, consumers=2, max_faults=0, history=False)
    w.sp.offsets = [Record(ACKNOWLEDGED, 1), Record(ACKNOWLEDGED, 1)]
    w.out.records = [DataRecord((0, 0), 1000, "committed"), DataRecord((0, 1), 1001, "committed")]
    for name in {name for name, _ in held}:
        w.clients[name] = w.clients[name]._replace(pc="holding", held=tuple((0, o) for n, o in held if n == name))
    return w


def test_an_instance_holding_one_of_two_alike_finished_records_is_one_state_whichever_it_holds():
    """The two records can be told apart only by their offsets, which the key leaves out for finished records:
    the key once numbered them by offset, so a stale holder of the first and one of the second were two
    states (six more of them in the 2 consumers x 2 records configuration)."""
    canon = Canon(World(records=2, consumers=2, max_faults=0, history=False))
    assert canon.key(_finished_twice(("c1", 0))) == canon.key(_finished_twice(("c1", 1)))


def test_two_instances_holding_one_finished_record_differ_from_holding_one_each():
    """Sound, not only canonical: both producing an output for one record could commit it twice; for two
    records, not."""
    canon = Canon(World(records=2, consumers=2, max_faults=0, history=False))
    assert canon.key(_finished_twice(("c1", 0), ("c2", 0))) != canon.key(_finished_twice(("c1", 0), ("c2", 1)))
    assert canon.key(_finished_twice(("c1", 0), ("c2", 0))) == canon.key(_finished_twice(("c1", 1), ("c2", 1)))


def test_voluntary_aborts_without_a_limit_are_not_counted_so_a_world_back_where_it_began_is_one_state():
    """With ``aborts=None`` the count of aborts so far changes nothing that can happen: it must not tell two
    states apart (it once did, and made notebook 07's default space twice as large)."""
    for aborts, same in ((None, True), (2, False)):
        start = World(records=1, consumers=1, count_on_abort="revert", aborts=aborts, history=False)
        w = start.clone()
        for action in [("poll", "c1"), ("produce", "c1"), ("send_acks", "c1"), ("abort", "c1"),
                       ("markers", "tx-c1", "output-0"), ("markers", "tx-c1", "__share_group_state-0")]:
            w.step(action)
        assert w.sp.offsets[0] == Record() and ("poll", "c1") in w.actions()
        assert (Canon(start).key(w) == Canon(start).key(start)) is same
