"""A participant's process: ``python -m labkit.crashlab.run <spec as JSON>`` runs the role the spec names,
importing that role's module only (:func:`labkit.crashlab.registry.load`)."""

from __future__ import annotations

import json
import sys

from labkit.crashlab.loop import EXIT_FENCED, EXIT_GAVE_UP, FENCED_ERRORS, Fenced, GaveUp, Loop, kafka_error
from labkit.crashlab.registry import load


def main(spec: dict) -> int:
    """Run the role named in ``spec["role"]``; exit 0 when finished, :data:`EXIT_FENCED` if fenced, :data:`EXIT_GAVE_UP`
    if it gave up waiting for its first assignment (a share consumer: its first record)."""
    run = load(spec["role"]).run
    loop = Loop(spec)
    try:
        run(loop)
    except Fenced:
        return EXIT_FENCED
    except GaveUp:
        return EXIT_GAVE_UP
    except:  # noqa: E722: see Loop.flush
        err = kafka_error(sys.exc_info()[1])
        if err is not None and (err.name() in FENCED_ERRORS or err.fatal()):
            loop.log("fenced", error=err.name())
            return EXIT_FENCED
        raise
    loop.log("stop" if loop.stopping else "finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
