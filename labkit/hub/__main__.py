"""``python -m labkit.hub``: :func:`labkit.hub.run.main` (what ``make hub`` runs)."""

import sys

from labkit.errors import LabkitError
from labkit.hub.run import main

try:
    sys.exit(main(sys.argv[1:]))
except LabkitError as exc:
    print(f"labkit hub: {exc}", file=sys.stderr)
    sys.exit(1)
