"""One colour per participant, the same in every figure a kernel draws, and none of them red.

Red means something went wrong (an aborted write, a crash, a duplicate, a refused acknowledgement: the state and
action colours of :mod:`labkit.crashlab.timeline`), and green a committed write, so a participant's colour (its
``consumed by`` markers, a share consumer's ACQUIRED lines) comes from a palette without either, nor any colour a
state (a write's, a share record's, a sink run's) or an action line (dark greys) is drawn in. The first participant
a kernel draws gets the palette's first colour, the next a new one, and each keeps its colour in every later figure,
so instance-1 is the same colour in all of a notebook's figures. After :data:`PALETTE`'s ten names the colours repeat.
"""

from __future__ import annotations

import threading

#: Participant colours: ten hues that are not red, green, nor a state's blue, amber, purple or grey.
PALETTE = ("#f58518", "#393b79", "#72b7b2", "#9d755d", "#ff9da6", "#17becf", "#8c6d31", "#6b6ecf", "#bcbd22", "#7b4173")

_assigned: dict[str, str] = {}
_lock = threading.Lock()


def participant_colour(name: str) -> str:
    """The colour (``"#rrggbb"``) of participant ``name``: the one it was given when first drawn in this process, or
    the next of :data:`PALETTE`."""
    with _lock:
        if name not in _assigned:
            _assigned[name] = PALETTE[len(_assigned) % len(PALETTE)]
        return _assigned[name]
