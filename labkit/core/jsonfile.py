"""Write a JSON file whole or not at all.

A reader (another process, another thread) sees the old content or the
new one, never half of one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_json(path: Path | str, value, *, indent: int | None = None, mode: int = 0o644) -> None:
    """Replace ``path`` with ``value`` as JSON (a trailing newline; ``indent`` spaces per level, None for one line),
    creating its folder if needed. The text goes to a temporary file of its own in the same folder (one per call,
    so writers in several threads or processes never share one) that is then renamed over ``path`` (rename(2) is
    atomic within a file system). ``mode``: the file's permission bits.

    Raises:
        TypeError: ``value`` is not JSON-serialisable (``path`` is left as it was).
        OSError: the folder cannot be written, or the disk is full (``path`` is left as it was, and no temporary
            file).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(value, indent=indent) + "\n"  # before any file: a bad value leaves nothing behind
    partial = tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", suffix=".partial",
                                          delete=False)
    try:
        with partial:
            partial.write(text)  # a full disk fails here or at the close: the temporary file goes too
        os.chmod(partial.name, mode)
        os.replace(partial.name, path)
    except BaseException:
        Path(partial.name).unlink(missing_ok=True)
        raise
