"""labkit.core.jsonfile: a JSON file is replaced whole or not at all, by writers in several processes at once."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

import pytest

from labkit.core.jsonfile import write_json

WRITER = """
import sys
from labkit.core.jsonfile import write_json
for n in range(300):
    write_json(sys.argv[1], {"writer": sys.argv[2], "n": n, "padding": "x" * 20000})
"""


def test_readers_see_whole_files_while_three_processes_replace_it(tmp_path):
    path = tmp_path / "state.json"
    write_json(path, {"writer": "first", "n": -1})
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w)]) for w in range(3)]
    reads = 0
    while any(w.poll() is None for w in writers):
        json.loads(path.read_text())  # raises on half a file
        reads += 1
    assert [w.wait() for w in writers] == [0, 0, 0]
    last = json.loads(path.read_text())
    assert last["n"] == 299 and last["writer"] in {"0", "1", "2"} and reads > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temporary file left


def test_a_value_json_cannot_hold_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "state.json"
    write_json(path, {"kept": True}, indent=1)
    with pytest.raises(TypeError):
        write_json(path, {"a set": {1, 2}})
    assert json.loads(path.read_text()) == {"kept": True} and path.read_text().endswith("}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_the_file_gets_the_mode_asked_for_and_its_folder_is_made(tmp_path):
    path = tmp_path / "new" / "folder" / "state.json"
    write_json(path, [1, 2])
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and json.loads(path.read_text()) == [1, 2]
    write_json(path, [3], mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and json.loads(path.read_text()) == [3]


FULL_DISK = """
import resource, signal, sys
from labkit.core.jsonfile import write_json
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_json(sys.argv[1], {"padding": "x" * 100_000})
except OSError as e:
    print(e.errno)
"""


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "state.json"
    write_json(path, {"kept": True})
    failed = subprocess.run([sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True, check=True)
    assert failed.stdout.strip() == "27", failed  # EFBIG: the file would outgrow the process's limit
    assert json.loads(path.read_text()) == {"kept": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
