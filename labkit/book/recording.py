"""What each live widget showed at the end of a book run, recorded in the kernel that ran it.

A static page cannot draw a widget, and the widget state a notebook saves is no help for labkit's live figures: a
``go.FigureWidget`` is redrawn by messages carrying changes, so the saved state is its empty first frame. So, after a
notebook's last cell, the book runs one more cell in the same kernel (:mod:`labkit.book.execute`, source
:func:`source`): :func:`show` looks up each widget the notebook displayed by its model id (ipywidgets'
``widget_serialization``, the lookup a front end's ``IPY_MODEL_<id>`` reference goes through) and displays, under
:data:`MIME`, what it shows now: each figure inside it as plotly JSON (the Python side of a ``FigureWidget`` holds its
current data and layout), and its text (HTML and Label widgets) as HTML, a box of texts in a row (a
:class:`~labkit.crashlab.panel.ControlPanel`'s participant) as one row of a table. Buttons and selectors are controls,
not content, and are left out. The book keeps the result in the executed notebook's metadata (:func:`read`) and
:mod:`labkit.book.clean` draws it where the widget was. No notebook and no widget class changes for this: any widget
a notebook displays is recorded.
"""

from __future__ import annotations

import html
import json

#: The MIME type of the recording cell's output: ``{model_id: [part, ...]}``, each part ``{"figure": plotly JSON}``,
#: ``{"html": text}`` or ``{"rows": [[html, ...], ...]}`` (a table).
MIME = "application/vnd.labkit.recording+json"
#: The cell id of the recording cell the book appends (and removes after the run).
CELL_ID = "labkit-book-recording"
WIDGET = "application/vnd.jupyter.widget-view+json"


def displayed(cells: list[dict]) -> list[str]:
    """The model ids of the widgets the notebook's ``cells`` (nbformat 4 dicts) displayed, in order, once each."""
    ids = [out["data"][WIDGET].get("model_id") for cell in cells for out in cell.get("outputs", [])
           if WIDGET in out.get("data", {})]
    return list(dict.fromkeys(i for i in ids if i))


def source(model_ids: list[str]) -> str:
    """The recording cell's code: :func:`show` of ``model_ids``."""
    return f"from labkit.book import recording as _labkit_recording\n_labkit_recording.show({model_ids!r})\n"


def parts(widget) -> list[dict]:
    """What ``widget`` (an ipywidgets widget or a plotly ``FigureWidget``) shows now, in display order: figures as
    plotly JSON, texts as HTML, rows of texts as a table (see :data:`MIME`)."""
    import ipywidgets as widgets
    import plotly.io as pio
    from plotly.basewidget import BaseFigureWidget

    if isinstance(widget, BaseFigureWidget):
        return [{"figure": json.loads(pio.to_json(widget, validate=False))}]
    if isinstance(widget, widgets.HTML):
        return [{"html": widget.value}] if widget.value.strip() else []
    if isinstance(widget, (widgets.Label, widgets.HTMLMath)):
        return [{"html": html.escape(widget.value)}] if widget.value.strip() else []
    if not isinstance(widget, widgets.Box):
        return []  # a control (button, selector): nothing it shows is the run's
    inner = [p for child in widget.children for p in parts(child)]
    if isinstance(widget, widgets.HBox) and inner and all("html" in p for p in inner):
        return [{"rows": [[p["html"] for p in inner]]}]
    merged: list[dict] = []  # consecutive rows (a VBox of panels) make one table
    for p in inner:
        if "rows" in p and merged and "rows" in merged[-1]:
            merged[-1]["rows"] += p["rows"]
        else:
            merged.append(p)
    return merged


def show(model_ids: list[str]) -> None:
    """Display (in the kernel, under :data:`MIME`) what each widget of ``model_ids`` shows now; a widget no longer
    alive (closed) is left out."""
    from IPython.display import display
    from ipywidgets import widget_serialization

    found = {}
    for model_id in model_ids:
        widget = widget_serialization["from_json"](f"IPY_MODEL_{model_id}", None)
        if not isinstance(widget, str):  # an unknown id comes back as the string itself
            found[model_id] = parts(widget)
    display({MIME: found}, raw=True)


def read(outputs: list[dict]) -> dict[str, list[dict]]:
    """The recordings in the recording cell's ``outputs``: ``{model_id: [part, ...]}``.

    Raises:
        RuntimeError: the recording cell raised (its error quoted) or displayed nothing.
    """
    for out in outputs:
        if out.get("output_type") == "error":
            raise RuntimeError(f"recording the live widgets failed: {out.get('ename')}: {out.get('evalue')}")
        if MIME in out.get("data", {}):
            return out["data"][MIME]
    raise RuntimeError(f"the recording cell displayed no {MIME} output: {outputs!r:.500}")
