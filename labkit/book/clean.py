"""Turns a recorded run (an executed notebook) into a book page, in place on a copy:

* a provenance note right under the title (:mod:`labkit.book.provenance`; the title cell's other text after it);
* a failed cell shown as failed, never hidden: its error output kept (the traceback) under a line saying the cell
  raised in the book's run (:data:`FAILED_NOTE`), the cell tagged ``labkit-failed`` (framed by the site's CSS) and its
  code left expanded; :func:`failures` names the failed cells, for the build to stop on them;
* stderr streams dropped (warnings; tqdm's progress bars write there);
* each plotly figure (``application/vnd.plotly.v1+json``) rendered to an HTML ``<div>`` that the site's own
  ``plotly.min.js`` draws (live: hover, zoom; no CDN);
* each widget view (``application/vnd.jupyter.widget-view+json``, which a static page cannot draw) replaced by what it
  showed at the end of the run (:mod:`labkit.book.recording`: its figures as static plotly figures, its panel as a
  table), then a note that it is a recording and how to run it live; not from its saved widget state: labkit's live
  figures (``FigureWidget``) are updated by deltas, so the state a notebook saves is their empty first frame; tqdm's
  progress bars dropped;
* an exercise's check that asks for an answer first (the book leaves every exercise unanswered: ``answer = ...``)
  replaced by a line saying the exercise is the reader's, and how to check an answer;
* the cells a notebook collapses (``jupyter.source_hidden``: its claims and assertion cells) tagged ``hide-input``,
  so that the builder collapses their code too and shows their verdict lines;
* test-only cells (:func:`is_test_only`: each statement an ``if`` on ``labkit.under_test()``) tagged ``remove-input``:
  their code (the test run's presses) left out, what they showed kept under a line saying what the run did there;
* every absolute path of the building machine (the repository, ``$HOME``, ``$LABKIT_HOME``, the temp folder) replaced
  by a neutral name.
"""

from __future__ import annotations

import ast
import json
import os
import tempfile
from pathlib import Path

from labkit.book import provenance
from labkit.book.recording import WIDGET
from labkit.learn.exercise import SHOWN

REPO = Path(__file__).resolve().parents[2]
PLOTLY = "application/vnd.plotly.v1+json"
RECORDING_NOTE = ("*A recording: above is what this live widget (a panel, stepper or figure that redraws as the run "
                  "goes and answers clicks) showed at the end of the book's run; a static page cannot run it. To use "
                  "it, run the notebook in the lab: `make lab`.*")
UNRECORDED_NOTE = ("*A live widget (a panel, stepper or figure that redraws as the run goes and answers clicks) was "
                   "here; a static page cannot run it. To use it, run the notebook in the lab: `make lab`.*")
#: How an unanswered exercise's verdict starts (labkit.learn.exercise.Verdict's Markdown).
UNANSWERED = SHOWN["unanswered"]
EXERCISE_NOTE = ("*An exercise for you: the book leaves it unanswered. In the lab (`make lab`), write your answer in "
                 "the cell above, run it, then run this cell: it checks your answer against the run.*")
#: Over a failed cell's error (``{error}``: its name and message), on the page.
FAILED_NOTE = ("✗ **This cell failed in the book's run** ({error}): its error is below, as raised. The run is a "
               "failed run: what this page shows after this cell may lack what the cell would have made.")
#: What a test-only cell's outputs show in place of its code (its ``if labkit.under_test():`` branches).
TEST_ONLY_NOTE = ("*The book's run, like the test run, did here what the cell's `if labkit.under_test():` branch does "
                  "(pressing the control panel's buttons for you); its code is left out. In the lab (`make lab`) "
                  "this cell leaves the playground to you.*")


def is_test_only(source: str) -> bool:
    """True when the code cell ``source`` is a test run's alone: every statement is an ``if`` whose condition calls
    ``labkit.under_test()`` (:mod:`labkit.learn.testmode`); False for code that does not parse, or that also defines or
    runs something for the learner (a ``def`` beside the ``if``)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return bool(body) and all(isinstance(node, ast.If) and any(
        isinstance(call, ast.Call) and ast.unparse(call.func) == "labkit.under_test" for call in ast.walk(node.test))
        for node in body)


def _error_line(out: dict) -> str:
    """An error output's name and the first line of its message (``AssertionError: 3 != 4``)."""
    message = str(out.get("evalue", "")).strip().splitlines()
    return f"{out.get('ename', 'error')}: {message[0][:300]}" if message else str(out.get("ename", "error"))


def failures(nb: dict) -> list[str]:
    """The failed cells of the executed notebook ``nb`` (nbformat 4, as a dict), one line each, in order:
    ``cell <index> (id <cell id>) raised <error name>: <its message's first line>``, the index counted from 0 in the
    notebook as it is (the executed copy has the source's cells)."""
    return [f"cell {i} (id {cell.get('id', '?')}) raised {_error_line(out)}" for i, cell in enumerate(nb["cells"])
            for out in cell.get("outputs", []) if out.get("output_type") == "error"]


def local_paths() -> list[tuple[str, str]]:
    """(absolute path, its neutral name) pairs to scrub, longest first (a path inside another is replaced first)."""
    from labkit.broker.runtime import labkit_home

    pairs = {str(REPO): "labkit", str(labkit_home()): "$LABKIT_HOME", str(Path.home()): "~",
             tempfile.gettempdir(): "<tmp>", os.path.realpath(tempfile.gettempdir()): "<tmp>"}
    return sorted(((p, n) for p, n in pairs.items() if len(p) > 1), key=lambda pn: -len(pn[0]))


