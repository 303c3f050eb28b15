"""``python -m labkit doctor`` (``make doctor``): every check of :mod:`labkit.doctor.checks` and
:mod:`labkit.doctor.network`, the report of :mod:`labkit.doctor.report`, and the exit status."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Mapping, Sequence

from labkit.broker import runtime
from labkit.broker.settings import kafka_version
from labkit.doctor import checks as c
from labkit.doctor import needs, report
from labkit.doctor.network import check_network


def run_checks(env: Mapping[str, str] | None = None, *, ports: Mapping[int, str] | None = None,
               memory_mib: float | None = None) -> list[c.Check]:
    """Every prerequisite's check, in the report's order.

    Args:
        env: the environment to judge (default ``os.environ``).
        ports: ports the lab must find free besides the ones it picks (port -> what for).
        memory_mib: memory to judge against the notebooks' peaks, MiB (default what psutil reports available).
    """
    env = os.environ if env is None else env
    found = [c.check_os(), c.check_cores(), c.check_memory(memory_mib, env), c.check_disk(env), c.check_python(),
             c.check_java(env), c.check_javac(env), c.check_maven(env), c.check_make(env), c.check_ports(ports, env),
             c.check_bootstrap(env), c.check_caches(env), check_network(env), c.check_chromium(env), c.check_hub()]
    return [check for check in found if check is not None]


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """The command line; returns the exit status: 0 when every notebook can run here, else 1 (with ``--lab``, what
    ``make lab`` runs first: 1 only when no notebook can run, i.e. the lab itself would break).

    Raises:
        LabkitError: ``LABKIT_KAFKA_VERSION`` names a release labkit does not run.
    """
    parser = argparse.ArgumentParser(prog="python -m labkit doctor",
                                     description="Check this machine for the lab: one line per prerequisite.")
    parser.add_argument("--lab", action="store_true",
                        help="make lab's: print only what warns or fails; fail only when no notebook can run")
    parser.add_argument("--memory-mib", type=float, help="judge this much available memory (MiB) instead of psutil's")
    parser.add_argument("--port", type=int, action="append", default=[],
                        help="a port that must be free on 127.0.0.1 (repeatable)")
    args = parser.parse_args(list(argv))
    env = os.environ if env is None else env
    found = run_checks(env, ports={port: "asked for with --port" for port in args.port}, memory_mib=args.memory_mib)
    title = (f"labkit doctor{' (`make doctor` prints every line)' if args.lab else ''}: "
             f"Kafka {kafka_version(None, dict(env))}, LABKIT_HOME={runtime.labkit_home(dict(env))}"
             + (f", LABKIT_BOOTSTRAP={env['LABKIT_BOOTSTRAP']}" if c.external_broker(env) else ""))
    print(report.render(found, title, brief=args.lab, external_broker=c.external_broker(env)), flush=True)
    stopped = report.blocked(found)
    if args.lab:
        if len(stopped) == len(needs.NOTEBOOKS):
            print("make lab stops here: no notebook can run (fix the FAIL lines above, then `make lab` again)",
                  file=sys.stderr)
            return 1
        return 0
    return 1 if stopped else 0
