"""The workshop hub's own life, each test on a hub of its own (tests/test_hub.py's share one): a room's first sign-ins
at once, and a hub killed with SIGKILL then started again. Apart from test_hub.py so the parallel suite runs them on
another worker, beside its shared hub's checks. Root and Debian's chromium, or skipped saying why (tests/hubtools.py).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import psutil

from labkit.hub import drive, leftovers, names, observed, run, sandbox, users
from labkit.waiting import wait_until
from tests.hubtools import (HUB_START_S, MEMORY_LIMIT_MIB, PROBE, TASK_LIMIT, as_attendee, ask_for_broker,
                            broker_state, broker_jvms, ensure_lab, join_to_server, skip_unless_hub_can_run,
                            wait_for_server)

#: How many attendees sign in at once in the room test.
ROOM = int(os.environ.get("LABKIT_HUB_ROOM", "8"))


def test_a_room_s_first_sign_ins_at_once_each_get_a_lab_of_their_own(tmp_path):
    """ROOM attendees (8; LABKIT_HUB_ROOM=20 for a room of twenty: make test's other workers then starve it on two
    cores, its last JupyterLab servers not answering within the hub's 420 s) submit their first sign-in at the same
    moment: each gets their own Unix user, namespace, cgroups and broker, answering in their namespace only, and no neighbour reaches their JupyterLab's address. A hub
    of its own: the module's culls a lab idle for 60 s, and the first labs wait that long for the last."""
    skip_unless_hub_can_run()
    with drive.running_hub(tmp_path, ROOM, start_timeout_s=HUB_START_S,
                           extra={"LabSpawner": {"memory_mib": MEMORY_LIMIT_MIB, "tasks": TASK_LIMIT}}) as hub:
        _room_signs_in(hub, hub["names"])


def _room_signs_in(hub: dict, room: list[str]) -> None:
    """:func:`test_a_room_s_first_sign_ins_at_once_each_get_a_lab_of_their_own`'s body: ``room`` sign in at once."""
    from labkit.browser import chromium, new_page

    with chromium() as first:
        pages = [first] + [new_page(first.context.browser) for _ in room[1:]]  # a context (cookies) each
        for page in pages:  # the room's labs are not drawn: test_hub.py's three attendees look at theirs
            drive.without_lab_drawn(page)
        started = time.monotonic()
        for page, name in zip(pages, room):
            drive.join(page, hub, name)
        for page, name in zip(pages, room):
            wait_for_server(page, hub, name)
        print(f"{ROOM} first sign-ins at once: every lab's server answering {time.monotonic() - started:.1f} s after "
              "the first submit")
        for page in pages[1:]:
            page.close()
        entries = [pwd.getpwnam(names.unix_name(name)) for name in room]
        assert len({e.pw_uid for e in entries}) == ROOM
        for entry in entries:  # each starts its broker as its first notebook would, all at once
            ask_for_broker(entry, hub)
        for entry in entries:
            assert sandbox.exists(entry.pw_uid) and all(g.is_dir() for g in sandbox.cgroups(entry.pw_uid))
            state = broker_state(entry)
            (broker,) = broker_jvms(entry.pw_uid)
            assert str(broker.pid) in (sandbox.cgroups(entry.pw_uid)[0] / "cgroup.procs").read_text().split()
            assert observed.answers_kafka(int(state["bootstrap"].rsplit(":", 1)[1]), 5.0, sandbox.netns(entry.pw_uid))
        # each one's neighbour cannot reach the address its JupyterLab listens on (every port it listens on there)
        for entry, neighbour in zip(entries, entries[1:] + entries[:1]):
            address = sandbox.address(entry.pw_uid)
            out = subprocess.run(["ip", "netns", "exec", sandbox.netns(entry.pw_uid), "ss", "-Htln"],
                                 capture_output=True, text=True, check=True, timeout=30).stdout
            ports = [line.split()[3].rsplit(":", 1)[1] for line in out.splitlines() if address in line]
            assert ports, out
            tried = as_attendee(neighbour, hub, PROBE, str(os.getpid()), ",".join(f"{address}:{p}" for p in ports))
            assert tried.stdout.split() == ["denied"] + ["unreachable"] * len(ports), tried.stdout


def test_a_hub_restarted_after_sigkill_stops_what_the_killed_one_left_running_and_says_so(tmp_path):
    """JupyterHub killed with SIGKILL leaves its proxy, its services and the attendee's lab running; the next hub on
    the same state folder stops each of them before it starts and says so, and the attendee's next sign-in (their own
    password, kept) gets a fresh lab in a sandbox of its own."""
    import signal

    from labkit.browser import chromium

    skip_unless_hub_can_run()
    with drive.running_hub(tmp_path, 1, start_timeout_s=HUB_START_S) as hub:
        name = hub["names"][0]
        entry = ensure_lab(hub, name)
        old_lab, old_hub = users.processes_of(entry.pw_uid), leftovers.hub_processes(hub["state"])
        assert sorted(leftovers.command_of(p) for p in old_hub) == sorted(c.removeprefix("bin/")
                                                                         for c in leftovers.HUB_COMMANDS), old_hub
        os.kill(hub["pid"], signal.SIGKILL)
        assert wait_until(lambda: not psutil.pid_exists(hub["pid"]) or psutil.Process(hub["pid"]).status() == "zombie",
                          30)
        assert all(p.is_running() for p in old_lab) and len(leftovers.hub_processes(hub["state"])) == 3
        said: list[str] = []
        proc = None
        try:
            proc, settings = run.start(hub["password"], hub["admin_password"], Path(hub["state"]), hub["log"],
                                       admin=hub["admin"], say=said.append)
            assert said[0].startswith(f"A hub on {hub['state']} ended without stopping"), said
            assert f"  stopped {entry.pw_name}'s lab: {len(old_lab)} processes" in said, said
            assert {line.split(" (pid")[0] for line in said[2:5]} == {
                "  stopped the old hub's configurable-http-proxy", "  stopped the old hub's labkit.hub.liveview",
                "  stopped the old hub's jupyterhub_idle_culler"}, said
            assert not [p for p in old_lab + old_hub if p.pid != hub["pid"] and p.is_running()]  # the hub: a zombie
            again = {**hub, "url": settings.url}
            assert wait_until(lambda: drive.answers(f"{settings.url}hub/api"), HUB_START_S, 0.5)
            with chromium() as page:
                join_to_server(page, again, name)
            ask_for_broker(entry, again)
            state = broker_state(entry)
            (broker,) = broker_jvms(entry.pw_uid)
            assert broker.pid not in {p.pid for p in old_lab} and sandbox.exists(entry.pw_uid)
            assert str(broker.pid) in (sandbox.cgroups(entry.pw_uid)[0] / "cgroup.procs").read_text().split()
            assert observed.answers_kafka(int(state["bootstrap"].rsplit(":", 1)[1]), 5.0, sandbox.netns(entry.pw_uid))
        finally:  # the new hub, then whatever the killed one left if the test failed before the restart stopped it
            if proc is not None:
                drive.stop(proc)
            leftovers.stop_left_by(hub["state"], say=lambda line: None)
