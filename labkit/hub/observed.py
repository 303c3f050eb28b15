"""What the instructor's live view observes of an attendee's broker, as root: never a label an attendee's lab wrote.

An attendee's lab publishes its broker's address in its state file, ``<home>/labkit/lab/broker.json`` (what
:mod:`labkit.lab.server` writes under the ``LABKIT_HOME`` the hub's spawner sets,
:data:`labkit.hub.spawner.LABKIT_HOME`). That file is the attendee's: it only says where to look. :func:`broker_status`
says ``"up"`` only when

1. the state file is a regular file owned by the attendee (opened without following a symbolic link, without
   blocking on a FIFO, at most :data:`MAX_STATE` bytes: the service runs as root and the home is the attendee's),
2. the TCP port of its ``bootstrap`` address, on 127.0.0.1 **of the attendee's own network namespace**
   (:mod:`labkit.hub.sandbox`: where only their lab's processes run, so what listens there is theirs) answers a Kafka
   ApiVersions request (:func:`answers_kafka`: a broker answers it before any authentication, Kafka's protocol guide,
   KIP-511's version 3) within the deadline. The request is sent from a thread that joined the namespace (pyroute2's
   ``netns.setns``: a namespace is a thread's, so the service's other threads stay in the machine's) and ends with it.

Otherwise ``"down"`` (an address, but no broker answering there in their namespace, or no namespace: their server
stopped) or ``"none"`` (no address: no state file, or one whose daemon is still starting the broker,
:func:`labkit.lab.server.starting_broker`). Stdlib, pyroute2 and labkit's wire client only (no
JupyterHub), so tests run it anywhere (without a namespace: the machine's loopback).
"""

from __future__ import annotations

import json
import os
import stat
import struct
import threading
from pathlib import Path

from pyroute2.netns import setns

from labkit.core.errors import LabkitError
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


def ready_state(home: Path | str, uid: int) -> dict | None:
    """The broker state file of the attendee of Unix home ``home`` and user id ``uid`` (read as :func:`read_state`
    reads) once it names the broker's address (``"bootstrap"``: the broker was ready), else ``None``."""
    state = read_state(state_file(home), uid)
    return state if state and "bootstrap" in state else None


def answers_kafka(port: int, timeout_s: float = 1.0, netns: str | None = None) -> bool:
    """Whether a Kafka broker on 127.0.0.1:``port`` answers an ApiVersions request within ``timeout_s`` seconds
    (:func:`labkit.kafka.api_versions.broker_api_versions`), in the network namespace named ``netns`` (``ip netns``;
    as root) if given, else in this process's."""
    if netns is None:
        return _answers(port, timeout_s)
    answered: list[bool] = []

    def probe() -> None:  # the namespace is this thread's alone, and ends with it
        try:
            setns(netns, flags=0)  # 0: never make a namespace that is not there
        except Exception:  # noqa: BLE001 (no such namespace, or not root: no answer from it)
            return
        answered.append(_answers(port, timeout_s))

    thread = threading.Thread(target=probe, name=f"probe {netns}", daemon=True)
    thread.start()
    thread.join(timeout_s + 5)
    return bool(answered and answered[0])


def _answers(port: int, timeout_s: float) -> bool:
    try:
        return bool(broker_api_versions(f"127.0.0.1:{port}", timeout_s))
    except (LabkitError, OSError, ValueError, struct.error):  # no answer, or not Kafka's
        return False


def broker_status(home: Path | str, uid: int, netns: str | None, timeout_s: float = 1.0) -> str:
    """``"up"``, ``"down"`` or ``"none"`` for the attendee of Unix home ``home``, user id ``uid`` and network namespace
    ``netns`` (None: this process's), as the module docstring says. Blocking (at most about ``timeout_s`` seconds):
    call it from a thread in the service."""
    state = ready_state(home, uid)
    if state is None:
        return "none"
    try:
        port = int(str(state["bootstrap"]).split(",")[0].rsplit(":", 1)[1])
    except (KeyError, IndexError, ValueError):
        return "down"
    return "up" if answers_kafka(port, timeout_s, netns) else "down"
