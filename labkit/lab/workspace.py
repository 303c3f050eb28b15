"""Make the learner's working copies of the notebooks and JupyterLab's settings.

``make lab`` serves **copies**, never the repository's tracked ``notebooks/``: JupyterLab marks a notebook modified
when it opens it and autosaves it, which used to write into the tracked files (a workshop's ``git pull`` then
conflicted) and left widget views whose models were never saved (reopened: "widget model not found").

* :func:`make_copies` makes the copies of ``notebooks/*.ipynb`` and ``notebooks/*.md`` (the glossary) in one folder,
  ``$LABKIT_HOME/work/`` for the lab (:func:`work_dir`): outside the repository, so no ``git pull``, ``checkout`` or
  ``clean`` touches a learner's work, and one per ``LABKIT_HOME``, so each attendee of a shared machine (or each test)
  has their own. The copies keep the notebooks' names in one folder, so the links between notebooks and to
  ``glossary.md`` work from them; the kernels import the installed ``labkit`` package, whatever their folder. A copy
  is made once and never overwritten. The SHA-256 of the source each copy was made from is kept in
  ``<folder>/.labkit-copies.json``; when the repository's file changes (its content hash, not its mtime), a fresh
  copy goes beside the learner's (``02_zombie_fencing (new).ipynb``) and a message says so. One exception, which loses
  nothing: a copy whose bytes are still exactly what was written (never opened, never saved) is simply replaced. A
  copy the learner deleted is made again from the current source.
* :func:`write_server_config` writes the Jupyter server's configuration for a home folder (its copies' folder as root,
  idle kernels culled after :data:`CULL_IDLE_TIMEOUT_S`, :func:`strip_orphan_widget_views` before every save);
  :func:`write_lab_settings` writes JupyterLab's ``overrides.json`` and ``page_config.json``. A JupyterHub set-up can
  call both (and :func:`make_copies`) per attendee, as :mod:`labkit.lab.server` does for ``make lab``.

Copies carry no widget state: the repository's notebooks hold no outputs and no ``widgets`` metadata today, and
:func:`strip_widget_state` removes both from every copy should they ever gain some. After that, every save drops the
views whose model is not saved in the notebook (JupyterLab saves none): a notebook reopened shows one line in its place
("ControlPanel: a live widget, not saved with the notebook; run this cell again to see it"), never an error and never
the widget's text form (a ``FigureWidget``'s is its whole figure as text); running its cell again brings it back.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import sys
from pathlib import Path

from labkit.broker.runtime import labkit_home

REPO = Path(__file__).resolve().parents[2]
#: The repository's notebooks and glossary: the sources of the copies.
SOURCES = REPO / "notebooks"
#: What is copied from :data:`SOURCES` (top level only).
COPIED_SUFFIXES = (".ipynb", ".md")
#: The record of each copy's source hash, in the copies' folder (hidden from JupyterLab's file browser).
MANIFEST = ".labkit-copies.json"

#: Seconds without kernel activity (no execution, no output, no widget message) after which the lab's Jupyter server
#: shuts a kernel down, even with a browser tab connected to it: each kernel holds 200-250 MiB, and every tab
#: JupyterLab restores starts one. A busy kernel (a cell running) is never culled.
CULL_IDLE_TIMEOUT_S = 30 * 60
#: Seconds between two of the server's checks for idle kernels.
CULL_INTERVAL_S = 60

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

#: Settings the lab's JupyterLab starts with (JupyterLab's ``overrides.json``, keyed by plugin): it never asks about
#: "official Jupyter news" (that prompt covers the lower right of every notebook), never looks for a newer
#: JupyterLab (the lab pins its version; the check needs the news feed anyway), starts a notebook's own kernel
#: (``python3``, its ``kernelspec``) without a "Select Kernel" dialog (``autoStartDefaultKernel``, JupyterLab 4's
#: notebook tracker), and refuses a run asked for while that kernel starts, saying so ("Kernel ... is still
#: initializing", ``enableKernelInitNotification``): without it, a Run All in the first seconds after a notebook opens
#: (before JupyterLab has asked for its kernel; the toolbar already says idle) starts a kernel of its own, JupyterLab
#: then starts another and shuts the first down, and the cells the first took are lost with no error shown (JupyterLab
#: 4.6's ``SessionContext.startKernel`` and cell executor; seen on a loaded hub, reproduced in tests/test_drive.py).
#: Before each save JupyterLab compares the file's time on disk with the one it last saved, and asks "File Changed:
#: overwrite or revert?" when they differ by more than ``lastModifiedCheckMargin`` (500 ms by default): a save whose
#: PUT takes longer than that, as on a loaded server, brings the dialog with nobody else writing (jupyterlab issues
#: 7743 and 8556; seen once over the Kernel menu in the room rehearsal, bench/room.py). 15 s: only the attendee writes
#: their working copy, and a change made later than that is still flagged. A learner can still change each.
LAB_SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
                "@jupyterlab/notebook-extension:tracker": {"autoStartDefaultKernel": True,
                                                           "enableKernelInitNotification": True},
                "@jupyterlab/docmanager-extension:plugin": {"lastModifiedCheckMargin": 15000}}
#: JupyterLab's page configuration the lab's JupyterLab starts with (``labconfig/page_config.json``, read by
#: ``jupyterlab.labapp`` through ``get_static_page_config``): no build check. Each page load otherwise asks the server
#: whether extensions need a rebuild, and the server runs ``node yarn.js config`` to answer (1-2 s of CPU, 40-67 MiB
#: for its life, seen on the hub); the lab installs no extension to build, so the answer is always no.
LAB_PAGE_CONFIG = {"buildAvailable": False, "buildCheck": False}


def work_dir(home: Path | None = None) -> Path:
    """``<home>/work``: the learner's copies (``home`` defaults to ``$LABKIT_HOME``, else ``~/.cache/labkit``)."""
    return (home or labkit_home()) / "work"


