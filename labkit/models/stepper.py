"""MODELLED, KIP-1289: a stepper over the model: one button per possible step, the model advancing one
step per press, the share timeline and the transactions redrawn after each.

Every button calls :meth:`Stepper.press`, which a notebook cell can call too (headless, under nbval).
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import pandas as pd
import plotly.graph_objects as go

from labkit.share.timeline import share_timeline_figure
from labkit.models.kip1289 import INPUT, World

FAULT_STYLE = {"crash": "danger", "zombie": "warning", "timeout": "warning", "tc_crash": "danger",
               "sc_crash": "danger", "lock_expiry": "warning"}


def transactions(world: World) -> pd.DataFrame:
    """The transaction coordinator's entries: transactional.id, producer id, epoch, state, the
    partitions in the transaction (the output partition, ``__share_group_state``), and the output
    partition's LSO and high watermark."""
    rows = [(t.tid, t.pid, t.epoch, t.state, ", ".join(sorted(t.partitions)) or "-", t.owner)
            for t in sorted(world.tc.txns.values(), key=lambda t: t.tid)]
    frame = pd.DataFrame(rows, columns=["transactional.id", "producer id", "epoch", "state", "partitions in it",
                                        "instance"])
    frame.attrs["lso"], frame.attrs["high watermark"] = world.out.lso(), len(world.out.records)
    return frame


def label(action: tuple) -> str:
    """A button's text for ``action`` (e.g. "c1: send_acks", "crash c2", "lock expiry of offset 0")."""
    name, *args = action
    if name == "lock_expiry":
        return f"lock expiry of offset {args[0]}"
    if name in FAULT_STYLE or name in ("markers", "tc_recover", "restart"):
        return " ".join([name.replace("_", " "), *map(str, args)])
    return f"{args[0]}: {name}"


class Stepper:
    """The model one step per press. ``world``: a :class:`~labkit.models.kip1289.World` (with history).

    Attributes: ``said`` (what each step did, in words), ``figure`` (a ``go.FigureWidget``).
    """

    def __init__(self, world: World, title: str = "stepper") -> None:
        self.world, self.title, self.said = world, title, []
        self.figure = go.FigureWidget()
        self._buttons, self._log, self._txns = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap")), \
            widgets.HTML(), widgets.HTML()
        self.refresh()

    def press(self, action: tuple) -> str:
        """Do ``action`` (one of :meth:`~labkit.models.kip1289.World.actions`) and redraw.

        Raises:
            ValueError: the step is not possible now (the message lists those that are).
        """
        said = self.world.step(tuple(action))
        self.said.append(said)
        self.refresh()
        return said

    def refresh(self) -> None:
        share_timeline_figure(self.world.events, INPUT, title=self.title, modelled=True, figure=self.figure)
        buttons = []
        for action in self.world.actions():
            b = widgets.Button(description=label(action), button_style=FAULT_STYLE.get(action[0], ""),
                               layout=widgets.Layout(width="auto"))
            b.on_click(lambda _, a=action: self.press(a))
            buttons.append(b)
        self._buttons.children = buttons
        self._log.value = "<br>".join(f"{i + 1}. {html.escape(s)}" for i, s in enumerate(self.said[-8:],
                                                                                            max(0, len(self.said) - 8)))
        t = transactions(self.world)
        self._txns.value = (t.to_html(index=False) + f"<p>output-0: LSO {t.attrs['lso']}, high watermark "
                            f"{t.attrs['high watermark']}, read_committed returns input offsets "
                            f"{self.world.out.read_committed()}</p>")

    def _repr_mimebundle_(self, **kwargs):
        box = widgets.VBox([widgets.HTML("<b>MODELLED</b> (KIP-1289 is in no Kafka release): press a step"),
                            self._buttons, self.figure, self._txns, self._log])
        return box._repr_mimebundle_(**kwargs)
