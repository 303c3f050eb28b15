"""The doctor's report: one line per prerequisite (its fix on the same line when it fails or warns), then which
notebooks can run here and why the others cannot."""

from __future__ import annotations

from typing import Sequence

from labkit.doctor import needs
from labkit.doctor.checks import FAIL, OK, Check


def line(check: Check) -> str:
    """One prerequisite's line: status, name, what was found and, if any, ``-> fix: ...``."""
    fix = f" -> fix: {check.fix}" if check.fix else ""
    return f"  {check.status:<4}  {check.name:<17} {check.detail}{fix}"


def blocked(checks: Sequence[Check]) -> dict[str, list[str]]:
    """Notebook number -> the names of the failed checks that stop it (only the notebooks stopped)."""
    stopped: dict[str, list[str]] = {}
    for check in checks:
        if check.status == FAIL:
            for number in check.blocks:
                stopped.setdefault(number, []).append(check.name)
    return {nb.number: stopped[nb.number] for nb in needs.NOTEBOOKS if nb.number in stopped}


def verdict(checks: Sequence[Check]) -> list[str]:
    """The report's end: one line per notebook (runs here, or what stops it), then the count."""
    stopped = blocked(checks)
    lines = ["Notebooks:"]
    for nb in needs.NOTEBOOKS:
        if nb.number not in stopped:
            state = "runs here"
        else:
            partly = f" ({nb.partly})" if nb.partly and stopped[nb.number] == ["javac"] else ""
            state = f"cannot run{partly}: {', '.join(stopped[nb.number])}"
        lines.append(f"  {nb.number} {nb.title:<21} {state}")
    runs = len(needs.NOTEBOOKS) - len(stopped)
    if stopped:
        lines.append(f"{runs} of {len(needs.NOTEBOOKS)} notebooks can run here; cannot: {', '.join(stopped)} "
                     "(the fixes are on the FAIL lines above)")
    else:
        lines.append(f"All {len(needs.NOTEBOOKS)} notebooks can run here.")
    return lines


def render(checks: Sequence[Check], title: str, *, brief: bool = False) -> str:
    """The whole report: ``title``, the prerequisites' lines, the verdict.

    Args:
        brief: only the lines that warn or fail, the notebooks that cannot run and the count (``make lab``'s).
    """
    if not brief:
        return "\n".join([title, *map(line, checks), *verdict(checks)])
    stopped = blocked(checks)
    notes = [line(check) for check in checks if check.status != OK]
    ends = verdict(checks)
    return "\n".join([title, *notes, *[end for end in ends[1:-1] if end.split()[0] in stopped], ends[-1]])
