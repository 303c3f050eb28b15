"""The learner's working copies of the notebooks (made once, never overwritten, a newer repository file put beside
them, no widget state) and the lab's Jupyter server configuration (idle kernels culled)."""

import json
import os
import re
import subprocess
import sys
import urllib.request

import pytest
from traitlets.utils.importstring import import_item

from labkit.core.waiting import wait_until
from labkit.lab import workspace
from labkit.lab.workspace import CULL_IDLE_TIMEOUT_S, MANIFEST, SOURCES, WIDGET_STATE, WIDGET_VIEW, make_copies
from labkit_dev import browser

NOTE = "ControlPanel: a live widget, not saved with the notebook; run this cell again to see it"
LINK = re.compile(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)")  # a relative Markdown link's target


def notebook(text: str, outputs: list | None = None, metadata: dict | None = None) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {},
            "cells": [{"id": "a", "cell_type": "markdown", "metadata": {}, "source": text},
                      {"id": "b", "cell_type": "code", "metadata": {}, "source": "1", "execution_count": None,
                       "outputs": outputs or []}]}


def view(model_id: str) -> dict:
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/plain": "ControlPanel()",
                     WIDGET_VIEW: {"model_id": model_id, "version_major": 2, "version_minor": 0}}}


@pytest.fixture
def sources(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    (folder / "00_a.ipynb").write_text(json.dumps(notebook("see [b](01_b.ipynb) and [terms](glossary.md)")))
    (folder / "01_b.ipynb").write_text(json.dumps(notebook("back to [a](00_a.ipynb)")))
    (folder / "glossary.md").write_text("# Glossary\n")
    return folder


def test_copies_are_made_once_and_a_learners_copy_is_never_overwritten(sources, tmp_path):
    work = tmp_path / "work"
    notes = make_copies(work, sources)
    assert sorted(p.name for p in work.iterdir()) == [MANIFEST, "00_a.ipynb", "01_b.ipynb", "glossary.md"]
    assert notes == ["made your copies of 00_a.ipynb, 01_b.ipynb, glossary.md"]
    assert json.loads((work / "00_a.ipynb").read_text()) == json.loads((sources / "00_a.ipynb").read_text())
    mine = json.dumps(notebook("my answers"))
    (work / "00_a.ipynb").write_text(mine)  # the learner's work (JupyterLab's autosave)
    assert make_copies(work, sources) == []  # nothing new in the repository: nothing made, nothing said
    assert (work / "00_a.ipynb").read_text() == mine


def test_a_newer_repository_notebook_goes_beside_the_learners_copy(sources, tmp_path):
    work = tmp_path / "work"
    make_copies(work, sources)
    mine = json.dumps(notebook("my answers"))
    (work / "00_a.ipynb").write_text(mine)
    (sources / "00_a.ipynb").write_text(json.dumps(notebook("corrected text")))
    notes = make_copies(work, sources)
    assert (work / "00_a.ipynb").read_text() == mine
    assert "corrected text" in (work / "00_a (new).ipynb").read_text()
    assert notes == ["00_a.ipynb: the repository has a newer version; yours is untouched and the new one is beside "
                     "it: 00_a (new).ipynb"]
    assert make_copies(work, sources) == notes  # said again at every start, but no second copy of the same version
    assert sorted(p.name for p in work.glob("00_a*")) == ["00_a (new).ipynb", "00_a.ipynb"]
    (sources / "00_a.ipynb").write_text(json.dumps(notebook("corrected again")))  # the "(new)" copy, unchanged,
    assert make_copies(work, sources) == notes  # follows the repository
    assert "corrected again" in (work / "00_a (new).ipynb").read_text()
    (work / "00_a (new).ipynb").write_text(json.dumps(notebook("my answers on the new one")))
    (sources / "00_a.ipynb").write_text(json.dumps(notebook("corrected twice")))
    assert make_copies(work, sources)[0].endswith("beside it: 00_a (new 2).ipynb")
    assert "my answers on the new one" in (work / "00_a (new).ipynb").read_text()
    assert "corrected twice" in (work / "00_a (new 2).ipynb").read_text()


def test_the_content_hash_decides_not_the_mtime(sources, tmp_path):
    work = tmp_path / "work"
    make_copies(work, sources)
    (work / "00_a.ipynb").write_text(json.dumps(notebook("my answers")))
    (sources / "00_a.ipynb").touch()  # a checkout that rewrites the same bytes: not newer
    assert make_copies(work, sources) == []


def test_an_untouched_copy_is_updated_and_a_deleted_one_made_again(sources, tmp_path):
    work = tmp_path / "work"
    make_copies(work, sources)
    (sources / "glossary.md").write_text("# Glossary\n\nLSO: ...\n")
    assert make_copies(work, sources) == [
        "glossary.md: updated to the repository's new version (your copy was unchanged)"]
    assert (work / "glossary.md").read_text().endswith("LSO: ...\n") and not list(work.glob("glossary (new)*"))
    (work / "01_b.ipynb").unlink()  # a learner's way to start a notebook afresh
    assert make_copies(work, sources) == ["made your copies of 01_b.ipynb"]


def test_copies_carry_no_widget_state(sources, tmp_path):
    state = {WIDGET_STATE: {"state": {"m1": {"model_name": "VBoxModel"}}, "version_major": 2, "version_minor": 0}}
    (sources / "02_c.ipynb").write_text(json.dumps(notebook("c", [view("m1"), view("m2")], {"widgets": state})))
    work = tmp_path / "work"
    make_copies(work, sources)
    copy = json.loads((work / "02_c.ipynb").read_text())
    assert "widgets" not in copy["metadata"]
    assert copy["cells"][1]["outputs"] == [
        {"output_type": "display_data", "metadata": {}, "data": {"text/plain": NOTE}}] * 2


def test_the_repositorys_notebooks_copy_with_their_links_and_without_widget_state(tmp_path):
    work = tmp_path / "work"
    make_copies(work, SOURCES)
    copies = sorted(work.glob("*.ipynb"))
    assert [p.name for p in copies] == sorted(p.name for p in SOURCES.glob("*.ipynb"))
    assert (work / "glossary.md").exists()
    for path in copies:
        nb = json.loads(path.read_text())
        assert "widgets" not in nb["metadata"], path.name
        assert not [o for c in nb["cells"] for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})], path.name
        targets = {t for c in nb["cells"] if c["cell_type"] == "markdown" for t in LINK.findall("".join(c["source"]))}
        assert all((work / t).exists() for t in targets), (path.name, targets)


