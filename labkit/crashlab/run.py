"""A participant's process: ``python -m labkit.crashlab.run <spec as JSON>`` runs the role the spec names."""

from __future__ import annotations

import json
import sys

from labkit.crashlab.roles import (EXIT_FENCED, FENCED_ERRORS, Fenced, Loop, kafka_error, run_consumer, run_processor,
                                   run_producer)
from labkit.crashlab.share_role import run_share_consumer
from labkit.crashlab.spark_role import run_spark_pipeline

ROLES = {"producer": run_producer, "consumer": run_consumer, "processor": run_processor,
         "share_consumer": run_share_consumer, "spark_pipeline": run_spark_pipeline}


def main(spec: dict) -> int:
    """Run the role named in ``spec["role"]``; exit 0 when finished, :data:`EXIT_FENCED` if fenced."""
    loop = Loop(spec)
    try:
        ROLES[spec["role"]](loop)
    except Fenced:
        return EXIT_FENCED
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
