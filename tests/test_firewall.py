"""The hub's wall (labkit/hub/firewall.py): its tables' names. The rules themselves are tested on real namespaces in
tests/test_sandbox.py (two attendees under two hubs' walls at once)."""

from labkit.hub import firewall


def test_one_table_per_hub():
    assert firewall.table_name("/a/state") == firewall.table_name("/a/state") != firewall.table_name("/b/state")
    assert firewall.table_name("/a/state").startswith(firewall.TABLE_PREFIX)
