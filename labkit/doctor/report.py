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


def verdict(checks: Sequence[Check], *, external_broker: bool = False) -> list[str]:
    """The report's end: one line per notebook (runs here, or what stops it, and what of it runs all the same), then
    the count, naming the notebooks that can run.

    Args:
        external_broker: the lab uses another cluster (``LABKIT_BOOTSTRAP``): a notebook stopped only by its JDK
            (``java``, ``javac``) still runs the parts that need none (:attr:`labkit.doctor.needs.Notebook.partly`).
    """
    stopped = blocked(checks)
    jdk_only = [["javac"], ["java", "javac"]] if external_broker else [["javac"]]
    lines = ["Notebooks:"]
    for nb in needs.NOTEBOOKS:
        if nb.number not in stopped:
            state = "runs here"
        else:
            partly = f" ({nb.partly})" if nb.partly and stopped[nb.number] in jdk_only else ""
            state = f"cannot run{partly}: {', '.join(stopped[nb.number])}"
        lines.append(f"  {nb.number} {nb.title:<21} {state}")
    runs = len(needs.NOTEBOOKS) - len(stopped)
    if stopped:
        can = [nb.number for nb in needs.NOTEBOOKS if nb.number not in stopped]
        lines.append(f"{runs} of {len(needs.NOTEBOOKS)} notebooks can run here{': ' + ', '.join(can) if can else ''}; "
                     f"cannot: {', '.join(stopped)} (the fixes are on the FAIL lines above)")
    else:
        lines.append(f"All {len(needs.NOTEBOOKS)} notebooks can run here.")
    return lines


def render(checks: Sequence[Check], title: str, *, brief: bool = False, external_broker: bool = False) -> str:
    """The whole report: ``title``, the prerequisites' lines, the verdict.

    Args:
        brief: only the lines that warn or fail, the notebooks that cannot run and the count (``make lab``'s).
        external_broker: see :func:`verdict`.
    """
    ends = verdict(checks, external_broker=external_broker)
    if not brief:
        return "\n".join([title, *map(line, checks), *ends])
    stopped = blocked(checks)
    notes = [line(check) for check in checks if check.status != OK]
    return "\n".join([title, *notes, *[end for end in ends[1:-1] if end.split()[0] in stopped], ends[-1]])
