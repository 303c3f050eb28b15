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

import json
import posixpath
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
myst_heading_anchors = 3
html_theme = "sphinx_book_theme"
html_title = "labkit: the lab, read before you run it"
html_static_path = ["_static"]
html_js_files = ["plotly.min.js"]
html_css_files = ["book.css"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
# No right-hand sidebar: the page's sections are in the left one, under the book's pages (the article gets the room a
# lab figure is laid out for, crashlab.timeline.ASSUMED_WIDTH 850 px, at a 1280 px window); one search field (the
# header's), not two.
html_sidebars = {"**": ["navbar-logo.html", "sbt-sidebar-nav.html", "page-toc.html"]}
html_theme_options = {"secondary_sidebar_items": [], "show_navbar_depth": 1, "show_prev_next": True,
                      "use_download_button": False, "use_fullscreen_button": False, "use_repository_button": False}
html_context = {"default_mode": "light"}
exclude_patterns = ["_build"]
'''

#: The provenance note a little smaller; the article as wide as the window leaves it (no cap: a lab figure is laid out
#: for 850 px); a live widget's recorded panel (:mod:`labkit.book.recording`) as a ruled table; a cell that failed in
#: the run (:mod:`labkit.book.clean` tags it ``labkit-failed``) framed in red.
CSS = """.cell.tag_provenance { font-size: 0.9em; }
.cell.tag_labkit-failed { border-left: 4px solid #c62828; padding-left: 0.6em; }
.bd-main .bd-content .bd-article-container { max-width: none; }
.bd-sidebar-primary { flex-shrink: 0; }
table.labkit-recording { border-collapse: collapse; margin: 0.4em 0; }
table.labkit-recording td { border: 1px solid #d0d0d0; padding: 4px 10px; vertical-align: middle; }
"""


def builder_python(venv: Path = BUILDER_VENV) -> Path:
    """The builder venv's Python."""
    return venv / "bin" / "python"


def ensure_builder(venv: Path = BUILDER_VENV, requirements: Path = REQUIREMENTS) -> Path:
    """The builder venv's Python, creating the venv (``python -m venv`` + ``pip install -r requirements-book.txt``,
    about 60 s wall and 20 s CPU from PyPI) when it is missing or older than ``requirements``. The same steps as
    ``make book``'s ``.venv-book/.installed`` rule (its stamp file is shared).

    Raises:
        subprocess.CalledProcessError: venv creation or pip failed (pip's output is on stderr).
        subprocess.TimeoutExpired: venv creation took more than 5 minutes, or pip more than 30.
    """
    installed = venv / ".installed"
    if not installed.exists() or installed.stat().st_mtime < requirements.stat().st_mtime:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run([str(builder_python(venv)), "-m", "pip", "install", "-q", "-r", str(requirements)], check=True, timeout=1800)
        installed.touch()
    return builder_python(venv)


def _slug(heading: str) -> str:
    """MyST's anchor of a heading (``myst_heading_anchors``: lower case, punctuation dropped, spaces to dashes)."""
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


#: A Markdown link ``[label](target)`` (not an image's, not inside a code span's backticks).
LINK = re.compile(r"(?<![!\]`])\[([^\]]+)\]\(([^)\s]+)\)")


def unlinked(text: str, where: str, names: set[str], anchors: set[str] | None = None) -> str:
    """``text``, the Markdown of the book's page ``where`` (its source path, e.g. ``"notebooks/00_tour.ipynb"``), with
    each link to a file the book does not hold (``names``: the book's source paths) turned into its text and where the
    file is (a lab notebook left out of this build, or a file of the repository); with ``anchors`` (the page's own
    section anchors), also each link to a section the page lacks (the README's, after the overview). Web links stay.
    So that no link of the book is broken, and Sphinx has nothing to warn of."""
    folder = posixpath.dirname(where)

    def link(m: re.Match) -> str:
        label, target = m.group(1), m.group(2)
        path, _, fragment = target.partition("#")
        if re.match(r"[a-z]+:", target):
            return m.group(0)
        if not path:
            return m.group(0) if anchors is None or fragment in anchors \
                else f"{label} (a section of the repository's README.md)"
        resolved = posixpath.normpath(posixpath.join(folder, path))
        if resolved in names:
            return m.group(0)
        place = ("a notebook not in this build of the book" if re.fullmatch(r"notebooks/\d\d_[\w-]+\.ipynb", resolved)
                 else "in the repository")
        return f"`{resolved}` ({place})" if label.strip("`") in (path, resolved) else f"{label} (`{resolved}`, {place})"

    return LINK.sub(link, text)


def _linked(text: str, names: set[str]) -> str:
    """README text with each backticked path of a page in the book turned into a link to it, then
    :func:`unlinked` (a section after the overview, a file the book does not hold: their text)."""
    def path(m: re.Match) -> str:
        return f"[`{m.group(1)}`]({m.group(1)})" if m.group(1) in names else m.group(0)

    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    text = re.sub(r"`((?:notebooks|docs)/[\w.-]+\.(?:ipynb|md))`", path, text)
    return unlinked(text, "index.md", names, anchors)


def _unlinked_notebook(page: Path, out: Path, names: set[str]) -> None:
    """Copy the notebook ``page`` to ``out`` with :func:`unlinked` applied to its Markdown (cells and outputs)."""
    nb = json.loads(page.read_text())
    where = f"notebooks/{page.name}"
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = unlinked("".join(cell["source"]), where, names)
        for out_ in cell.get("outputs", []):
            if "text/markdown" in out_.get("data", {}):
                out_["data"]["text/markdown"] = unlinked("".join(out_["data"]["text/markdown"]), where, names)
    out.write_text(json.dumps(nb, indent=1))


def landing(readme: str, pages: list[str], prov: str) -> str:
    """The landing page (MyST): the README up to its "Two clients" section (the overview and the notebooks), the
    provenance note, and the book's table of contents (``pages``: source paths without suffix, in order)."""
    overview = readme.split("\n## Two clients", 1)[0]
    names = {p + s for p in pages for s in (".ipynb", ".md")}  # either suffix: the landing page does not know which
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
    pages = [f"notebooks/{page.stem}" for page in notebook_pages] + ["notebooks/glossary", "docs/instructor"]
    names = {f"notebooks/{page.name}" for page in notebook_pages} | {"notebooks/glossary.md", "docs/instructor.md"}
    for page in notebook_pages:
        _unlinked_notebook(page, src / "notebooks" / page.name, names)
    for doc in ("notebooks/glossary.md", "docs/instructor.md"):
        (src / doc).write_text(unlinked(with_note((repo / doc).read_text(), prov), doc, names))
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
