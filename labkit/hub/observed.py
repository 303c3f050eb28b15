"""What the instructor's live view observes of an attendee's broker, as root: never a label an attendee's lab wrote.

An attendee's lab publishes its broker's address in its state file, ``<home>/labkit/lab/broker.json`` (what
:mod:`labkit.lab` writes under the ``LABKIT_HOME`` the hub's spawner sets, :data:`labkit.hub.spawner.LABKIT_HOME`).
That file is the attendee's: it only says where to look. :func:`broker_status` says ``"up"`` only when

1. the state file is a regular file owned by the attendee (opened without following a symbolic link, without
   blocking on a FIFO, at most :data:`MAX_STATE` bytes: the service runs as root and the home is the attendee's),
2. a process of the attendee's Unix user (psutil) listens on the TCP port of its ``bootstrap`` address, and
3. that port on 127.0.0.1 answers a Kafka ApiVersions request (:func:`answers_kafka`: a broker answers it before
   any authentication, Kafka's protocol guide, KIP-511's version 3) within the deadline.

Otherwise ``"down"`` (a state file, but no listening broker of theirs or no answer) or ``"none"`` (no state file:
no broker started yet). Stdlib, psutil and labkit's wire client only (no JupyterHub), so tests run it anywhere.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

import psutil

from labkit.errors import LabkitError
from labkit.kafka.api_versions import broker_api_versions

#: Largest broker state file read, in bytes (one is about 200).
MAX_STATE = 64 * 1024


def state_file(home: Path | str) -> Path:
    """The broker state file of the attendee whose Unix home is ``home``."""
    return Path(home) / "labkit" / "lab" / "broker.json"


def read_state(path: Path, uid: int) -> dict | None:
    """The JSON object in ``path`` if it is a regular file owned by ``uid`` of at most :data:`MAX_STATE` bytes,
    opened without following a symbolic link nor blocking on a FIFO; else ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid or info.st_size > MAX_STATE:
            return None
        state = json.loads(os.read(fd, MAX_STATE))
        return state if isinstance(state, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def listeners() -> dict[int, int]:
    """``{TCP port: uid}`` of every listening TCP socket of this machine and the Unix user of the process holding it
    (psutil, in one sweep: about 15 ms for 90 processes here; as root, every user's sockets are visible)."""
    owners: dict[int, int] = {}
    for conn in psutil.net_connections("tcp"):
        if conn.status != psutil.CONN_LISTEN or conn.pid is None or conn.laddr.port in owners:
            continue
        try:
            owners[conn.laddr.port] = psutil.Process(conn.pid).uids().effective
        except psutil.Error:
            continue
    return owners


def answers_kafka(port: int, timeout_s: float = 1.0) -> bool:
    """Whether a Kafka broker on 127.0.0.1:``port`` answers an ApiVersions request within ``timeout_s`` seconds
    (:func:`labkit.kafka.api_versions.broker_api_versions`)."""
    try:
        return bool(broker_api_versions(f"127.0.0.1:{port}", timeout_s))
    except (LabkitError, OSError, ValueError, struct.error):  # no answer, or not Kafka's
        return False


def broker_status(home: Path | str, uid: int, owners: dict[int, int], timeout_s: float = 1.0) -> str:
    """``"up"``, ``"down"`` or ``"none"`` for the attendee of Unix home ``home`` and user id ``uid``, as the module
    docstring says; ``owners``: :func:`listeners`' answer, one sweep for every attendee. Blocking (at most about
    ``timeout_s`` seconds): call it from a thread in the service."""
    state = read_state(state_file(home), uid)
    if state is None:
        return "none"
    try:
        port = int(str(state["bootstrap"]).split(",")[0].rsplit(":", 1)[1])
    except (KeyError, IndexError, ValueError):
        return "down"
    return "up" if owners.get(port) == uid and answers_kafka(port, timeout_s) else "down"
