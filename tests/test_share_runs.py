"""What labkit/share/runs.py reads of a share group's run, on a hand-written history (the notebook's runs on the real
broker read it in tests/test_share_groups.py and tests/test_share_close.py)."""

import pytest

from labkit.core.history import Event
from labkit.share.runs import first_ns


def test_first_ns_is_the_earliest_event_matching_every_field_given():
    events = [Event("share_state", "observer", mono_ns=5, topic="t", state="ACQUIRED"),
              Event("share_state", "observer", mono_ns=9, topic="t", state="AVAILABLE"),
              Event("share_state", "observer", mono_ns=7, topic="u", state="AVAILABLE"),
              Event("delivered", "a", mono_ns=3, topic="t"), Event("delivered", "b", mono_ns=2, topic="t")]
    assert first_ns(events, "share_state", topic="t", state="AVAILABLE") == 9
    assert first_ns(events, "share_state", state="AVAILABLE") == 7
    assert first_ns(events, "delivered", "a") == 3 and first_ns(events, "delivered") == 2
    with pytest.raises(ValueError):
        first_ns(events, "crash")
