"""``python -m labkit.hub``: :func:`labkit.hub.run.main` (what ``make hub`` runs); ``python -m labkit.hub
reset-password NAME [--room ROOM]``: :func:`labkit.hub.resets.main` (the instructor's reset of a forgotten password);
``python -m labkit.hub end-room ROOM``: :func:`labkit.hub.rooms.main` (the end of the day, ``make hub-end``)."""

import sys

from labkit.core.errors import LabkitError

try:
    if sys.argv[1:2] == ["reset-password"]:
        from labkit.hub.resets import main as reset_main

        sys.exit(reset_main(sys.argv[2:]))
    if sys.argv[1:2] == ["end-room"]:
        from labkit.hub.rooms import main as end_main

        sys.exit(end_main(sys.argv[2:]))
    from labkit.hub.run import main

    sys.exit(main(sys.argv[1:]))
except LabkitError as exc:
    print(f"labkit hub: {exc}", file=sys.stderr)
    sys.exit(1)
