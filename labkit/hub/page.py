"""What the instructor's live view (:mod:`labkit.hub.liveview`) shows: its page and its table (HTML), one row per
attendee, from the hub's user models, each attendee's broker status, their lab's memory against its limit and their
marks (:class:`labkit.hub.verdicts.Mark`): their kernels, each busy (since when; "stuck?" past :data:`STUCK_S`), idle or
ended by a cell that raised (a failed run), as each kernel reported it (:mod:`labkit.hub.report`); per notebook, the
exercise check's state (unanswered, wrong, right, error), the notebook's claims mark (held, failed, error:
:class:`labkit.learn.claims.Run`) and a participant seen stalled, each in a badge of its own; below, the room's
predictions (:func:`predictions_html`: per notebook, how many locked one in before the run and how many chose each
choice, in the words the learners chose from, names hidden). Stdlib only (no JupyterHub), so it is tested in the
project's venv.
"""

from __future__ import annotations

import html
import json
import string
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from labkit.hub.config import is_instructor
from labkit.hub.verdicts import NOTEBOOKS
from labkit.lab.workspace import SOURCES
from labkit.learn.claims import CLAIMS_CALL
from labkit.learn.marks import CHOICES, KERNEL, PARTICIPANT, PREDICTION


def notebook_titles(sources: Path = SOURCES) -> dict[str, tuple[str, bool]]:
    """``{"00": ("tour", has a claims cell)}`` for the notebooks in ``sources``, from their file names and sources."""
    titles = {}
    for path in sorted(sources.glob("[0-9][0-9]_*.ipynb")):
        words = path.stem[3:].replace("_", " ")
        titles[path.stem[:2]] = (words, CLAIMS_CALL in path.read_text(errors="replace"))
    return titles


#: A kernel busy for longer than this (seconds) is flagged "stuck?": three minutes. Eight notebooks run whole (Run All)
#: in less on the test machine (tests/test_notebook_structure.py's RUN_S: 15 to 176 s), so no cell of theirs takes
#: that long; 04 and 06 run whole in 270 s, their longest cell not measured alone. A "?": a slow cell on a loaded hub
#: may pass it too, and the instructor looks.
STUCK_S = 180.0


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else \
        f"{seconds / 3600:.0f} h"


def _ago(seconds: float) -> str:
    return f"{_span(seconds)} ago"


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _epoch(iso: str | None) -> float | None:
    """Seconds since the epoch of the hub's ISO 8601 time (``"2026-11-26T06:40:00.123Z"``), or ``None``."""
    if not iso:
        return None
    when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _badge(css: str, text: str, title: str) -> str:
    return f'<span class="b {css}" title="{html.escape(title)}">{text}</span>'


#: What a notebook's cell shows per kind of mark (predictions are counted below the table, not shown per attendee): its
#: letter, and per state (:data:`labkit.learn.marks.STATES`) the CSS class, the sign after the letter and the word in
#: the mark's title.
SHOWN = {"exercise": ("E", {"unanswered": ("ask", "…", "not answered (the answer cell still holds ...)"),
                            "wrong": ("no", "✗", "wrong"), "right": ("ok", "✓", "right"),
                            "error": ("err", "!", "error: the check raised (the lab's failure, not the answer)")}),
         "claims": ("C", {"held": ("ok", "✓", "held: the claims line ran, and no assertion cell of the kernel's latest "
                                           "run failed"),
                          "failed": ("no", "✗", "failed: an assertion of an assertion cell did not hold"),
                          "error": ("err", "!", "error: an assertion cell raised before its assertions ended")})}
#: How each broker status is shown: (CSS class, word).
BROKER_CSS = {"up": ("ok", "up"), "down": ("no", "down"), "none": ("wait", "not up yet")}


