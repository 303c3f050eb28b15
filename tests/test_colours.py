"""Participants keep one colour across a kernel's figures, distinct from each other, from every state and action
colour, and never red or green; red is only for what went wrong (issue 37, item 4)."""

import uuid

from labkit.crashlab.colours import PALETTE, participant_colour
from labkit.crashlab.timeline import ACTION_STYLES, STATE_COLOURS, WRONG, timeline_figure
from labkit.share.timeline import BROKER_COLOURS, share_timeline_figure
from labkit.spark.timeline import COPY_COLOURS, RUN_COLOURS
from tests.histories import OUT, SHARE, H, S

REDS = {"#d62728", "#e45756"}
WENT_WRONG = {"crash", "aborted", "crashed", "extra copies"}  # the states and actions drawn red
GREENS = {"#54a24b", "#2ca02c"}
ACTION_COLOURS = {colour for colour, _ in ACTION_STYLES.values()}
STATES = [*STATE_COLOURS.items(), *BROKER_COLOURS.items(), *RUN_COLOURS.items(), *COPY_COLOURS.items()]  # (name, colour)


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


def test_a_share_consumer_is_drawn_in_its_participant_colour_and_the_palette_has_no_red_or_green():
    who = f"w-{uuid.uuid4().hex[:6]}"
    h = S().written(1).delivered(who, 0).acked(who, 0).state(0, 0, "ACKNOWLEDGED").spso(1)
    fig = share_timeline_figure(h.events, SHARE)
    lines = [t.line.color for t in fig.data if t.name == f"ACQUIRED by {who} (client)"]
    assert lines == [participant_colour(who)]
    assert len(set(PALETTE)) == len(PALETTE) and not (REDS | GREENS) & set(PALETTE)


def test_participants_states_and_actions_never_share_a_colour():
    assert not set(PALETTE) & (ACTION_COLOURS | {colour for _, colour in STATES})
    assert ACTION_COLOURS & {colour for _, colour in STATES} <= {WRONG}  # a crash line is as red as a crashed run, nothing else


def test_red_is_only_for_what_went_wrong():
    red_states = {name for name, colour in STATES if colour in REDS}
    red_actions = {kind for kind, (colour, _) in ACTION_STYLES.items() if colour in REDS}
    assert red_states | red_actions <= WENT_WRONG and red_actions == {"crash"}
    green_states = {name for name, colour in STATES if colour in GREENS}
    assert green_states == {"committed", "ACKNOWLEDGED", "once"}


def test_each_action_kind_has_a_line_style_of_its_own():
    assert len(set(ACTION_STYLES.values())) == len(ACTION_STYLES)
