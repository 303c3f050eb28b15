"""A role from outside labkit, the way a new one is added: this one module, defining ``ROLE`` (tests/test_registry).

Each iteration passes its step ``tick`` and records a ``send`` event; at the end the role writes the names of the
modules its process loaded to ``modules_file`` (JSON), so the test sees what a participant process imports.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from labkit.core.history import value_id
from labkit.crashlab.loop import Loop
from labkit.crashlab.registry import REQUIRED, Option, Role


def run(loop: Loop) -> None:
    for loop.iteration in range(1, loop.spec["times"] + 1):
        loop.step("tick")
        loop.log("send", topic=loop.spec["topic"], value_id=value_id(loop.name, loop.iteration))
    Path(loop.spec["modules_file"]).write_text(json.dumps(sorted(sys.modules)))


ROLE = Role(name="echo", steps=("tick",), run=run, options={
    "times": Option(3, int, "how many iterations"),
    "modules_file": Option(REQUIRED, str, "where the loaded modules' names go (JSON)"),
})
