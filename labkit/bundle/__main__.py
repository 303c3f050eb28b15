"""``python -m labkit.bundle build [--out DIR] [KAFKA_VERSION ...]`` (``make bundle``, the venv's python, with the
network) and ``python3 -m labkit.bundle install ARCHIVE`` (``make lab BUNDLE=ARCHIVE``, any python3, no network, the
standard library only: nothing of the venv is imported on that path). A
:class:`~labkit.bundle.manifest.BundleError` (or another :class:`~labkit.core.errors.LabkitError`) is printed as its
message alone (it names the fix), exit 1."""

import sys

from labkit.core.errors import LabkitError

USAGE = "usage: python -m labkit.bundle build [--out DIR] [KAFKA_VERSION ...] | install ARCHIVE"

if __name__ == "__main__":
    command, args = (sys.argv[1:2] or [""])[0], sys.argv[2:]
    try:
        if command == "install":
            from labkit.bundle.install import main
        elif command == "build":
            from labkit.bundle.build import main
        else:
            sys.exit(USAGE)
        sys.exit(main(args))
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        sys.exit(1)