def strip_widget_state(nb: dict, keep_saved: bool = False) -> bool:
    """Remove widget state from notebook ``nb`` (nbformat 4, as JSON, changed in place): the ``widgets`` metadata and
    every widget view output (an output left with no other representation is dropped). With ``keep_saved``, the
    metadata stays and only the views whose model it does not hold go (those JupyterLab reopens as "model not
    found"). A dropped view's plain-text form becomes :func:`unsaved_widget_note`. Returns whether anything was
    removed."""
    saved = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {}) if keep_saved else {}
    changed = False
    if not keep_saved and "widgets" in nb.get("metadata", {}):
        del nb["metadata"]["widgets"]
        changed = True
    for cell in nb.get("cells", []):
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and data[WIDGET_VIEW].get("model_id") not in saved:
                del data[WIDGET_VIEW]
                changed = True
                if not data:
                    continue
                if "text/plain" in data:
                    data["text/plain"] = unsaved_widget_note(data["text/plain"])
            kept.append(output)
        if "outputs" in cell:
            cell["outputs"] = kept
    return changed


def unsaved_widget_note(text: str | list[str]) -> str:
    """What a widget output whose view is dropped shows instead of its plain-text form (``text``, e.g. a
    ``FigureWidget``'s repr: its whole figure as text, thousands of lines): its class and how to bring it back."""
    text = "".join(text) if isinstance(text, list) else text
    name = re.match(r"[A-Za-z_][\w.]*(?=\()", text)
    return f"{name.group(0) if name else 'A widget'}: a live widget, not saved with the notebook; run this cell again to see it"