def _mark_cell(marks: dict, notebook: str, has_claims: bool) -> str:
    parts = []
    if (stall := marks.get((notebook, PARTICIPANT))) is not None:
        parts.append(_badge("stall", "P!", f"a participant stalled: stuck in a client call past the lab's deadline, "
                                           f"last at {_clock(stall.at)} ({stall.reports} time(s))"))
    for kind, (letter, states) in SHOWN.items():
        mark = marks.get((notebook, kind))
        if kind == "claims" and not has_claims:
            parts.append(_badge("na", "–", "this notebook has no claims cell"))
        elif mark is None:
            parts.append(_badge("none", f"{letter}·", f"{kind}: not run yet"))
        else:
            css, sign, word = states[mark.state]
            parts.append(_badge(css, f"{letter}{sign}", f"{kind}: {word} at {_clock(mark.at)} ({mark.reports} run(s))"))
    return f'<td class="nb">{"".join(parts)}</td>'


def _room_cell(marks: list[dict], notebook: str, has_claims: bool) -> str:
    """How many of the attendees (``marks``: each one's) got ``notebook``'s exercise right and its claims held, and
    how many met an error there (a badge of its own, only when some did)."""
    parts = []
    for kind, (letter, states) in SHOWN.items():
        if kind == "claims" and not has_claims:
            continue
        count = {state: sum(m[(notebook, kind)].state == state for m in marks if (notebook, kind) in m)
                 for state in states}
        good = "right" if kind == "exercise" else "held"
        parts.append(_badge("sum", f"{letter}{count[good]}", f"{kind}, of the {len(marks)} attendees: "
                            + ", ".join(f"{n} {state}" for state, n in count.items())))
        if count["error"]:
            parts.append(_badge("err", f"{letter}!{count['error']}", f"{kind}: {count['error']} attendee(s) met an "
                                                                      "error (the lab's failure)"))
    return f'<td class="nb">{"".join(parts)}</td>'


def _server_cell(user: dict) -> str:
    server = (user.get("servers") or {}).get("")
    if not server:
        return '<td class="no">stopped</td>'
    if server.get("ready"):
        return '<td class="ok">up</td>'
    return f'<td class="wait">{"stopping" if server.get("pending") == "stop" else "starting"}</td>'


def kernels(user: dict, marks: dict, now: float) -> list[tuple[str, str, float]]:
    """``[(notebook, state, seconds in it)]`` of ``user``'s kernels (the hub's user model; ``marks``: theirs): each
    notebook's latest kernel state (``"busy"``, ``"idle"``, ``"raised"``), or ``"stuck"`` for one busy longer than
    :data:`STUCK_S`; only states reported since their server started (a stopped server has no kernel), stuck and busy
    first, then raised, then idle, the most recent first within each."""
    server = (user.get("servers") or {}).get("") or {}
    started = _epoch(server.get("started"))
    if not server.get("ready") or started is None:
        return []
    found = []
    for (notebook, kind), mark in marks.items():
        if kind == KERNEL and mark.at >= started:
            state = "stuck" if mark.state == "busy" and now - mark.at > STUCK_S else mark.state
            found.append((notebook, state, max(0.0, now - mark.at)))
    order = {"stuck": 0, "busy": 1, "raised": 2, "idle": 3}
    return sorted(found, key=lambda k: (order[k[1]], k[2]))


#: How each kernel state is shown: (CSS class, words before its duration, what its title says).
KERNEL_CSS = {"stuck": ("no", "stuck?", f"busy for longer than {STUCK_S / 60:.0f} min: a cell that does not end, "
                                             "or a kernel that died in it"),
              "busy": ("wait", "busy", "a cell runs"),
              "raised": ("err", "failed", "the latest cell raised: the run stopped there"),
              "idle": ("ok", "idle", "the latest cell ended")}


def _kernel_cell(found: list[tuple[str, str, float]]) -> str:
    if not found:
        return '<td class="kernels"><small>none reported</small></td>'
    lines = [f'<span class="k {KERNEL_CSS[state][0]}" data-notebook="{notebook}" data-state="{state}" '
             f'title="{html.escape(KERNEL_CSS[state][2])}">{notebook} {KERNEL_CSS[state][1]} {_span(seconds)}</span>'
             for notebook, state, seconds in found]
    return f'<td class="kernels">{"".join(lines)}</td>'


