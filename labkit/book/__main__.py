"""``python -m labkit.book [NN ...] [--out DIR] [--builder PYTHON] [--allow-failures]``: run the notebooks (cached),
then build the book.

Folders (under ``$LABKIT_HOME/book`` unless ``--home``): ``executed/`` (the recorded runs and their stamps),
``pages/`` (the cleaned pages), ``src/`` (Sphinx's sources), ``html/`` (the site; ``--out`` to put it elsewhere).
``--no-run``: the site from the recorded runs as they are (to work on the pages without running the notebooks).
Serve it with ``python -m http.server -d <html folder>``. Prints each notebook's run time (or "cached") and the
build's. A cell that raised in a run (a live one, or a recorded one with ``--no-run``) is printed with its notebook,
its index and its error, and the book is not built (the recorded runs stay in ``executed/``); with
``--allow-failures`` the book is built, each failed cell shown on its page as failed (its error kept and marked,
:mod:`labkit.book.clean`). Exit 1 when a cell raised (with the flag too: the run failed), when a live widget's
recording failed, or when Sphinx warned (a broken link, a page it could not read: each warning printed, the site
still built).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from labkit.book import clean, execute, provenance, site


def notebooks(selection: list[str], repo: Path = site.REPO) -> list[Path]:
    """The lab's notebooks in order, or those whose number or name starts with one of ``selection`` ("00", "05_u"),
    then the other notebook files ``selection`` names by path (``path/to/x.ipynb``), in its order.

    Raises:
        SystemExit: a selection matches no notebook.
    """
    every = sorted((repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not selection:
        return every
    files = [Path(s).resolve() for s in selection if s.endswith(".ipynb") and Path(s).is_file()]
    prefixes = [s for s in selection if not (s.endswith(".ipynb") and Path(s).is_file())]
    chosen = [nb for nb in every if any(nb.name.startswith(s) for s in prefixes)]
    if len(chosen) < len(prefixes):
        raise SystemExit(f"no notebook matches one of {prefixes}: the notebooks are {[nb.name for nb in every]}")
    return chosen + [f for f in files if f not in chosen]


def main(argv: list[str] | None = None) -> int:
    from labkit.broker.runtime import labkit_home

    parser = argparse.ArgumentParser(prog="python -m labkit.book", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*",
                        help="notebook numbers or name prefixes, or paths of other notebooks (default: all nine)")
    parser.add_argument("--home", type=Path, help="build folder (default: $LABKIT_HOME/book)")
    parser.add_argument("--out", type=Path, help="the site's folder (default: <home>/html)")
    parser.add_argument("--builder", type=Path, help="the builder venv's python (default: .venv-book, made if missing)")
    parser.add_argument("--parallel", type=int, default=execute.MAX_PARALLEL, help="notebooks run at once (max 2)")
    parser.add_argument("--no-run", action="store_true",
                        help="build the site from the recorded runs as they are, even if labkit changed since")
    parser.add_argument("--allow-failures", action="store_true",
                        help="build the book even when a cell raised, each failed cell shown on its page as failed "
                             "(exit status 1 still)")
    args = parser.parse_args(argv)
    home = args.home or labkit_home() / "book"
    out = args.out or home / "html"
    chosen = notebooks(args.notebooks)
    start = time.monotonic()
    if args.no_run:
        missing = [nb.name for nb in chosen if not (home / "executed" / nb.name).exists()]
        if missing:
            raise SystemExit(f"no recorded run of {missing} in {home / 'executed'}: build once without --no-run")
        runs = [execute.Run(nb, home / "executed" / nb.name, True, 0.0, 0) for nb in chosen]
    else:
        runs = execute.run_all(chosen, home / "executed", parallel=min(args.parallel, execute.MAX_PARALLEL))
    for run in runs:
        print(f"{run.notebook.name}: {'cached' if run.cached else f'ran in {run.seconds:.1f} s'}"
              + (f", {run.errors} cell(s) raised" if run.errors else ""))
    failed = {run.notebook.name: clean.failures(json.loads(run.executed.read_text())) for run in runs}
    for name, cells in failed.items():
        for cell in cells:
            print(f"{name}: {cell}")
    count = sum(map(len, failed.values()))
    if count and not args.allow_failures:
        print(f"book not built: {count} cell(s) failed (above; the runs are in {home / 'executed'}; {out} is left as "
              "it was). Fix them, or build the book with each failure shown as failed: --allow-failures "
              "(make book ARGS=--allow-failures)")
        return 1
    pages = []
    for run in runs:
        page = home / "pages" / run.notebook.name
        clean.write_page(run.executed, page, json.loads(run.executed.with_suffix(".versions.json").read_text()))
        pages.append(page)
    latest = json.loads(runs[-1].executed.with_suffix(".versions.json").read_text())
    site.write_source(home / "src", pages, provenance.line(latest))
    built = time.monotonic()
    done = site.build_html(home / "src", out, args.builder or site.ensure_builder())
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    (home / "sphinx-warnings.txt").write_text(done.stderr)
    for warning in warnings:
        print(warning.replace(str(home / "src"), "src"))
    if warnings:
        print(f"{len(warnings)} Sphinx warning(s), all in {home / 'sphinx-warnings.txt'}: fix them (make book fails)")
    if count:
        print(f"{count} failed cell(s) shown on their pages as failed (--allow-failures)")
    print(f"book: {out}/index.html (runs {built - start:.1f} s, site {time.monotonic() - built:.1f} s); "
          f"serve it with: python -m http.server -d {out}")
    return 1 if warnings or count or any(run.errors for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
