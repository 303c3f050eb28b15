"""The instructor's script-free reading of an attendee's notebooks (issue 63), served by the live view
(:mod:`labkit.hub.liveview`: ``notebooks/<name>`` lists them, ``notebooks/<name>/<file>`` shows one).

Why not the attendee's JupyterLab: without subdomains, every page under ``/user/<name>/`` is on the hub's own origin,
and the attendee controls what their server sends (a notebook they signed with their own notebook secret is trusted,
so its outputs' script runs; a labextension; any HTTP server on their port). Such script, in the instructor's browser,
uses the hub's API as the instructor (tests/test_hub_origin.py; docs/hub-decisions.md). So the instructor holds no
``access:servers`` (:data:`labkit.hub.config.INSTRUCTOR_SCOPES`) and reads notebooks here:

* **Read as the attendee**: the live view runs as root, and the attendee controls their files (a notebook can be a
  symbolic link to root's secrets, or a FIFO that never ends): each file is listed and read by ``setpriv`` as their uid
  and gid, with no other group (util-linux), so nothing is read that they could not read themselves; at most
  :data:`MAX_BYTES` bytes (a longer one is refused), within :data:`READ_TIMEOUT_S` seconds (a FIFO is refused then).
* **Script-free**: the page is made here, every text HTML-escaped; outputs show their ``text/plain`` (and PNG images,
  as ``data:`` URLs), never their HTML or JavaScript; and it is served with :data:`CSP` (``sandbox``: the page runs no
  script and has an opaque origin of its own, so even markup slipped through could neither run nor reach the hub's
  cookies).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import pwd
import re
import subprocess
from pathlib import Path
from urllib.parse import quote

#: Largest notebook shown, bytes (the lab's notebooks with their figures are under 2 MiB).
MAX_BYTES = 16 * 1024 * 1024
#: Deadline of one listing or read as the attendee, seconds.
READ_TIMEOUT_S = 10.0
#: A notebook's file name that is shown (no folder, no leading dot or dash).
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,150}\.ipynb$")
#: The pages' Content-Security-Policy: a sandbox without ``allow-scripts`` (no script runs, an opaque origin), nothing
#: loaded but inline styles and ``data:`` images.
CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"
#: ANSI escapes in tracebacks (IPython colours them).
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
STYLE = ("<style>body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#1f2328}pre{white-space:pre-wrap;"
         "margin:4px 0;padding:6px;background:#f6f8fa;border-radius:4px}.out pre{background:#fff;border-left:3px solid "
         "#d0d7de}.md pre{background:#fff8e6}.err pre{border-left-color:#cf222e}small{color:#666}</style>")


class NotShown(Exception):
    """A notebook that cannot be shown: its name, its size, not readable as its owner, not in time, not JSON."""


def work_folder(entry: pwd.struct_passwd) -> Path:
    """The attendee's working folder, where their lab's notebooks are (``~/labkit/work``:
    :func:`labkit.lab.workspace.work_dir` of their ``LABKIT_HOME``)."""
    return Path(entry.pw_dir) / "labkit" / "work"


def _as_owner(entry: pwd.struct_passwd, argv: list[str]) -> bytes:
    """``argv``'s standard output, run as ``entry``'s uid and gid with no other group.

    Raises:
        NotShown: it failed (e.g. permission denied: its message) or outlived :data:`READ_TIMEOUT_S`.
    """
    try:
        done = subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                               "--no-new-privs", "--", *argv], capture_output=True, timeout=READ_TIMEOUT_S,
                              env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, cwd="/")
    except subprocess.TimeoutExpired:
        raise NotShown(f"not read within {READ_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        raise NotShown(done.stderr.decode(errors="replace").strip()[-300:] or f"exit status {done.returncode}")
    return done.stdout


def notebooks(entry: pwd.struct_passwd) -> list[str]:
    """The notebooks (regular files named as :data:`FILE_NAME`) in the attendee's working folder, listed as them,
    sorted.

    Raises:
        NotShown: the folder could not be listed as them.
    """
    out = _as_owner(entry, ["find", str(work_folder(entry)), "-mindepth", "1", "-maxdepth", "1", "-type", "f",
                            "-name", "*.ipynb", "-printf", "%f\\0"])
    return sorted(n for n in out.decode(errors="replace").split("\0") if FILE_NAME.match(n))


def read(entry: pwd.struct_passwd, name: str) -> dict:
    """The notebook ``name`` of the attendee's working folder, read as them (at most :data:`MAX_BYTES` bytes) and
    parsed as JSON.

    Raises:
        NotShown: a name not of :data:`FILE_NAME`, unreadable as them, larger than :data:`MAX_BYTES`, not JSON.
    """
    if not FILE_NAME.match(name):
        raise NotShown("not a notebook's name")
    raw = _as_owner(entry, ["head", "-c", str(MAX_BYTES + 1), "--", str(work_folder(entry) / name)])
    if len(raw) > MAX_BYTES:
        raise NotShown(f"larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        notebook = json.loads(raw)
    except ValueError as exc:
        raise NotShown(f"not a notebook (JSON: {exc})") from None
    if not isinstance(notebook, dict):
        raise NotShown("not a notebook")
    return notebook


def _text(value) -> str:
    """A notebook text field (a string, or nbformat's list of lines) as one string; anything else as ""."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _pre(text: str) -> str:
    return f"<pre>{html.escape(ANSI.sub('', text))}</pre>"


def _output_html(output) -> str:
    """One output: its text (stream, ``text/plain``, an error's traceback) escaped, a PNG as a ``data:`` image, and
    the names of the kinds not shown."""
    if not isinstance(output, dict):
        return ""
    kind = output.get("output_type")
    if kind == "stream":
        return _pre(_text(output.get("text")))
    if kind == "error":
        lines = output.get("traceback") if isinstance(output.get("traceback"), list) else []
        trace = "\n".join(_text(line) for line in lines)
        return '<div class="err">' + _pre(trace or f"{_text(output.get('ename'))}: {_text(output.get('evalue'))}") + \
            "</div>"
    data = output.get("data") if isinstance(output.get("data"), dict) else {}
    shown, parts = set(), []
    png = _text(data.get("image/png")).replace("\n", "")
    if png:
        try:
            base64.b64decode(png, validate=True)
            parts.append(f'<img alt="figure" src="data:image/png;base64,{png}">')
            shown.add("image/png")
        except (binascii.Error, ValueError):
            pass
    if "text/plain" in data and "image/png" not in shown:
        parts.append(_pre(_text(data["text/plain"])))
        shown.add("text/plain")
    left = sorted(k for k in data if k not in shown and isinstance(k, str))
    if left:
        parts.append(f"<small>not shown here: {html.escape(', '.join(left))}</small>")
    return "".join(parts)


def page_html(owner: str, name: str, notebook: dict) -> str:
    """The page showing ``notebook`` (nbformat 4 as JSON), file ``name`` of attendee ``owner``: each cell's source and
    its outputs (:func:`_output_html`), every text escaped; serve it with :data:`CSP`."""
    cells = notebook.get("cells") if isinstance(notebook.get("cells"), list) else []
    body = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = _pre(_text(cell.get("source")))
        if cell.get("cell_type") == "code":
            count = cell.get("execution_count")
            outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
            label = f"[{count}]" if isinstance(count, int) else "[ ]"
            shown = "".join(_output_html(o) for o in outputs)
            body.append(f'<section><small>{label}</small>{source}<div class="out">{shown}</div></section>')
        else:
            body.append(f'<section class="md">{source}</section>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(owner)}: '
            f'{html.escape(name)}</title>{STYLE}</head><body><p><a href="../{quote(owner)}">{html.escape(owner)}'
            f"'s notebooks</a> · read-only, as saved (their unsaved edits are not here), no script runs</p>"
            f'<h1>{html.escape(name)}</h1>{"".join(body) or "<p>No cells.</p>"}</body></html>')


def listing_html(owner: str, names: list[str]) -> str:
    """The page listing attendee ``owner``'s notebooks (``names``), each a link to its page; serve it with
    :data:`CSP`."""
    items = "".join(f'<li><a href="{quote(owner)}/{quote(n)}">{html.escape(n)}</a></li>' for n in names)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(owner)}\'s notebooks'
            f'</title>{STYLE}</head><body><h1>{html.escape(owner)}\'s notebooks</h1><p>As last saved in their working '
            f'folder, read-only; no script runs.</p><ul>{items or "<li>none yet</li>"}</ul></body></html>')