def gib(memory: tuple[int, int, int] | None) -> str:
    """``"1.2 / 2.0 GiB"`` of ``(usage, limit, OOM kills)`` (bytes, bytes, count), with the kills when there were
    some; ``"–"`` for ``None`` (no memory group: the lab is not running)."""
    if memory is None:
        return "–"
    usage, limit, kills = memory
    text = f"{usage / 2**30:.1f} / {limit / 2**30:.1f} GiB"
    return text + (f"<small>{kills} OOM kill(s)</small>" if kills else "")


#: Memory use at or above this share of the limit is shown as a warning (the OOM killer acts at the limit).
MEMORY_WARN = 0.9


def _memory_cell(memory: tuple[int, int, int] | None) -> str:
    css = "no" if memory and (memory[2] or memory[0] >= MEMORY_WARN * memory[1]) else ""
    return (f'<td class="mem {css}" title="the lab\'s memory group (cgroup): usage / limit, and the OOM killer\'s '
            f'kills in it">{gib(memory)}</td>')


def _row(user: dict, broker: str, memory: tuple[int, int, int] | None, marks: dict, titles: dict,
         now: float) -> str:
    seen = _epoch(user.get("last_activity"))
    signed = (f'<td class="ok">yes<small title="JupyterHub\'s last_activity: the hub\'s record of the attendee\'s '
              f'requests, not of their cells (Kernels)">hub: {_ago(now - seen)}</small></td>') if seen else \
        '<td class="wait">not yet</td>'
    css, word = BROKER_CSS[broker]
    last = max((m.at for m in marks.values()), default=None)
    reported = f"{_clock(last)}<small>{_ago(now - last)}</small>" if last else "none"
    cells = "".join(_mark_cell(marks, n, titles[n][1]) for n in NOTEBOOKS)
    found = kernels(user, marks, now)
    flag = ' class="stuck"' if any(state == "stuck" for _, state, _ in found) else ""
    return (f'<tr{flag}><th class="who">{html.escape(user["name"])}</th>{signed}{_server_cell(user)}'
            f'<td class="{css}">{word}</td>{_memory_cell(memory)}{_kernel_cell(found)}{cells}'
            f'<td class="last">{reported}</td></tr>')


def table_html(users: list[dict], brokers: dict[str, str], marks: dict, titles: dict, now: float,
               memory: dict[str, tuple[int, int, int] | None] | None = None) -> str:
    """The live view's table (an HTML fragment): a summary line, one row per attendee of ``users`` (the hub's user
    models, the instructor and any admin left out) and a line of links to each one's notebooks
    (:func:`notebooks_html`) and a last row counting the room's marks per notebook. ``brokers``:
    ``{name: broker_status}``; ``marks``: as :meth:`Store.marks` returns them; ``titles``: as
    :func:`notebook_titles`; ``now``: seconds since the epoch; ``memory``: ``{name: (usage bytes, limit bytes, OOM
    kills)}`` of each attendee's memory group, or ``None`` for one without (:func:`gib`)."""
    memory = memory or {}
    titles = {n: titles.get(n, ("", True)) for n in NOTEBOOKS}
    attendees = sorted((u for u in users if not (u.get("admin") or is_instructor(u))), key=lambda u: u["name"])
    theirs = [marks.get(u["name"], {}) for u in attendees]
    rows = "".join(_row(u, brokers.get(u["name"], "none"), memory.get(u["name"]), m, titles, now)
                   for u, m in zip(attendees, theirs))
    if attendees:
        rows += (f'<tr class="room"><th colspan="6">Right / held, of {len(attendees)}</th>'
                 + "".join(_room_cell(theirs, n, titles[n][1]) for n in NOTEBOOKS) + "<td></td></tr>")
    else:
        rows = f'<tr><td colspan="{len(NOTEBOOKS) + 7}" class="empty">No attendee has signed in yet.</td></tr>'
    servers_up = sum(bool(((u.get("servers") or {}).get("") or {}).get("ready")) for u in attendees)
    brokers_up = sum(brokers.get(u["name"]) == "up" for u in attendees)
    states = [[state for _, state, _ in kernels(u, m, now)] for u, m in zip(attendees, theirs)]
    stuck, failed = sum("stuck" in s for s in states), sum("raised" in s for s in states)
    head = "".join(f'<th class="nb">{n}<small>{html.escape(titles[n][0])}</small></th>' for n in NOTEBOOKS)
    return (f'<p class="sum"><b>{len(attendees)}</b> attendee(s) · <b>{servers_up}</b> server(s) up · '
            f'<b>{brokers_up}</b> broker(s) up · <b class="{"alarm" if stuck else ""}" id="stuck">{stuck}</b> '
            f'stuck? · <b id="failed">{failed}</b> with a failed run · updated {_clock(now)} '
            f'{time.strftime("%Z")}</p>'
            f'<table><thead><tr><th>Attendee</th><th>Signed in</th><th>Server</th><th>Broker</th><th>Memory</th>'
            f'<th>Kernels</th>{head}<th>Last report</th></tr></thead><tbody>{rows}</tbody></table>'
            + notebooks_html([u["name"] for u in attendees]) + predictions_html(theirs, titles))


