"""Notebook 06's playground as its cell shows it: a Start button, then the players' control panel and their live
timeline (issue 65, item 5).

Made plainly, the playground's players started when the cell ran: a learner who pressed Run All found it over (its 16
records done in about 28 s) before scrolling to it, and a second run of the cell drew the first run's pause and resume
lines and counted its records (one experiment, the same player names) while the first run's players, observer, panel
and timeline ran on. Here nothing starts until :meth:`Playground.start` (the button, or a cell: CI runs it headless),
each start is an experiment of its own (its own history: the panel counts and the timeline draws that run alone), and
:meth:`Playground.close` stops all of it. Made through :func:`labkit.only`, a re-run of the cell closes the last one::

    play = labkit.only("playground", lambda: Playground(bootstrap, share_groups.playground))
    play
"""

from __future__ import annotations

import html
from collections.abc import Callable
from functools import partial

import ipywidgets as widgets

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.panel import ControlPanel, button_width
from labkit.crashlab.timeline import LiveTimeline
from labkit.share.timeline import share_timeline_figure

#: The Start button's label.
START = "Start the playground"


class Playground:
    """A playground behind a Start button: notebook 06's, :func:`labkit.lessons.share_groups.playground`.

    Args:
        bootstrap: the broker, "host:port".
        make: ``make(exp, **options)`` writes the records, starts the observer and the players into ``exp`` and
            returns ``{"topic", "group", "players", "observer", ...}``
            (:func:`labkit.lessons.share_groups.playground`; passed in, as a lesson's module imports no other).
        name: the experiment's name (each start makes an :class:`~labkit.crashlab.experiment.Experiment` of it). title:
        the live timeline's title. **options: ``make``'s, e.g. :func:`~labkit.lessons.share_groups.playground`'s
        (``records``, ``players``, ``per_record_ms``,
            ``poll_records``, ``lock_ms``, ``idle_ms``), checked when it starts.

    Attributes:
        widget: what the cell shows: the Start button (and a message if a start failed), then the panel and the
            live timeline.
        exp, topic, players, observer, panel, live: the running playground's experiment, topic, participants,
            :class:`~labkit.share.observer.ShareObserver`, :class:`~labkit.crashlab.panel.ControlPanel` and
            :class:`~labkit.crashlab.timeline.LiveTimeline`; None (players: empty) until :meth:`start`.
    """

    def __init__(self, bootstrap: str, make: Callable[..., dict], name: str = "share-play", title: str = "playground",
                 **options: object) -> None:
        self.bootstrap, self.make, self.name, self.title, self.options = bootstrap, make, name, title, options
        self.exp = self.topic = self.observer = self.panel = self.live = None
        self.players: list = []
        self._closed = False
        self.button = widgets.Button(description=START, button_style="primary",
                                     tooltip=f"{START}: write its records, start its players (start())",
                                     layout=widgets.Layout(width="auto", min_width=f"{button_width(START)}px"))
        self.button.on_click(lambda _b: self._press())
        self.message = widgets.HTML("Nothing runs yet: press the button when you are here to play.")
        self.widget = widgets.VBox([widgets.HBox([self.button, self.message])])

    def start(self) -> "Playground":
        """Start the playground (what the button does): a new experiment, its topic and records, its share group,
        observer and players (``make``), their control panel and live
        timeline, shown in :attr:`widget`. Takes the few seconds the records' producer and the players' start take.
        If ``make`` fails, what it started is stopped and the playground can be started again.

        Raises:
            RuntimeError: already started, or closed.
            Whatever ``make`` raises (:func:`~labkit.lessons.share_groups.playground`: ValueError,
            confluent_kafka.KafkaException).
        """
        if self.exp is not None or self._closed:
            raise RuntimeError(f"this playground is already {'closed' if self._closed else 'started'}; run its cell "
                               "again for a new one")
        self.button.disabled = True
        exp = Experiment(self.name, self.bootstrap)
        try:
            made = self.make(exp, **self.options)
        except BaseException:
            exp.stop_all()  # what it started before it failed; the button can try again
            self.button.disabled = False
            raise
        self.exp = exp
        self.topic, self.players, self.observer = made["topic"], made["players"], made["observer"]
        self.panel = ControlPanel(self.players)
        self.live = LiveTimeline(self.exp.history, title=self.title,
                                 draw=partial(share_timeline_figure, topic=self.topic))
        self.message.value = f"Started: topic <code>{html.escape(self.topic)}</code>, group " \
                             f"<code>{html.escape(made['group'])}</code>."
        self.widget.children = [*self.widget.children, self.panel.widget, self.live.start()]
        return self

    def _press(self) -> None:
        """The button: :meth:`start`, its error shown beside the button rather than lost in the kernel's log."""
        try:
            self.start()
        except Exception as exc:  # noqa: BLE001: a callback's exception reaches no cell; the learner must see it
            self.message.value = f"<span style='color:#d62728'>{html.escape(f'{type(exc).__name__}: {exc}')}</span>"

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the timeline's redraws, the panel's refresh, the players (SIGTERM, each given ``timeout_s`` seconds,
        then SIGKILL: :meth:`~labkit.crashlab.participant.Participant.stop`) and the observer; a second call, or one
        before :meth:`start`, stops nothing more. The Start button is disabled.

        Raises:
            TimeoutError: the timeline's, the panel's or the observer's thread still runs after ``timeout_s`` seconds.
        """
        self.button.disabled = True
        if self._closed:
            return
        self._closed = True
        if self.exp is None:
            return
        self.live.stop(timeout_s)
        self.panel.close(timeout_s)
        for player in self.players:
            player.stop(timeout_s)
        self.observer.stop(timeout_s)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
