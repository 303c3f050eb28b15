"""The book's site: a Sphinx source folder (MyST-NB pages of the recorded runs, the glossary, the run-sheet, the
README's overview as the landing page) and its offline HTML build.

The builder is Sphinx with MyST-NB and sphinx-book-theme, Jupyter Book 1's own engine, pinned in
``requirements-book.txt``: Jupyter Book 2 fetches its site template from the network at build time (fails offline);
these build offline and their theme ships its assets (no CDN). It runs in its own venv, ``.venv-book``
(:func:`ensure_builder`), because MyST-NB pins its own IPython / nbclient / jupyter-cache range, which need not match
the lab's pinned ``requirements.txt``; the lab's venv only runs the notebooks and writes the source folder, and the
builder's venv never imports labkit. Pages are not executed by the builder (``nb_execution_mode = "off"``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from labkit.book.clean import admonition

REPO = Path(__file__).resolve().parents[2]
BUILDER_VENV = REPO / ".venv-book"
REQUIREMENTS = REPO / "requirements-book.txt"

CONF = '''\
# Written by labkit.book.site: the book's Sphinx configuration (offline: no CDN, no execution).
project = "labkit: Kafka transactions and share groups, a recorded run"
author = "labkit"
extensions = ["myst_nb"]
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["colon_fence"]
html_theme = "sphinx_book_theme"
html_title = "labkit: the lab, read before you run it"
html_static_path = ["_static"]
html_js_files = ["plotly.min.js"]
html_css_files = ["book.css"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {"show_prev_next": True, "use_download_button": False, "use_fullscreen_button": False,
                      "use_repository_button": False, "show_toc_level": 2}
html_context = {"default_mode": "light"}
suppress_warnings = ["myst.xref_missing", "myst.header", "misc.highlighting_failure"]
exclude_patterns = ["_build"]
'''

#: Claims cells show only their verdict: the input collapsed (MyST-NB's hide-input tag); stray prompt numbers off.
CSS = ".cell.tag_provenance { font-size: 0.9em; }\n"


def builder_python(venv: Path = BUILDER_VENV) -> Path:
    """The builder venv's Python."""
    return venv / "bin" / "python"


def ensure_builder(venv: Path = BUILDER_VENV, requirements: Path = REQUIREMENTS) -> Path:
    """The builder venv's Python, creating the venv (``python -m venv`` + ``pip install -r requirements-book.txt``,
    about 60 s wall and 20 s CPU from PyPI) when it is missing or older than ``requirements``. The same steps as
    ``make book``'s ``.venv-book/.installed`` rule (its stamp file is shared).

    Raises:
        subprocess.CalledProcessError: venv creation or pip failed (pip's output is on stderr). subprocess.TimeoutExpired:
            venv creation took more than 5 minutes, or pip more than 30.
    """
    installed = venv / ".installed"
    if not installed.exists() or installed.stat().st_mtime < requirements.stat().st_mtime:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run([str(builder_python(venv)), "-m", "pip", "install", "-q", "-r", str(requirements)], check=True, timeout=1800)
        installed.touch()
    return builder_python(venv)


def _linked(text: str, pages: set[str]) -> str:
    """README text with each backticked path of a page in the book turned into a link to it."""
    def link(m: re.Match) -> str:
        path = m.group(1)
        return f"[`{path}`]({path})" if path in pages else m.group(0)
    return re.sub(r"`((?:notebooks|docs)/[\w.-]+\.(?:ipynb|md))`", link, text)


def landing(readme: str, pages: list[str], prov: str) -> str:
    """The landing page (MyST): the README up to its "Two clients" section (the overview and the notebooks), the
    provenance note, and the book's table of contents (``pages``: source paths without suffix, in order)."""
    overview = readme.split("\n## Two clients", 1)[0]
    names = {p + s for p in pages for s in (".ipynb", ".md")}
    toc = "\n".join(pages)
    return (f"{_linked(overview, names)}\n\n{admonition(prov)}\n"
            f"```{{toctree}}\n:maxdepth: 1\n:caption: The lab\n\n{toc}\n```\n")


def with_note(markdown: str, prov: str) -> str:
    """A Markdown page with the provenance note after its title."""
    title, _, rest = markdown.partition("\n")
    note = admonition(prov)
    return f"{title}\n\n{note}{rest}" if title.startswith("# ") else f"{note}\n{markdown}"


def write_source(src: Path, notebook_pages: list[Path], prov: str, repo: Path = REPO) -> list[str]:
    """Fill ``src`` (emptied first) with the book's sources: the notebook pages (already cleaned, copied to
    ``src/notebooks/``), the glossary, the run-sheet, the landing page, ``conf.py`` and the static assets
    (plotly.min.js from the lab's plotly package). Returns the pages in reading order."""
    import plotly

    if src.exists():
        shutil.rmtree(src)
    (src / "notebooks").mkdir(parents=True)
    (src / "docs").mkdir()
    (src / "_static").mkdir()
    pages = []
    for page in notebook_pages:
        shutil.copy(page, src / "notebooks" / page.name)
        pages.append(f"notebooks/{page.stem}")
    (src / "notebooks" / "glossary.md").write_text(with_note((repo / "notebooks/glossary.md").read_text(), prov))
    (src / "docs" / "instructor.md").write_text(with_note((repo / "docs/instructor.md").read_text(), prov))
    pages += ["notebooks/glossary", "docs/instructor"]
    (src / "index.md").write_text(landing((repo / "README.md").read_text(), pages, prov))
    (src / "conf.py").write_text(CONF)
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", src / "_static" / "plotly.min.js")
    (src / "_static" / "book.css").write_text(CSS)
    return pages


def build_html(src: Path, out: Path, python: Path) -> subprocess.CompletedProcess:
    """``sphinx-build -b html src out`` in the builder's venv (``python``), from scratch (a few seconds per page).

    Raises:
        RuntimeError: Sphinx failed (its output quoted). subprocess.TimeoutExpired: Sphinx ran more than 15 minutes.
    """
    if out.exists():
        shutil.rmtree(out)
    done = subprocess.run([str(python), "-m", "sphinx", "-b", "html", "-q", "-d", str(src.parent / "doctrees"),
                           str(src), str(out)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"sphinx-build failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done
