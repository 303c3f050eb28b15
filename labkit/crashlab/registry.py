"""The role registry: every participant role is one module that declares a :class:`Role`.

A role module lives in a ``roles`` folder of a labkit package (``labkit/<package>/roles/<name>.py``, the file name
is the role's name) and defines ``ROLE = Role(...)``: its steps (the crash points, in loop order), its options
(types, defaults, choices) and its loop. The registry finds role modules by their file names, without importing
them, so the engine names no topic and a participant process imports only its own role. A role outside labkit
(e.g. a test's) is named by its dotted module path. Adding a role is adding one such module.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labkit.crashlab.loop import Loop

#: The default of an option the caller must give.
REQUIRED = object()
#: The client runtimes a participant can run on: librdkafka (confluent-kafka, a Python process, the loops of
#: ``labkit/*/roles/``) and Kafka's own Java client (a JVM, ``jvm/participant/``, :mod:`labkit.crashlab.java`).
CLIENTS = ("librdkafka", "java")
_LABKIT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Option:
    """One setting of a role.

    Args:
        default: its value when not given (:data:`REQUIRED`: it must be given).
        types: the Python type(s) a value must have (an int is accepted where a float is expected).
        doc: what it does, with its unit (ms, records, offsets).
        choices: the values allowed, if they are few.
        clients: the clients (:data:`CLIENTS`) that have it, if not all (e.g. ``("java",)`` for a feature
            librdkafka lacks).
    """

    default: object
    types: type | tuple[type, ...]
    doc: str
    choices: tuple = ()
    clients: tuple[str, ...] = CLIENTS


#: Options every role takes, used by the engine (:class:`labkit.crashlab.loop.Loop`) itself.
COMMON = {
    "topic": Option(REQUIRED, str, "the topic the role reads (or, for a producer, writes)"),
    "config": Option({}, dict, "extra client configs, e.g. {'linger.ms': 5}; they override the role's own"),
    "sleep_at": Option({}, dict, "{step: ms}: wait that long at a step (a window to pause the process there)"),
    "call_deadline_ms": Option(None, (int, type(None)), "the lab's deadline for each blocking client call, after "
                               "which the participant is reported stalled (ms; default the call's timeout + 5 000)"),
    "last_txn": Option(None, (int, type(None)), "set by a restart: the last transaction number of the run before"),
}


@dataclass(frozen=True)
class Role:
    """A participant role.

    Args:
        name: the role's name (its module's file name).
        steps: the named steps of its loop, in loop order: the valid ``crash_at`` values.
        options: its own options (besides :data:`COMMON`), name to :class:`Option`.
        run: the loop, ``run(loop)``; it reads its settings from ``loop.spec`` (defaults filled in).
        counters: what the control panel shows, (label, event kind) pairs counted in the history.
        check: cross-option checks, ``check(options, crash_at)`` raising ValueError, if any.
        clients: the clients (:data:`CLIENTS`) it runs on; the Java ones are in ``jvm/participant/`` (a role of
            any other process, such as a Spark driver, names its own).
    """

    name: str
    steps: tuple[str, ...]
    options: dict[str, Option]
    run: Callable[["Loop"], None]
    counters: tuple[tuple[str, str], ...] = (("sent", "send"), ("acked", "ack"), ("consumed", "consume"),
                                             ("committed", "committed"), ("aborted", "aborted"))
    check: Callable[[dict, str | None], None] | None = field(default=None)
    clients: tuple[str, ...] = ("librdkafka",)

    def spec(self, options: dict, crash_at: str | None, client: str = "librdkafka") -> dict:
        """``options`` checked and completed with the defaults, for a participant on ``client``.

        Raises:
            ValueError: an unknown option (naming the closest valid one and listing them all), one ``client``
                lacks, a value of the wrong type or not among its choices, a required option missing, ``crash_at``
                not a step, or a client the role does not run on.
        """
        if client not in self.clients:
            raise ValueError(f"a {self.name} does not run on {client!r}; its clients are {', '.join(self.clients)}")
        if crash_at is not None and crash_at not in self.steps:
            raise ValueError(f"{crash_at!r} is not a step of a {self.name}; its steps are {', '.join(self.steps)}")
        known = {**COMMON, **self.options}
        for name, value in options.items():
            if name not in known:
                close = difflib.get_close_matches(name, known, 1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"a {self.name} has no option {name!r}{hint}; its options are {', '.join(known)}")
            _check_value(self.name, name, value, known[name])
            if client not in known[name].clients:
                raise ValueError(f"{name} is not available on {client!r}: {known[name].doc}; it runs on "
                                 f"{', '.join(known[name].clients)} only (client=...)")
        missing = [n for n, o in known.items() if o.default is REQUIRED and n not in options]
        if missing:
            raise ValueError(f"a {self.name} needs {', '.join(missing)}")
        if self.check is not None:
            self.check(options, crash_at)
        return {**{n: o.default for n, o in known.items() if o.default is not REQUIRED}, **options}


def _check_value(role: str, name: str, value: object, option: Option) -> None:
    types = option.types if isinstance(option.types, tuple) else (option.types,)
    if float in types:
        types += (int,)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise ValueError(f"a {role}'s {name} must be {' or '.join(t.__name__ for t in types)}, "
                         f"not {type(value).__name__} {value!r}")
    if option.choices and value not in option.choices:
        raise ValueError(f"unknown {name} {value!r} for a {role}; the choices are {', '.join(map(str, option.choices))}")


def role_modules() -> dict[str, str]:
    """Every role labkit has, name to module path, found by file name (``labkit/*/roles/*.py``), not imported."""
    return {p.stem: f"labkit.{p.parent.parent.name}.roles.{p.stem}"
            for p in sorted(_LABKIT.glob("*/roles/*.py")) if not p.stem.startswith("_")}


def load(name: str) -> Role:
    """The :class:`Role` called ``name`` (a labkit role, or the dotted path of a module defining ``ROLE``);
    imports only that role's module.

    Raises:
        ValueError: no such role (the message lists labkit's roles).
    """
    module = name if "." in name else role_modules().get(name)
    if module is None:
        raise ValueError(f"unknown role {name!r}; the roles are {', '.join(role_modules())}")
    return importlib.import_module(module).ROLE
