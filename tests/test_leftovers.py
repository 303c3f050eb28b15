"""What a killed hub left running (labkit/hub/leftovers.py): found as the OS says (the attendee's uid and groups), never
as a process says, and only what the lab made is stopped. Real processes in a real sandbox (a namespace and cgroups
made as the spawner makes them), no hub: root only (skipped otherwise, saying why); everything made is removed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil
import pytest

from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_until
from labkit.hub import leftovers, sandbox

#: A uid of the lab's attendees no other test uses, and another that no hub of this test made a sandbox for.
ATTENDEE, OTHER = sandbox.ATTENDEE_UIDS.stop - 4, sandbox.ATTENDEE_UIDS.stop - 5
#: ``nobody``: a uid the hub does not manage.
NOBODY = 65534


def _sleeper(uid: int, env: dict[str, str], cgroups_of: int | None = None) -> subprocess.Popen:
    """``sleep 1000`` as ``uid`` in its own session, in ``cgroups_of``'s groups if given."""
    return subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "env", "-u",
                             "LABKIT_HUB_STATE", "setsid", "sleep", "1000"], env=env,
                            preexec_fn=(lambda: sandbox.join_cgroups(cgroups_of)) if cgroups_of else None)


@pytest.fixture
def left_lab(tmp_path):
    """A hub's state folder with attendee :data:`ATTENDEE`'s sandbox in it, as a killed hub leaves it."""
    if os.geteuid() != 0:
        pytest.skip("the leftovers test makes cgroups and runs processes as other uids: run it as root")
    try:
        sandbox.check()
    except LabkitError as exc:
        pytest.skip(f"no sandbox here: {exc}")
    state = tmp_path / "state"
    sandbox.prepare(ATTENDEE, sandbox.Limits(memory_mib=512, tasks=256), sandbox.private_root(state))
    started: list[subprocess.Popen] = []
    try:
        yield state, started
    finally:
        for proc in started:
            proc.kill()
            proc.wait(10)
        for pid in leftovers.in_groups(ATTENDEE):  # whatever the test left in the groups
            psutil.Process(pid).kill()
        wait_until(lambda: not leftovers.in_groups(ATTENDEE), 10, 0.1)
        sandbox.release(ATTENDEE)


def test_a_lab_process_that_dropped_the_hub_s_variable_is_found_by_uid_and_group_and_ended_others_left(left_lab):
    state, started = left_lab
    env = {"PATH": "/usr/bin:/bin", "LABKIT_HUB_STATE": str(Path(state).resolve())}
    started.append(_sleeper(ATTENDEE, env, cgroups_of=ATTENDEE))  # env -u LABKIT_HUB_STATE setsid sleep 1000
    started.append(_sleeper(NOBODY, env, cgroups_of=ATTENDEE))  # in the lab's groups, not the lab's uid
    # another attendee uid, no sandbox of this hub, its environment naming the hub's state as the old sweep looked for
    started.append(subprocess.Popen(["setpriv", f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups", "sleep",
                                     "1000"], env=env))
    assert wait_until(lambda: len(leftovers.in_groups(ATTENDEE)) == 2
                      and all(psutil.Process(p).name() == "sleep" for p in leftovers.in_groups(ATTENDEE)), 10, 0.05)
    lab = [pid for pid in leftovers.in_groups(ATTENDEE) if psutil.Process(pid).uids().real == ATTENDEE]
    nobody = [pid for pid in leftovers.in_groups(ATTENDEE) if psutil.Process(pid).uids().real == NOBODY]
    said = leftovers.stop_left_by(state, say=lambda line: None)
    assert f"  stopped uid {ATTENDEE}'s lab: 1 processes; its sandbox kept: 1 processes of another uid in its " \
           "groups" in said, said
    assert not psutil.pid_exists(lab[0]) or psutil.Process(lab[0]).status() == psutil.STATUS_ZOMBIE
    assert psutil.Process(nobody[0]).is_running() and started[2].poll() is None  # never signalled
    assert sandbox.exists(ATTENDEE)
