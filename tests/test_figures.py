"""Each measured figure has one source, a file written by the bench that measured it, and the docs that quote it are
checked against that file (issue 48: the doctor, the README and the run-sheet each had their own, stale, copy).

* The notebooks' memory, measured the way each command runs: labkit/doctor/lab-memory.json
  (``bench/lab_memory.py --json``, the lab of ``make lab``), which ``make doctor`` reads and the README's memory line
  quotes, and labkit/doctor/hub-memory.json (``bench/hub.py --json``, an attendee on the workshop hub), which the
  run-sheet's sizing table quotes (:data:`labkit.doctor.needs.MEASURED_FOR`).
* The bundle's size: bench/results/bundle.json (``python -m labkit_dev.offline_check --json``); the README and the
  run-sheet quote it, the Makefile, labkit/bundle/ and the offline check give no figure of their own.

A notebook the file does not measure (no passed run) is said to be "not measured" wherever it is quoted. Each checker
(:func:`readme_problems`, :func:`sizing_problems`, :func:`bundle_problems`) is tested on hand-written texts first."""

from __future__ import annotations

import json
import re
from pathlib import Path

from labkit.doctor import checks, needs
from labkit_dev.offline_check import RESULTS as BUNDLE_RESULTS

REPO = Path(__file__).resolve().parents[1]
NUMBERS = [nb.number for nb in needs.NOTEBOOKS]
#: A size or memory figure as the docs write them ("1,452 MiB", "about 700 MB", "1.4 GiB").
FIGURE = re.compile(r"(\d[\d,.]*)\s*(MiB|GiB|MB|GB)\b")


def flat(text: str) -> str:
    """``text`` with each run of whitespace one space (the docs wrap lines anywhere)."""
    return " ".join(text.split())


def bullet(text: str, start: str) -> str:
    """The flattened list item that begins with ``start`` (up to the next item or the end)."""
    assert start in text, f"no {start!r}"
    begin = text.index(start)
    end = text.find("\n* ", begin)
    return flat(text[begin:] if end < 0 else text[begin:end])


def between(text: str, start: str, end: str) -> str:
    """The flattened text from ``start`` up to ``end`` (both must be there)."""
    text = flat(text)
    assert start in text, f"no {start!r}"
    begin = text.index(start)
    assert end in text[begin:], f"no {end!r} after {start!r}"
    return text[begin:text.index(end, begin)]


def memory_phrase(peaks: dict[str, int]) -> str:
    """How the README gives the peaks: the range of every notebook's but 04's, then 04's, then those not measured."""
    others = [peaks[n] for n in NUMBERS if n != "04" and n in peaks]
    four = f"{peaks['04']:,} MiB for 04" if "04" in peaks else "04 not measured"
    missing = [n for n in NUMBERS if n not in peaks]
    return (f"{min(others):,}-{max(others):,} MiB for every notebook but 04, {four}"
            + (f" (not measured: {', '.join(missing)})" if missing else ""))


def readme_problems(readme: str, peaks: dict[str, int]) -> list[str]:
    """What the README's memory line (from "**Memory**" to "**Disk**") gets wrong against ``peaks``."""
    line = between(readme, "**Memory**", "**Disk**")
    phrase = memory_phrase(peaks)
    problems = [] if phrase in line else [f"the README's memory line does not say {phrase!r}"]
    quoted = {int(n.replace(",", "")) for n, unit in FIGURE.findall(line) if unit == "MiB"}
    problems += [f"the README's memory line gives {n:,} MiB, which is no measured peak"
                 for n in sorted(quoted - set(peaks.values()))]
    problems += [f"the README's memory line gives {n} {unit}, not the measured MiB"
                 for n, unit in FIGURE.findall(line) if unit != "MiB"]
    problems += ["the README's memory line speaks of an estimate" for _ in re.findall(r"estimat", line)]
    return problems


