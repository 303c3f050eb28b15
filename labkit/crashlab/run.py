"""A participant's process: ``python -m labkit.crashlab.run <spec as JSON>`` runs the role the spec names,
importing that role's module only (:func:`labkit.crashlab.registry.load`)."""

from __future__ import annotations

import json
import sys
import traceback

from labkit.crashlab.loop import (EXIT_FAILED, EXIT_FENCED, EXIT_GAVE_UP, Failed, Fenced, GaveUp, Loop, error_name,
                                  is_fencing, kafka_error)
from labkit.crashlab.registry import load


def main(spec: dict) -> int:
    """Run the role named in ``spec["role"]``. Returns the exit code: 0 when finished or stopped; :data:`EXIT_FENCED`
    if fenced (a fencing error, :data:`~labkit.crashlab.loop.FENCED_ERRORS`, after a ``fenced`` event);
    :data:`EXIT_GAVE_UP` if it gave up waiting for its first assignment (a share consumer: its first record);
    :data:`EXIT_FAILED` on any other error that ended the role, after a ``failed`` event whose ``error`` is Kafka's
    name of it (e.g. INVALID_TRANSACTION_TIMEOUT, _INVALID_ARG for a bad config), or for an exception that is not
    Kafka's ``"<type>: <message>"`` (its traceback goes to stderr)."""
    run = load(spec["role"]).run
    loop = Loop(spec)
    try:
        run(loop)
    except Fenced:
        return EXIT_FENCED
    except GaveUp:
        return EXIT_GAVE_UP
    except Failed:
        return EXIT_FAILED
    except SystemExit:
        raise
    except:  # noqa: E722: see Loop.flush
        exc = sys.exc_info()[1]
        err = kafka_error(exc)  # also a KafkaError raised bare, not a BaseException (kafka_error)
        if isinstance(exc, BaseException):
            traceback.print_exc()
        else:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        if err is not None:
            error = error_name(err)
            loop.log("fenced" if is_fencing(error) else "failed", txn=loop.txn or None, error=error)
            return EXIT_FENCED if is_fencing(error) else EXIT_FAILED
        loop.log("failed", txn=loop.txn or None, error=f"{type(exc).__name__}: {exc}".strip().rstrip(":"))
        return EXIT_FAILED
    loop.log("stop" if loop.stopping else "finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