def notebooks_html(names: list[str]) -> str:
    """A line linking each attendee of ``names`` to their notebooks, read-only and script-free, in a new tab (the live
    view's ``notebooks/<name>``: :mod:`labkit.hub.notebook_view`); empty for none."""
    if not names:
        return ""
    links = " · ".join(f'<a href="notebooks/{quote(n)}" target="_blank">{html.escape(n)}</a>' for n in names)
    return f'<p class="notebooks">Read a notebook (as saved, no script runs): {links}</p>'


def predictions_html(marks: list[dict], titles: dict) -> str:
    """The room's predictions (an HTML fragment): for each notebook someone locked a prediction in for before its run,
    how many of the attendees (``marks``: each one's, as in :func:`table_html`; a kernel reports no choice made after
    the notebook's first experiment, :func:`labkit.learn.predictions.lock_in`) did and how many chose each choice (in
    the words the learners chose from, :data:`labkit.learn.marks.CHOICES`; its key in ``data-choice``; most chosen
    first), with no name: the instructor can show it to the room before the reveal. Empty when nobody did."""
    rows = []
    for notebook in NOTEBOOKS:
        chosen = [m[(notebook, PREDICTION)].state for m in marks if (notebook, PREDICTION) in m]
        if not chosen:
            continue
        counts = sorted({c: chosen.count(c) for c in chosen}.items(), key=lambda kv: (-kv[1], kv[0]))
        words = CHOICES[notebook]
        choices = "".join(f'<span class="choice" data-choice="{html.escape(c)}">{html.escape(words.get(c, c))} '
                          f'<b>{n}</b></span>' for c, n in counts)
        rows.append(f'<tr data-notebook="{notebook}"><th>{notebook}<small>{html.escape(titles[notebook][0])}</small>'
                    f'</th><td class="locked">{len(chosen)} of {len(marks)}</td><td>{choices}</td></tr>')
    if not rows:
        return ""
    return ('<h2>Predictions</h2><p class="legend">Per notebook: how many attendees locked in a prediction of its '
            'opening question before its first experiment (a choice made after it is not counted), and how many chose '
            'each choice. No names: show it to the room before the reveal.</p>'
            '<table id="predictions"><thead><tr><th>Notebook</th><th>Locked in</th><th>Choices</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


PAGE = string.Template("""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Live view · labkit workshop</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px; color: #1f2328; }
h1 { font-size: 22px; margin: 0 0 4px; } .sum { margin: 4px 0 14px; color: #444; } .legend { color: #555; margin: 0; }
#stale { color: #cf222e; font-weight: 600; } #stale:empty { display: none; }
table { border-collapse: collapse; }
th, td { padding: 5px 4px; border-bottom: 1px solid #d0d7de; text-align: left; white-space: nowrap;
  vertical-align: middle; }
thead th { background: #f6f8fa; font-weight: 600; position: sticky; top: 0; white-space: normal; }
small { display: block; font-size: 11px; color: #666; font-weight: 400; }
th.nb, td.nb { text-align: center; } th.nb small { max-width: 76px; margin: 0 auto; white-space: normal; }
th.who { font-weight: 600; } td.ok { color: #1a7f37; } td.no { color: #cf222e; } td.wait { color: #9a6700; }
tr.room th, tr.room td { background: #f6f8fa; border-bottom: none; } tr.room th { text-align: right; }
.b { display: inline-block; min-width: 16px; margin: 0 1px; padding: 1px 2px; border-radius: 4px; font-size: 12px;
  font-weight: 600; text-align: center; }
.b.ok { background: #dafbe1; color: #1a7f37; } .b.no { background: #ffebe9; color: #cf222e; }
.b.none { background: #f6f8fa; color: #8c959f; } .b.na { color: #8c959f; } .b.sum { background: #fff; }
.b.ask { background: #f6f8fa; color: #57606a; border: 1px dashed #8c959f; }
.b.err { background: #fff8c5; color: #9a6700; }
.empty { color: #666; padding: 16px; }
.b.stall { background: #ffebe9; color: #cf222e; border: 1px solid #cf222e; }
tr.stuck th.who { box-shadow: inset 4px 0 #cf222e; } tr.stuck td, tr.stuck th { background: #fff5f5; }
.k { display: block; font-size: 12px; } .legend .k { display: inline; font-size: 14px; }
.k.ok { color: #1a7f37; } .k.wait { color: #9a6700; }
.k.no { color: #cf222e; font-weight: 700; } .k.err { color: #bc4c00; font-weight: 600; }
td.mem.no { color: #cf222e; font-weight: 600; } .alarm { color: #cf222e; }
h2 { font-size: 17px; margin: 22px 0 2px; } #predictions td.locked { font-weight: 600; }
#predictions td { white-space: normal; } #predictions thead th { white-space: nowrap; }
.choice { display: inline-block; margin: 2px 10px 2px 0; padding: 1px 6px; border-radius: 4px; background: #ddf4ff; }
</style></head><body>
<h1>Live view · labkit workshop</h1>
<p class="legend">Per notebook: <span class="b ok">E✓</span> exercise right, <span class="b no">E✗</span> wrong,
<span class="b ask">E…</span> checked unanswered, <span class="b err">E!</span> the check raised (the lab's error,
not the answer's); <span class="b ok">C✓</span> the claims line ran and every assertion cell of the kernel's latest
run held, <span class="b no">C✗</span> an assertion cell failed, <span class="b err">C!</span> an assertion cell raised;
<span class="b none">E·</span> not run; <span class="b na">–</span> no claims cell; <span class="b stall">P!</span> a
participant stalled in a client call. Kernels: each notebook's kernel <span class="k wait">busy</span>
(a cell runs), <span class="k no">stuck?</span> (busy for over $stuck: a cell that does not end, or
a kernel that died in it), <span class="k err">failed</span> (its latest cell raised) or
<span class="k ok">idle</span>, for how long, as the kernel reported it. Memory: the lab's memory
group, usage / limit. Hover a mark for its time. Refreshes every $refresh s.</p>
<p id="stale"></p><div id="live">$table</div>
<script>
async function refresh() {
  const stale = document.getElementById('stale');
  try {
    const r = await fetch('api/table', {credentials: 'same-origin', cache: 'no-store', redirect: 'manual',
                                        headers: {'X-XSRFToken': $xsrf}});
    if (!r.ok) throw new Error(r.type === 'opaqueredirect' ? 'signed out: reload the page' : 'HTTP ' + r.status);
    document.getElementById('live').innerHTML = await r.text();
    stale.textContent = '';
  } catch (e) {
    stale.textContent = 'Not refreshed (' + e.message + '): this is the state at the time shown.';
  }
}
setInterval(refresh, $refresh * 1000);
</script></body></html>""")


def page_html(table: str, refresh_s: float, xsrf: str) -> str:
    """The live view's page: ``table`` (:func:`table_html`), refreshed every ``refresh_s`` seconds by a script that
    sends the XSRF token ``xsrf`` with each fetch of the table; the legend names :data:`STUCK_S`."""
    return PAGE.substitute(table=table, refresh=f"{refresh_s:g}", stuck=_span(STUCK_S), xsrf=json.dumps(xsrf))