def sizing_problems(run_sheet: str, measured: dict) -> list[str]:
    """What the run-sheet's sizing table and its "Machine" line get wrong against bench/hub.py's figures
    (``measured``: its JSON)."""
    peaks = needs.peaks_of(measured)
    header = "| idle lab | " + " | ".join(NUMBERS) + " |"
    row = f"| {measured['idle']['peak_mib']:,} MiB | " + " | ".join(
        f"{peaks[n]:,}" if n in peaks else "not measured" for n in NUMBERS) + " |"
    lines = [line.strip() for line in run_sheet.splitlines()]
    problems = []
    if header not in lines:
        problems.append(f"the run-sheet has no sizing table headed {header!r}")
    elif lines[lines.index(header) + 2:lines.index(header) + 3] != [row]:
        problems.append(f"the run-sheet's sizing table is not {row!r}")
    machine = bullet(run_sheet, "* Machine:")
    allowed = set(peaks.values()) | {measured["idle"]["peak_mib"]}
    problems += [f"the run-sheet's Machine line gives {n} {unit}, which is no measured figure"
                 for n, unit in FIGURE.findall(machine) if unit != "MiB" or int(n.replace(",", "")) not in allowed]
    return problems


def bundle_phrase(size_bytes: int) -> str:
    """The bundle's size as the docs give it: decimal MB (a USB stick's), to the nearest 10."""
    return f"about {round(size_bytes / 1e7) * 10:,} MB"


def bundle_problems(texts: dict[str, str], size_bytes: int | None, quoting: set[str]) -> list[str]:
    """What the texts (name -> the passage about the bundle) get wrong: the ``quoting`` ones must give the measured
    size (``None``: not measured, so no size at all) and no other; the others no size."""
    problems = []
    for name, text in texts.items():
        sizes = [f"{n} {unit}" for n, unit in FIGURE.findall(flat(text))]
        want = bundle_phrase(size_bytes)[len("about "):] if size_bytes and name in quoting else None
        if want and want not in sizes:
            problems.append(f"{name} does not give the bundle's measured size, {bundle_phrase(size_bytes)}")
        problems += [f"{name} gives the bundle a size of its own: {size}" for size in sizes if size != want]
    return problems


def test_the_checkers_catch_stale_figures_and_pass_the_measured_ones():
    peaks = {n: 500 + 10 * i for i, n in enumerate(NUMBERS)} | {"04": 1452}
    measured = {"idle": {"peak_mib": 314}, "notebooks": [
        {"notebook": f"{n}_x.ipynb", "error": None, "peak_mib": mib} for n, mib in peaks.items()]}
    # the README before issue 48, and a clean one
    old = ("- **Memory** free, each notebook's peak as measured: 0.8-1 GiB for 00, 05, 06 and 07 (01 and 03: about "
           "the same,\n  estimated), 1.6 GiB for 02 and 08, about 1.4 GiB for 04 (Spark). **Disk**: about 2 GB.")
    assert len(readme_problems(old, peaks)) == 1 + 3 + 1  # no phrase; 1, 1.6 and 1.4 GiB; an estimate
    clean = f"- **Memory** free, each notebook's peak:\n  {memory_phrase(peaks)} (Spark). **Disk**: about 2 GB."
    assert readme_problems(clean, peaks) == []
    assert readme_problems(clean.replace("1,452", "1,453"), peaks)
    # a notebook whose run failed must be said to be not measured
    failed = measured | {"notebooks": [{**measured["notebooks"][2], "error": "AssertionError"}, *[
        row for i, row in enumerate(measured["notebooks"]) if i != 2]]}
    assert "(not measured: 02)" in memory_phrase(needs.peaks_of(failed))
    # the run-sheet: its table, and a stale Machine line
    table = ("| idle lab | " + " | ".join(NUMBERS) + " |\n|" + "---|" * 10 + "\n| 314 MiB | "
             + " | ".join(f"{peaks[n]:,}" for n in NUMBERS) + " |\n")
    machine = "* Machine: `make doctor` checks it; the lab peaked at {} MiB (00).\n* Between two groups: reset.\n"
    assert sizing_problems(machine.format(500) + table, measured) == []
    assert sizing_problems(machine.format(780) + table, measured) == [
        "the run-sheet's Machine line gives 780 MiB, which is no measured figure"]
    assert len(sizing_problems(machine.format(500) + table.replace("| 1,452 |", "| 2,071 |"), measured)) == 1
    without_02 = " | ".join(f"{peaks[n]:,}" if n != "02" else "not measured" for n in NUMBERS)
    assert sizing_problems(machine.format(500) + table, failed) == [
        f"the run-sheet's sizing table is not '| 314 MiB | {without_02} |'"]
    # the bundle: the Makefile's and the README's sizes before issue 48 disagreed
    stale = {"Makefile": "dist/labkit-bundle-*.tar, about 700 MB.", "bundle": "(the archive is over 1 GB)",
             "README": "writes the archive, about 700 MB: every package"}
    assert bundle_problems(stale, 716_779_520, {"README"}) == [
        "Makefile gives the bundle a size of its own: 700 MB", "bundle gives the bundle a size of its own: 1 GB",
        "README does not give the bundle's measured size, about 720 MB",
        "README gives the bundle a size of its own: 700 MB"]
    good = {"Makefile": "dist/labkit-bundle-*.tar (its size: bench/results/bundle.json)",
            "README": "writes the archive, about 720 MB: every package"}
    assert bundle_problems(good, 716_779_520, {"README"}) == []
    assert bundle_problems(good, None, {"README"}) == ["README gives the bundle a size of its own: 720 MB"]


