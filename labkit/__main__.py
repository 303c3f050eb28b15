"""labkit's command line, what ``make`` runs: ``python -m labkit COMMAND``.

Commands: ``jars [VERSION ...]`` (check Java, resolve the Kafka jars), ``up``, ``down``, ``status``
(the lab: broker and JupyterLab), ``serve-broker`` (the lab broker daemon that ``up`` starts).
A :class:`~labkit.errors.LabkitError` is printed as its message alone (it names the fix), exit 1.
"""

import sys

from labkit import lab
from labkit.broker import runtime
from labkit.errors import LabkitError

if __name__ == "__main__":
    args = sys.argv[1:]
    try:
        sys.exit(runtime.main(args[1:]) if args[:1] == ["jars"] else lab.main(args))
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        sys.exit(1)