def strip_orphan_widget_views(model: dict, path: str, contents_manager=None, **_) -> None:
    """The Jupyter server's ``FileContentsManager.pre_save_hook``: before a notebook is written, remove the widget view
    outputs whose model the notebook does not save (:func:`strip_widget_state` with ``keep_saved``), so that a learner's
    copy reopens without "widget model not found" errors (the view's plain-text form stays). Anything else passes."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        strip_widget_state(model["content"], keep_saved=True)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _copy_bytes(source: Path) -> bytes:
    """What a copy of ``source`` holds: a notebook without widget state (:func:`strip_widget_state`), anything else
    as is."""
    data = source.read_bytes()
    if source.suffix != ".ipynb":
        return data
    nb = json.loads(data)
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode() if strip_widget_state(nb) else data


def _beside_name(source: Path, work: Path) -> str:
    """The first free name of ``<stem> (new)<suffix>``, ``<stem> (new 2)<suffix>``, ... in ``work``."""
    n = 1
    while True:
        name = f"{source.stem} (new{'' if n == 1 else f' {n}'}){source.suffix}"
        if not (work / name).exists():
            return name
        n += 1


def make_copies(work: Path | None = None, sources: Path = SOURCES) -> list[str]:
    """Make or refresh the working copies of ``sources`` (``*.ipynb``, ``*.md``) in ``work`` (default
    :func:`work_dir`), as the module docstring says; never overwrite a copy the learner changed. Returns one line per
    thing a learner should read (copies made, a newer repository file put beside theirs), empty when nothing changed.

    Raises:
        OSError: ``work`` cannot be created or written, or a source cannot be read.
        ValueError: a source notebook is not JSON.
    """
    work = work or work_dir()
    work.mkdir(parents=True, exist_ok=True)
    manifest_path = work / MANIFEST
    try:
        copies = json.loads(manifest_path.read_text())["copies"]
    except (OSError, ValueError, KeyError, TypeError):
        copies = {}
    copies = {name: record for name, record in copies.items() if (work / name).exists()}
    made, notes = [], []
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")

    def write(name: str, source: Path, source_hash: str, data: bytes) -> None:
        partial = work / f".{name}.partial"
        partial.write_bytes(data)
        partial.rename(work / name)
        copies[name] = {"source": source.name, "source_sha256": source_hash, "copy_sha256": _sha256(data), "made": now}

    for source in sorted(p for p in sources.iterdir() if p.suffix in COPIED_SUFFIXES and p.is_file()):
        source_hash, data = _sha256(source.read_bytes()), _copy_bytes(source)
        mine, record = work / source.name, copies.get(source.name)
        if not mine.exists():
            write(source.name, source, source_hash, data)
            made.append(source.name)
            continue
        copy_hash = _sha256(mine.read_bytes())
        if record is None and copy_hash == _sha256(data):  # the same as a fresh copy (a lost record): adopt it
            copies[source.name] = {"source": source.name, "source_sha256": source_hash, "copy_sha256": copy_hash,
                                   "made": now}
            continue
        if record is not None and record["source_sha256"] == source_hash:
            continue
        if record is not None and record["copy_sha256"] == copy_hash:  # never changed by the learner: nothing to lose
            write(source.name, source, source_hash, data)
            notes.append(f"{source.name}: updated to the repository's new version (your copy was unchanged)")
            continue
        others = {name: r for name, r in copies.items() if name != source.name and r["source"] == source.name}
        beside = next((name for name, r in others.items() if r["source_sha256"] == source_hash), None)
        if beside is None:  # an older "(new)" copy nobody changed is replaced rather than joined by a "(new 2)"
            untouched = [name for name, r in others.items() if r["copy_sha256"] == _sha256((work / name).read_bytes())]
            beside = untouched[0] if untouched else _beside_name(source, work)
            write(beside, source, source_hash, data)
        notes.append(f"{source.name}: the repository has a newer version; yours is untouched and the new one is "
                     f"beside it: {beside}")
    partial = work / f"{MANIFEST}.partial"
    partial.write_text(json.dumps({"copies": copies}, indent=1, sort_keys=True) + "\n")
    partial.rename(manifest_path)
    if made:
        what = ", ".join(made) if len(made) <= 3 else f"{len(made)} files ({made[0]} to {made[-1]})"
        notes.insert(0, f"made your copies of {what}")
    return notes


def server_config(home: Path | None = None) -> dict:
    """The Jupyter server configuration of the lab for ``home`` (default ``$LABKIT_HOME``): the copies' folder
    (:func:`work_dir`) as its root, idle kernels culled (:data:`CULL_IDLE_TIMEOUT_S`, :data:`CULL_INTERVAL_S`, also
    while a browser tab is connected), :func:`strip_orphan_widget_views` run before every save, and no search for
    language servers (jupyter-lsp's ``LanguageServerManager.autodetect``: the lab uses none, and the search runs
    ``npm prefix -g``, a Node process, in every server: each attendee's on a hub)."""
    return {
        "ServerApp": {"root_dir": str(work_dir(home))},
        "LanguageServerManager": {"autodetect": False},
        "MappingKernelManager": {"cull_idle_timeout": CULL_IDLE_TIMEOUT_S, "cull_interval": CULL_INTERVAL_S,
                                 "cull_connected": True, "cull_busy": False},
        "FileContentsManager": {"pre_save_hook": f"{__name__}.strip_orphan_widget_views"},
    }


def write_server_config(home: Path | None = None) -> Path:
    """Write :func:`server_config` for ``home`` to ``<home>/lab/jupyter_server_config.json`` (what ``jupyter lab
    --config=<file>`` reads; the server then reads no ``jupyter_server_config`` of the user's own) and return its path.

    Raises:
        OSError: the folder cannot be created or the file written.
    """
    path = (home or labkit_home()) / "lab" / "jupyter_server_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(server_config(home), indent=2) + "\n")
    return path


def write_lab_settings(prefix: Path | None = None) -> list[Path]:
    """Merge :data:`LAB_SETTINGS` into the ``overrides.json`` of JupyterLab's application settings folder
    (``<prefix>/share/jupyter/lab/settings``) and :data:`LAB_PAGE_CONFIG` into ``<prefix>/etc/jupyter/labconfig/
    page_config.json``, keeping anything else found in either. ``prefix``: the environment whose JupyterLab reads them
    (default ``sys.prefix``, the lab's own virtual environment: no other JupyterLab is touched). Returns both paths.

    Raises:
        OSError: a file cannot be written. ValueError: an existing file is not JSON.
    """
    prefix = prefix or Path(sys.prefix)
    written = []
    for path, wanted in [(prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json", LAB_SETTINGS),
                         (prefix / "etc" / "jupyter" / "labconfig" / "page_config.json", LAB_PAGE_CONFIG)]:
        current = json.loads(path.read_text()) if path.exists() else {}
        for key, value in wanted.items():
            current[key] = {**current.get(key, {}), **value} if isinstance(value, dict) else value
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(current, indent=2) + "\n")
        written.append(path)
    return written
