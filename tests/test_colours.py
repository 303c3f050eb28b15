"""Participants keep one colour across a kernel's figures, distinct from each other and never red or green
(issue 37, item 4)."""

import uuid

from labkit.crashlab.colours import PALETTE, participant_colour
from labkit.crashlab.timeline import ACTION_COLOURS, STATE_COLOURS, timeline_figure
from labkit.share.timeline import share_timeline_figure
from tests.histories import OUT, SHARE, H, S

WRONG_OR_RIGHT = {STATE_COLOURS["aborted"], STATE_COLOURS["committed"], ACTION_COLOURS["crash"], "#d62728"}


def consumed_colours(fig) -> dict[str, str]:
    return {t.name.removeprefix("consumed by "): t.marker.color for t in fig.data if t.name.startswith("consumed by")}


def test_a_participant_keeps_its_colour_from_figure_to_figure():
    a, b, c = (f"{who}-{uuid.uuid4().hex[:6]}" for who in "abc")  # names no other test has drawn
    first, second = H().write("p", "p-1", 0), H().write("p", "p-1", 0)
    for who in (a, b):
        first.add("consume", who, topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_committed")
    for who in (c, b):  # another figure, another order, a participant the first did not have
        second.add("consume", who, topic=OUT, partition=0, offset=0, value_id="p-1", isolation_level="read_committed")
    one, two = consumed_colours(timeline_figure(first.events)), consumed_colours(timeline_figure(second.events))
    assert one[b] == two[b] and len({one[a], one[b], two[c]}) == 3


def test_share_consumers_and_group_consumers_share_the_palette_and_none_is_red():
    who = f"w-{uuid.uuid4().hex[:6]}"
    h = S().written(1).delivered(who, 0).acked(who, 0).state(0, 0, "ACKNOWLEDGED").spso(1)
    fig = share_timeline_figure(h.events, SHARE)
    lines = [t.line.color for t in fig.data if t.name == f"ACQUIRED by {who} (client)"]
    assert lines == [participant_colour(who)]
    assert not WRONG_OR_RIGHT & set(PALETTE) and len(set(PALETTE)) == len(PALETTE)
