"""One colour per participant, the same in every figure a kernel draws, and none of them red.

Red means something went wrong (an aborted write, a crash, a duplicate, a refused acknowledgement: the state and
action colours of :mod:`labkit.crashlab.timeline`), and green a committed write, so a participant's colour (its
``consumed by`` markers, a share consumer's ACQUIRED lines) comes from a palette without either. The first participant
a kernel draws gets the palette's first colour, the next a new one, and each keeps its colour in every later figure,
so instance-1 is the same colour in all of a notebook's figures. After :data:`PALETTE`'s ten names the colours repeat.
"""

from __future__ import annotations

import threading

#: Participant colours: Tableau 10 without its red and green, plus two more without either.
PALETTE = ("#4c78a8", "#f58518", "#b279a2", "#72b7b2", "#9d755d", "#eeca3b", "#ff9da6", "#17becf", "#8c6d31", "#393b79")

_assigned: dict[str, str] = {}
_lock = threading.Lock()


def participant_colour(name: str) -> str:
    """The colour (``"#rrggbb"``) of participant ``name``: the one it was given when first drawn in this process, or
    the next of :data:`PALETTE`."""
    with _lock:
        if name not in _assigned:
            _assigned[name] = PALETTE[len(_assigned) % len(PALETTE)]
        return _assigned[name]
