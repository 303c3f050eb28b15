"""A notebook's claims cell: its assertions check the lesson's claims against what happened, and its last line is
``labkit.claims_hold("All claims hold ...")``, which prints that line and publishes the mark ``("claims", "held")``
(:mod:`labkit.marks`). Reached only when every assertion above it held: the mark is the cell's own assertions having
run to its last line, not a reading of the cell's text.
"""

from __future__ import annotations

from labkit import marks

#: How a claims line starts.
CLAIMS_LINE = "All claims hold"
#: How a claims cell's source calls :func:`claims_hold` (``labkit.claims_hold(``), for whoever watches the cell end.
CLAIMS_CALL = "claims_hold("


def claims_hold(line: str) -> None:
    """The last line of a notebook's claims cell, in place of ``print(line)``: print ``line`` (e.g. ``"All claims
    hold on the real broker."``) and publish ``("claims", "held")`` to this kernel's observers (none outside the
    workshop hub).

    Raises:
        ValueError: ``line`` does not start with :data:`CLAIMS_LINE` (write the claims line itself).
    """
    if not isinstance(line, str) or not line.startswith(CLAIMS_LINE):
        raise ValueError(f"a claims line starts with {CLAIMS_LINE!r}, not {line!r}")
    print(line)
    marks.publish("claims", "held")


def is_claims_cell(source: str) -> bool:
    """Whether the code cell ``source`` is a claims cell (it calls :func:`claims_hold`)."""
    return CLAIMS_CALL in source
