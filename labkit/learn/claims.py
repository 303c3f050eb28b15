"""Check a notebook's claims, and publish that they held.

A notebook's claims: its assertion cells check the lesson's claims against what happened, and its last claims cell ends
with ``labkit.claims_hold("All claims hold ...")``, which prints that line and publishes the mark ``("claims", "held")``
(:mod:`labkit.learn.marks`). That line is reached only when every assertion above it in its cell held: the mark is the
cell's own assertions having run to its last line, not a reading of the cell's text.

**An assertion cell** is a code cell with an ``assert`` statement: a line of its source whose first word is
``assert`` (:func:`is_assertion_cell`; under ``if labkit.under_test():`` too). In the notebooks each one is a
collapsed claims cell, or a CI-only cell whose assertions all run under ``if labkit.under_test():`` (notebook 04 has
seven claims cells, one per part, its last calling ``claims_hold``); ``tests/test_notebook_structure.py`` holds them
to it, and holds this line rule equal to Python's own parse of every cell.

**What a notebook's claims mark means** (:class:`Run`, issue 66): *held* only when the ``claims_hold`` line ran and no
assertion cell of the kernel's latest run had failed; *failed* or *error* as soon as any assertion cell fails, which
replaces an earlier *held*. The latest run is the kernel's: a kernel restart starts a new one (a new process, an empty
:class:`Run`); in one kernel each assertion cell counts by its latest execution, so Run All, which executes every cell
again, replaces each cell's outcome with the new one, and a failed cell run again and holding no longer counts as
failed (*held* then waits for the ``claims_hold`` line to run again).
"""

from __future__ import annotations

import re

from labkit.learn import marks

#: How a claims line starts.
CLAIMS_LINE = "All claims hold"
#: How a claims cell's source calls :func:`claims_hold` (``labkit.claims_hold(``), for whoever watches the cell end.
CLAIMS_CALL = "claims_hold("
#: A line of a cell's source that is an ``assert`` statement: its first word, at any indentation, is ``assert``.
ASSERT_LINE = re.compile(r"^[ \t]*assert\b", re.M)


def claims_hold(line: str) -> None:
    """The last line of a notebook's claims cell, in place of ``print(line)``: print ``line`` (e.g. ``"All claims
    hold on the real broker."``) and publish ``("claims", "held")`` to this kernel's observers (none outside the
    workshop hub, whose reporter counts it only if no other assertion cell of the run failed: :class:`Run`).

    Raises:
        ValueError: ``line`` does not start with :data:`CLAIMS_LINE` (write the claims line itself).
    """
    if not isinstance(line, str) or not line.startswith(CLAIMS_LINE):
        raise ValueError(f"a claims line starts with {CLAIMS_LINE!r}, not {line!r}")
    print(line)
    marks.publish("claims", "held")


def is_claims_cell(source: str) -> bool:
    """Whether the code cell ``source`` is the notebook's closing claims cell (it calls :func:`claims_hold`)."""
    return CLAIMS_CALL in source


def is_assertion_cell(source: str) -> bool:
    """Whether the code cell ``source`` is an assertion cell (the module docstring): a line of it is an ``assert``
    statement (:data:`ASSERT_LINE`)."""
    return ASSERT_LINE.search(source) is not None


class Run:
    """The assertion cells of one kernel's latest run of a notebook, each by its latest outcome, and the claims mark
    they make (the module docstring). One per kernel process; :meth:`cell_ended` is told of every cell's end."""

    def __init__(self) -> None:
        self._outcomes: dict[str, str] = {}  # cell -> "held", "failed" or "error": its latest execution's

    def cell_ended(self, cell: str, source: str, raised: BaseException | None, claims_line_ran: bool) -> str | None:
        """Record the end of the cell ``cell`` (what tells it from other cells: JupyterLab's cell id, else its source)
        whose code is ``source``, which ``raised`` (None: it ran to its end) and in which the claims line ran
        (``claims_line_ran``: :func:`claims_hold` published ``held``). Returns the notebook's claims mark to report
        now, or None:

        * not an assertion cell (:func:`is_assertion_cell`) and no claims line: None (nothing of the claims);
        * an assertion cell that raised: ``"failed"`` on an ``AssertionError`` (a claim did not hold), else
          ``"error"``, at once, whatever held before;
        * a cell whose claims line ran and that ended: ``"held"`` if no assertion cell's latest outcome is a failure,
          else that failure again (``"failed"`` before ``"error"``);
        * an assertion cell that held without the claims line: None (held waits for the claims line).
        """
        if not claims_line_ran and not is_assertion_cell(source):
            return None
        outcome = "held" if raised is None else "failed" if isinstance(raised, AssertionError) else "error"
        self._outcomes[cell] = outcome
        if outcome != "held":
            return outcome
        if not claims_line_ran:
            return None
        failures = set(self._outcomes.values()) - {"held"}
        return "failed" if "failed" in failures else "error" if failures else "held"
