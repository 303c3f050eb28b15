"""The workshop hub's own life, on a hub of this module's (tests/test_hub.py's share another, which culls a lab idle
for 60 s: the room's first labs would wait that long for the last): a room's first sign-ins at once, then that hub
killed with SIGKILL, with the room's labs running, and started again. Apart from test_hub.py so the parallel suite
runs them on another worker, beside its shared hub's checks. Root and Debian's chromium, or skipped saying why
(tests/hubtools.py).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from labkit.core.waiting import wait_until
from labkit.hub import leftovers, names, observed, run, sandbox, users
from labkit_dev import drive
from tests.hubtools import (HUB_START_S, MEMORY_LIMIT_MIB, PROBE, TASK_LIMIT, as_attendee, ask_for_broker,
                            broker_state, broker_jvms, ensure_lab, join_to_server, skip_unless_hub_can_run,
                            wait_for_server)

#: How many attendees sign in at once in the room test.
ROOM = int(os.environ.get("LABKIT_HUB_ROOM", "8"))
#: The room hub's limits per attendee (the restarted hub gets the same).
LIMITS = {"LabSpawner": {"memory_mib": MEMORY_LIMIT_MIB, "tasks": TASK_LIMIT}}


@pytest.fixture(scope="module")
def room_hub(tmp_path_factory):
    """The module's hub (:func:`labkit_dev.drive.running_hub`'s dict, ROOM names). The SIGKILL test starts another on
    its state in the killed one's place and puts its ``url``, ``pid`` and process (``"restarted"``) here: the next
    test uses it, and it is stopped after."""
    skip_unless_hub_can_run()
    with drive.running_hub(tmp_path_factory.mktemp("room"), ROOM, start_timeout_s=HUB_START_S, extra=LIMITS) as hub:
        running = dict(hub)
        try:
            yield running
        finally:
            if "restarted" in running:
                drive.stop(running["restarted"])


def test_a_room_s_first_sign_ins_at_once_each_get_a_lab_of_their_own(room_hub):
    """ROOM attendees (8; LABKIT_HUB_ROOM=20 for a room of twenty: make test's other workers then starve it on two
    cores, its last JupyterLab servers not answering within the hub's 420 s) submit their first sign-in at the same
    moment: each gets their own Unix user, namespace, cgroups and broker, answering in their namespace only, and no
    neighbour reaches their JupyterLab's address."""
    _room_signs_in(room_hub, room_hub["names"])


def _room_signs_in(hub: dict, room: list[str]) -> None:
    """:func:`test_a_room_s_first_sign_ins_at_once_each_get_a_lab_of_their_own`'s body: ``room`` sign in at once."""
    from labkit_dev.browser import chromium, new_page

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


def test_a_hub_restarted_after_sigkill_stops_what_the_killed_one_left_running_and_says_so(room_hub):
    """JupyterHub killed with SIGKILL leaves its proxy, its services and the attendees' labs running (the room's, when
    its test ran first; at least one attendee's) and its nftables wall; the next hub on the same state folder stops
    each of them and removes the wall before it starts, and says so, and an attendee's next sign-in (their own password, kept) gets a fresh lab in a sandbox of its
    own."""
    import signal

    from labkit_dev.browser import chromium

    hub = room_hub
    name = hub["names"][0]
    entry = ensure_lab(hub, name)
    lab_users = [pwd.getpwnam(names.unix_name(n)) for n in hub["names"] if drive.user_exists(names.unix_name(n))]
    old_labs = {e.pw_name: users.processes_of(e.pw_uid) for e in lab_users if users.processes_of(e.pw_uid)}
    old_hub = leftovers.hub_processes(hub["state"])
    assert entry.pw_name in old_labs
    assert sorted(leftovers.command_of(p) for p in old_hub) == sorted(c.removeprefix("bin/")
                                                                     for c in leftovers.HUB_COMMANDS), old_hub
    killed = hub["pid"]
    os.kill(killed, signal.SIGKILL)
    assert wait_until(lambda: not psutil.pid_exists(killed) or psutil.Process(killed).status() == "zombie", 30)
    old_lab = [p for found in old_labs.values() for p in found]
    assert all(p.is_running() for p in old_lab) and len(leftovers.hub_processes(hub["state"])) == 3
    said: list[str] = []
    proc = None
    try:
        proc, settings = run.start(hub["password"], hub["admin_password"], Path(hub["state"]), hub["log"],
                                   admin=hub["admin"], say=said.append, extra=LIMITS)
        hub.update(url=settings.url, pid=proc.pid, restarted=proc)  # the next test's hub, stopped after the module
        assert said[0].startswith(f"A hub on {hub['state']} ended without stopping"), said
        for user, found in old_labs.items():
            assert f"  stopped {user}'s lab: {len(found)} processes" in said, said
        assert {line.split(" (pid")[0] for line in said if "the old hub's" in line} == {
            "  stopped the old hub's configurable-http-proxy", "  stopped the old hub's labkit.hub.liveview",
            "  stopped the old hub's jupyterhub_idle_culler"}, said
        assert f"  removed the wall it left (nftables table inet {hub['table']}): the new hub makes it again at its " \
               "first sign-in" in said, said
        stopped = [line for line in said if not line.startswith("warning: ")]  # run.start's own (kernel.pid_max)
        assert len(stopped) == 1 + len(old_labs) + 3 + 1, said
        assert not [p for p in old_lab + old_hub if p.pid != killed and p.is_running()]  # the hub: a zombie
        assert wait_until(lambda: drive.answers(f"{settings.url}hub/api"), HUB_START_S, 0.5)
        with chromium() as page:
            join_to_server(page, hub, name)
        ask_for_broker(entry, hub)
        state = broker_state(entry)
        (broker,) = broker_jvms(entry.pw_uid)
        assert broker.pid not in {p.pid for p in old_lab} and sandbox.exists(entry.pw_uid)
        assert str(broker.pid) in (sandbox.cgroups(entry.pw_uid)[0] / "cgroup.procs").read_text().split()
        assert observed.answers_kafka(int(state["bootstrap"].rsplit(":", 1)[1]), 5.0, sandbox.netns(entry.pw_uid))
    finally:  # whatever the killed hub left, if the test failed before the restart stopped it
        if proc is None:
            leftovers.stop_left_by(hub["state"], say=lambda line: None)


def test_a_room_s_end_of_day_writes_its_marks_csv_and_removes_its_users_accounts_and_marks(tmp_path):
    """A room on a real hub of its own: an attendee signs in (their Unix user made, tagged with the room), the
    instructor signs in with no page asked for and lands on the live view with no lab of theirs made; a mark is filed
    in the live view's store; the hub stopped, ``python -m labkit.hub end-room`` prints the CSV's path, whose rows are
    read back, and removes the attendee's Unix user and the room's folder (hub accounts, passwords, marks)."""
    import csv
    import signal
    import sys

    from labkit.hub import rooms
    from labkit.hub.verdicts import FILE_NAME, Store
    from labkit_dev.browser import chromium, new_page

    skip_unless_hub_can_run()
    cpu0 = time.process_time()
    with drive.running_hub(tmp_path / "room", 1, start_timeout_s=HUB_START_S, extra=LIMITS) as hub:
        (name,) = hub["names"]
        state = Path(hub["state"])
        try:
            with chromium() as page:
                join_to_server(page, hub, name)
                instructor = new_page(page.context.browser)
                drive.sign_in(instructor, hub["url"], hub["admin"], hub["admin_password"])
                instructor.wait_for_selector(f"#live th.who:text-is('{name}')", timeout=60_000)
                assert instructor.url.startswith(f"{hub['url']}services/liveview/"), instructor.url
            assert not drive.user_exists(names.unix_name(hub["admin"]))  # no lab of the instructor's, unasked
        finally:  # a lab made for the instructor (the failure this test looks for) is not left behind
            if drive.user_exists(names.unix_name(hub["admin"])):
                users.remove(hub["admin"], sandbox.private_root(state))
        entry = pwd.getpwnam(names.unix_name(name))
        assert users.room_of(entry) == rooms.record(state)["id"]
        store = Store(state / FILE_NAME)  # the live view's store, as it files a kernel's report
        store.record(name, "00", "exercise", "right")
        store.close()
        os.kill(hub["pid"], signal.SIGTERM)  # Ctrl-C's end: the hub stops every attendee's server
        assert wait_until(lambda: not psutil.pid_exists(hub["pid"])
                          or psutil.Process(hub["pid"]).status() == psutil.STATUS_ZOMBIE, 120, 0.5)
        marks_csv = tmp_path / "marks.csv"
        done = subprocess.run([sys.executable, "-m", "labkit.hub", "end-room", "--state", str(state), "--csv",
                               str(marks_csv)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"Marks and predictions of room {state.name}: {marks_csv} (1 rows)" in done.stdout, done.stdout
        with open(marks_csv, newline="") as f:
            rows = list(csv.DictReader(f))
        assert [(r["attendee"], r["notebook"], r["kind"], r["state"]) for r in rows] == [(name, "00", "exercise",
                                                                                         "right")], rows
        assert not drive.user_exists(entry.pw_name) and not sandbox.exists(entry.pw_uid)
        assert not state.exists()  # JupyterHub's database, the passwords, the marks
    print(f"end of a room's day: {time.process_time() - cpu0:.1f} s CPU (this process)")