def test_the_pre_save_hook_drops_only_views_whose_model_is_not_saved():
    state = {WIDGET_STATE: {"state": {"m1": {"model_name": "VBoxModel"}}}}
    nb = notebook("c", [view("m1"), view("m2"), {"output_type": "stream", "name": "stdout", "text": "hi"}],
                  {"widgets": state})
    workspace.strip_orphan_widget_views({"type": "notebook", "content": nb}, "c.ipynb")
    outputs = nb["cells"][1]["outputs"]
    assert WIDGET_VIEW in outputs[0]["data"] and WIDGET_VIEW not in outputs[1]["data"]
    assert outputs[1]["data"] == {"text/plain": NOTE} and outputs[2]["text"] == "hi"
    assert outputs[0]["data"]["text/plain"] == "ControlPanel()"  # a saved view keeps its text form
    assert nb["metadata"]["widgets"] == state
    text = {"type": "file", "content": "x"}
    workspace.strip_orphan_widget_views(text, "x.txt")
    assert text == {"type": "file", "content": "x"}


def test_the_server_config_serves_the_copies_and_culls_idle_kernels(tmp_path):
    config = json.loads(workspace.write_server_config(tmp_path).read_text())
    assert config["ServerApp"]["root_dir"] == str(tmp_path / "work")
    assert config["MappingKernelManager"] == {"cull_idle_timeout": CULL_IDLE_TIMEOUT_S, "cull_interval": 60,
                                              "cull_connected": True, "cull_busy": False}
    assert 0 < CULL_IDLE_TIMEOUT_S <= 3600
    assert import_item(config["FileContentsManager"]["pre_save_hook"]) is workspace.strip_orphan_widget_views


def test_a_server_on_the_lab_s_config_looks_for_no_language_server(tmp_path):
    """A real Jupyter server started on the lab's configuration answers jupyter-lsp's status with no language server
    spec: it made no search (the default's search lists six specs here, and runs ``npm prefix -g``)."""
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    config = workspace.write_server_config(home)
    env = {**os.environ, **{name: str(tmp_path / name.lower()) for name in browser.JUPYTER_DIRS}}
    log = tmp_path / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "jupyter_server", f"--config={config}", "--no-browser",
                                   "--allow-root", "--port=0", "--IdentityProvider.token=t"],
                                  stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        def status() -> dict | None:  # once the server's log names its URL and it answers there
            if not re.search(r"http://127\.0\.0\.1:\d+/", log.read_text()):
                return None
            found = re.search(r"http://127\.0\.0\.1:\d+/", log.read_text())
            try:
                with urllib.request.urlopen(f"{found.group(0)}lsp/status?token=t", timeout=30) as answer:
                    return json.load(answer)
            except OSError:  # not listening yet
                return None
        assert wait_until(status, 120, 0.5), log.read_text()[-2000:]
        answered = status()
    finally:
        server.terminate()
        server.wait(30)
    assert answered["specs"] == {} and answered["sessions"] == {}, answered


def test_lab_settings_keep_other_overrides(tmp_path):
    from labkit.lab.workspace import LAB_PAGE_CONFIG, LAB_SETTINGS, write_lab_settings

    settings = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({
        "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
        "@jupyterlab/apputils-extension:notification": {"doNotDisturbMode": True, "fetchNews": "true"}}))
    page = tmp_path / "etc" / "jupyter" / "labconfig" / "page_config.json"
    page.parent.mkdir(parents=True)
    page.write_text(json.dumps({"disabledExtensions": {"x": True}, "buildCheck": True}))
    assert write_lab_settings(tmp_path) == [settings, page]
    written = json.loads(settings.read_text())
    assert written["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert written["@jupyterlab/apputils-extension:notification"] == {
        "doNotDisturbMode": True, **LAB_SETTINGS["@jupyterlab/apputils-extension:notification"]}
    assert json.loads(page.read_text()) == {"disabledExtensions": {"x": True}, **LAB_PAGE_CONFIG}


def test_a_dropped_figure_widget_view_leaves_one_line_not_its_figure_as_text():
    """A LiveTimeline's FigureWidget prints its whole figure as its plain-text form: a reopened notebook showed
    thousands of lines of it where the timeline was."""
    dump = "FigureWidget({\n    'data': [],\n    'layout': {'height': 320" + ", 'x': 1" * 2000 + "}\n})"
    nb = notebook("c", [{"output_type": "display_data", "metadata": {},
                         "data": {WIDGET_VIEW: {"model_id": "m9"}, "text/plain": dump}}])
    workspace.strip_orphan_widget_views({"type": "notebook", "content": nb}, "c.ipynb")
    assert nb["cells"][1]["outputs"][0]["data"] == {
        "text/plain": "FigureWidget: a live widget, not saved with the notebook; run this cell again to see it"}
    assert workspace.unsaved_widget_note(["no class here"]).startswith("A widget: a live widget")
