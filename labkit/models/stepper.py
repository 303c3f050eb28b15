"""MODELLED, KIP-1289: a stepper over the model: one button per possible step, the model advancing one
step per press, a share timeline per share partition and the transactions redrawn after each.

Every button calls :meth:`Stepper.press`, which a notebook cell can call too (headless, under nbval).
"""

from __future__ import annotations

import html
from typing import Callable

import ipywidgets as widgets
import pandas as pd
import plotly.graph_objects as go

from labkit.models.kip1289 import World

FAULT_STYLE = {"crash": "danger", "zombie": "warning", "timeout": "warning", "tc_crash": "danger",
               "sc_crash": "danger", "lock_expiry": "warning"}


def transactions(world: World) -> pd.DataFrame:
    """The transaction coordinator's entries: transactional.id, producer id, epoch, state, the
    partitions in the transaction (the output partition, ``__share_group_state`` partitions), those whose
    WriteTxnMarkers are written, and the output partition's LSO and high watermark."""
    rows = [(t.tid, t.pid, t.epoch, t.state, ", ".join(sorted(t.partitions)) or "-",
             ", ".join(sorted(t.marked)) or "-", t.owner)
            for t in sorted(world.tc.txns.values(), key=lambda t: t.tid)]
    frame = pd.DataFrame(rows, columns=["transactional.id", "producer id", "epoch", "state", "partitions in it",
                                        "markers written", "instance"])
    frame.attrs["lso"], frame.attrs["high watermark"] = world.out.lso(), len(world.out.records)
    return frame


def label(action: tuple) -> str:
    """A button's text for ``action`` (e.g. "c1: send_acks", "crash c2", "lock expiry of input-0:0",
    "markers tx-c1 → output-0")."""
    name, *args = action
    if name == "lock_expiry":
        return f"lock expiry of {args[0]}:{args[1]}"
    if name == "markers":
        return f"markers {args[0]} → {args[1]}"
    if name in FAULT_STYLE or name in ("tc_recover", "restart"):
        return " ".join([name.replace("_", " "), *map(str, args)])
    return f"{args[0]}: {name}"


class Stepper:
    """The model one step per press.

    Args:
        world: a :class:`~labkit.models.kip1289.World` (with history).
        draw: draws one share partition's timeline into a figure, called as ``draw(events, topic,
            title=..., partition=..., modelled=True, figure=...)`` (notebook 06's
            ``share_timeline_figure``).
        title: the figures' title.
    Attributes: ``said`` (what each step did, in words), ``figures`` (a ``go.FigureWidget`` per share
    partition).
    """

    def __init__(self, world: World, draw: Callable, title: str = "stepper") -> None:
        self.world, self.draw, self.title, self.said = world, draw, title, []
        self.figures = [go.FigureWidget() for _ in world.sps]
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
        for name, (topic, partition), figure in zip(self.world.names, self.world.inputs, self.figures):
            title = self.title if len(self.figures) == 1 else f"{self.title}: {name}"
            self.draw(self.world.events, topic, title=title, partition=partition, modelled=True, figure=figure)
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
                            f"{t.attrs['high watermark']}, read_committed returns the outputs of "
                            f"{[self.world.label(r) for r in self.world.out.read_committed()]}</p>")

    def _repr_mimebundle_(self, **kwargs):
        box = widgets.VBox([widgets.HTML("<b>MODELLED</b> (KIP-1289 is in no Kafka release): press a step"),
                            self._buttons, *self.figures, self._txns, self._log])
        return box._repr_mimebundle_(**kwargs)