def scrub(text: str, pairs: list[tuple[str, str]]) -> str:
    """``text`` with every path of ``pairs`` replaced by its neutral name."""
    for path, name in pairs:
        text = text.replace(path, name)
    return text


def plotly_html(spec: dict, div_id: str) -> str:
    """An HTML ``<div>`` drawing the plotly figure ``spec`` (its JSON) with the page's own plotly.js (not embedded)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure(spec, skip_invalid=True)
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def recorded(parts: list[dict], first_id: int) -> list[dict]:
    """Display outputs (nbformat 4) of a widget's recording ``parts`` (:data:`labkit.book.recording.MIME`), then the
    note: figures drawn as :func:`plotly_html` with ids ``labkit-figure-<first_id>``, ``<first_id + 1>``, ...; texts as
    HTML; rows as a table."""
    out, n = [], first_id
    for part in parts:
        if "figure" in part:
            body = plotly_html(part["figure"], f"labkit-figure-{n}")
            n += 1
        elif "rows" in part:
            body = ('<table class="labkit-recording"><tbody>' + "".join(
                "<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in part["rows"])
                    + "</tbody></table>")
        else:
            body = f'<div class="labkit-recording">{part["html"]}</div>'
        out.append({"output_type": "display_data", "metadata": {}, "data": {"text/html": body}})
    return out + [_markdown(RECORDING_NOTE if parts else UNRECORDED_NOTE)]


def _markdown(text: str) -> dict:
    """A display output (nbformat 4) showing the Markdown ``text``."""
    return {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": text}}


def _is_progress_bar(state: dict, model_id: str) -> bool:
    """True when the saved widget ``model_id`` is a progress bar (tqdm's: a box holding a ``FloatProgress``)."""
    model = state.get(model_id, {}).get("state", {})
    names = [model.get("_model_name", "")] + [
        state.get(c.removeprefix("IPY_MODEL_"), {}).get("state", {}).get("_model_name", "")
        for c in model.get("children", []) if isinstance(c, str)]
    return any(name in ("FloatProgressModel", "IntProgressModel") for name in names)


def page(nb: dict, prov: str) -> dict:
    """The book page of the executed notebook ``nb`` (nbformat 4, as a dict; changed in place and returned)."""
    pairs = local_paths()
    widgets = nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    state = widgets.get("state", {})
    recordings = nb.get("metadata", {}).get("labkit_book", {}).get("recordings", {})
    figures = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        outputs = []
        failed = False
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream" and out.get("name") == "stderr":
                continue
            if kind == "error":
                failed = True
                outputs += [_markdown(FAILED_NOTE.format(error=f"`{_error_line(out)}`")), out]
                continue
            data = out.get("data", {})
            if PLOTLY in data:
                figures += 1
                out["data"] = {"text/html": plotly_html(data[PLOTLY], f"labkit-figure-{figures}")}
            elif WIDGET in data and _is_progress_bar(state, data[WIDGET].get("model_id", "")):
                continue
            elif WIDGET in data:
                parts = recordings.get(data[WIDGET].get("model_id", ""), [])
                outputs += recorded(parts, figures + 1)
                figures += sum("figure" in part for part in parts)
                continue
            elif "".join(data.get("text/markdown", "")).startswith(UNANSWERED):
                out["data"] = {"text/markdown": EXERCISE_NOTE}
            outputs.append(out)
        metadata = cell.setdefault("metadata", {})
        tag = ("labkit-failed" if failed else "remove-input" if is_test_only("".join(cell["source"]))
               else "hide-input" if metadata.get("jupyter", {}).get("source_hidden") else None)
        if tag == "remove-input":
            outputs.insert(0, _markdown(TEST_ONLY_NOTE))
        if tag and tag not in metadata.setdefault("tags", []):
            metadata["tags"].append(tag)
        text = json.dumps(outputs)
        cell["outputs"] = json.loads(scrub(text, pairs)) if any(p in text for p, _ in pairs) else outputs
    nb.get("metadata", {}).pop("widgets", None)
    nb.get("metadata", {}).pop("labkit_book", None)
    note = {"cell_type": "markdown", "id": "labkit-provenance", "metadata": {"tags": ["provenance"]},
            "source": admonition(prov)}
    first = nb["cells"][0] if nb["cells"] else {}
    title, _, rest = "".join(first.get("source", "")).partition("\n")
    if first.get("cell_type") == "markdown" and title.startswith("# "):  # the note right under the title
        first["source"] = title
        nb["cells"][1:1] = [note] + ([{"cell_type": "markdown", "id": "labkit-intro", "metadata": {},
                                       "source": rest.lstrip("\n")}] if rest.strip() else [])
    else:
        nb["cells"].insert(0, note)
    return nb


def admonition(prov: str) -> str:
    """The provenance note (MyST): a note box titled "Where these outputs come from"."""
    return f"```{{admonition}} Where these outputs come from\n:class: note\n{prov}\n```\n"


def write_page(executed: Path, out: Path, v: dict[str, str]) -> None:
    """Read the executed notebook ``executed``, write its page (:func:`page`) to ``out``, with versions ``v``."""
    nb = json.loads(executed.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(page(nb, provenance.line(v)), indent=1))