def test_the_readme_gives_the_peaks_measured_in_make_lab():
    assert readme_problems((REPO / "README.md").read_text(), needs.measured_peaks(needs.LAB_MEASURED)) == []


def test_the_run_sheet_s_sizing_table_is_the_hub_s_measured_one():
    measured = json.loads(needs.HUB_MEASURED.read_text())
    assert sizing_problems((REPO / "docs" / "instructor.md").read_text(), measured) == []


def test_make_doctor_quotes_the_figures_measured_in_make_lab():
    """`make doctor` runs check_memory with its defaults: a laptop's lab, make lab's figures, said so."""
    detail = checks.check_memory(10**6).detail
    peaks = needs.measured_peaks(needs.LAB_MEASURED)
    assert "measured in make lab): " + ", ".join(
        f"{n} {peaks[n]}" if n in peaks else f"{n} not measured" for n in NUMBERS) in detail


def test_the_hub_s_memory_line_quotes_the_figures_measured_on_the_hub():
    detail = checks.check_memory(10**6, way="hub").detail
    peaks = needs.measured_peaks(needs.HUB_MEASURED)
    assert "measured on the workshop hub): " + ", ".join(
        f"{n} {peaks[n]}" if n in peaks else f"{n} not measured" for n in NUMBERS) in detail


def test_the_bundle_s_size_is_the_measured_one_or_none():
    size = json.loads(BUNDLE_RESULTS.read_text())["bytes"] if BUNDLE_RESULTS.exists() else None
    makefile = (REPO / "Makefile").read_text()
    texts = {
        "the Makefile's bundle comment": between(makefile, "# One archive for a venue", "bundle: $(STAMP)"),
        "labkit/bundle/__init__.py": (REPO / "labkit" / "bundle" / "__init__.py").read_text(),
        "labkit_dev/offline_check.py": (REPO / "labkit_dev" / "offline_check.py").read_text(),
        "README": between((REPO / "README.md").read_text(), "**A venue with no network.**", "## "),
        "the run-sheet": bullet((REPO / "docs" / "instructor.md").read_text(), "* A venue whose network"),
    }
    assert bundle_problems(texts, size, {"README", "the run-sheet"}) == []
