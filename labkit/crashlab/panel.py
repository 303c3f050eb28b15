"""An ipywidgets control panel per participant: Crash, Pause, Resume, Restart, the client the next restart runs on
(librdkafka or Kafka's Java client), status (with the call a stalled participant is stuck in, the signal that killed a
crashed one, the Kafka error that fenced one: :attr:`Participant.cause`), counters.

Each button calls the participant's own method (``crash()``, ``pause()``, ``resume()``,
``restart(client=...)``), the same function a notebook cell can call, so notebooks run headless.
"""

from __future__ import annotations

import html
import threading

import ipywidgets as widgets

from labkit.core.background import Periodic
from labkit.core.errors import LabkitError
from labkit.crashlab.participant import Participant

ACTIONS = ("crash", "pause", "resume", "restart")
_STYLE = {"crash": "danger", "pause": "warning", "resume": "info", "restart": "success"}
#: Each button's label, shown whole, and its tooltip. No icon: a Font Awesome icon's glyph (CSS generated content)
#: becomes part of the button's accessible name ("\uf04c Pause"), which a screen reader reads and a test's
#: ``get_by_role("button", name="Pause", exact=True)`` no longer finds.
LABELS = {"crash": "Crash", "pause": "Pause", "resume": "Resume", "restart": "Restart"}
TOOLTIPS = {"crash": "Crash: SIGKILL the process (crash())",
            "pause": "Pause: SIGSTOP the process, heartbeats and all (pause())",
            "resume": "Resume: SIGCONT a paused process (resume())",
            "restart": "Restart: start a new process on the client chosen beside (restart(client=...))"}
#: Pixels a button's label takes at most per character (JupyterLab's widget font, 13 px: DejaVu Sans, the widest it
#: falls back to, averages under 9 px a letter over these labels), and its padding (10 px a side) with room to spare:
#: :func:`button_width` is never less than what the label needs.
CHAR_PX, PADDING_PX = 9, 30
#: The narrowest the status line gets before it goes onto a line of its own (it never wraps inside a narrow column).
STATUS_MIN_PX = 320


def button_width(label: str) -> int:
    """Width in pixels that fits ``label`` whole on a button: its minimum width in the panel."""
    return len(label) * CHAR_PX + PADDING_PX


class ParticipantPanel:
    """The controls of one :class:`Participant`.

    Attributes:
        buttons: action name ("crash", "pause", "resume", "restart") to its ``widgets.Button``.
        status: ``widgets.HTML`` showing the participant's status and counters.
        message: ``widgets.HTML`` showing the last error (e.g. pausing a crashed participant).
        client: ``widgets.Dropdown`` of the role's clients: the one Restart runs the participant on.
        controls: the buttons, in a box of their own.
        widget: the whole panel, to display: one row that wraps (whole items onto the next line) where it is too
            narrow; no button, title or selector shrinks below its content (:func:`button_width`).

    :meth:`refresh` runs under a lock: a :class:`ControlPanel`'s thread refreshes while a button press refreshes in
    the notebook's thread, and without it a refresh that read the status before the press could show it after the
    press's own (a paused participant shown running until the next refresh).
    """

    def __init__(self, participant: Participant) -> None:
        self.participant = participant
        self._refreshing = threading.Lock()
        # Nothing in a row shrinks below what it shows whole (a flex item shrinks by default: at 1280 px with the file
        # browser open the buttons came down to "Res…" and "Res…"); a row too narrow wraps instead, a whole item onto
        # the next line.
        fixed = dict(flex="0 0 auto")
        self.buttons = {a: widgets.Button(description=LABELS[a], tooltip=TOOLTIPS[a], button_style=_STYLE[a],
                                          layout=widgets.Layout(width="auto", **fixed,
                                                                min_width=f"{button_width(LABELS[a])}px"))
                        for a in ACTIONS}
        for action, button in self.buttons.items():
            button.on_click(lambda _b, action=action: self.press(action))
        self.status = widgets.HTML(layout=widgets.Layout(flex=f"1 1 {STATUS_MIN_PX}px", min_width=f"{STATUS_MIN_PX}px"))
        self.message = widgets.HTML(layout=widgets.Layout(flex="0 1 auto"))
        clients = participant.role_def.clients
        self.client = widgets.Dropdown(options=clients, value=participant.spec["client"], disabled=len(clients) == 1,
                                       description="restart on", layout=widgets.Layout(width="200px", **fixed))
        self.title = widgets.HTML(layout=widgets.Layout(width="180px", **fixed))
        self.controls = widgets.HBox(list(self.buttons.values()), layout=widgets.Layout(flex_flow="row wrap", **fixed))
        self.widget = widgets.HBox([self.title, self.controls, self.client, self.status, self.message],
                                   layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        self.refresh()

    def press(self, action: str) -> None:
        """Do ``action`` on the participant, as its button does; an error is shown, not raised.

        Raises:
            ValueError: ``action`` is not one of :data:`ACTIONS`.
        """
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS)}")
        try:
            if action == "restart":
                self.participant.restart(client=self.client.value)
            else:
                getattr(self.participant, action)()
            self.message.value = ""
        except LabkitError as exc:
            self.message.value = f"<span style='color:#d62728'>{exc}</span>"
        self.refresh()

    def refresh(self) -> None:
        """Show the current client, status and counters, read and shown under the lock (so never overwritten by
        what an older refresh read)."""
        p = self.participant
        with self._refreshing:
            self.title.value = (f"<div style='line-height:1.25'><b>{html.escape(p.name)}</b><br>"
                                f"<small>({p.role} on {p.spec['client']})</small></div>")
            c = p.counters()
            where, status = p.stalled_in, p.status
            cause = p.cause if status in ("crashed", "fenced") else None  # a failed one's error is in its status
            status = f"<code style='color:#d62728'>stalled in {where}</code>" if status == "stalled" and where \
                else f"<code>{html.escape(status)}</code>" + (f" <small>{html.escape(cause)}</small>" if cause else "")
            self.status.value = status + " · " + " · ".join(f"{key.replace('_', ' ')} {n}" for key, n in c.items())


class ControlPanel:
    """Panels for several participants, refreshed every ``interval_s`` seconds in the background.

    Args:
        participants: the participants to control.
        interval_s: seconds between status refreshes (0: refresh only after a button press).
    """

    def __init__(self, participants: list[Participant], interval_s: float = 1.0) -> None:
        self.panels = {p.name: ParticipantPanel(p) for p in participants}
        self.widget = widgets.VBox([panel.widget for panel in self.panels.values()])
        self._thread = Periodic("labkit-panel", self.refresh, interval_s, first_now=False)
        if interval_s:
            self._thread.start()

    def press(self, name: str, action: str) -> None:
        """Press ``action`` on participant ``name``'s panel (what a click does)."""
        self.panels[name].press(action)

    def refresh(self) -> None:
        """Show every participant's current status and counters (what the background refresh does)."""
        for panel in self.panels.values():
            panel.refresh()

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the background refresh; waits at most ``timeout_s`` seconds for its thread.

        Raises:
            TimeoutError: a refresh still runs after ``timeout_s`` seconds.
            Exception: what ended the refresh thread.
        """
        self._thread.stop(timeout_s)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
