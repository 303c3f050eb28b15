"""The hub's systemd backend (labkit.hub.unit) as the hub and the rehearsal guest read it: which backend a machine
gets, judged from a fake root, and the unit properties and command of an attendee's lab (pure functions; the units
themselves run in the stock Debian guest, bench/guest_contract.py, as no systemd runs here), and the hub's spawner
building that command when the machine is a systemd one. About 2 CPU s."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from labkit.core.errors import LabkitError
from labkit.doctor.checks import OK, WARN, check_hub
from labkit.hub import install, sandbox, unit

UID, HOME = sandbox.ATTENDEE_UIDS[0], "/home/lab-ann"


def machine(root: Path, systemd: bool = False, v2: tuple[str, ...] | None = None, v1: tuple[str, ...] = ()) -> Path:
    """A fake root: ``/run/systemd/system`` if ``systemd``, a cgroup v2 root listing ``v2`` controllers, cgroup v1
    hierarchies for ``v1``."""
    if systemd:
        (root / "run/systemd/system").mkdir(parents=True)
    cgroup = root / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    if v2 is not None:
        (cgroup / "cgroup.controllers").write_text(" ".join(v2) + "\n")
    for name in v1:
        (cgroup / name).mkdir()
        (cgroup / name / "cgroup.procs").write_text("1\n")
    return root


def properties(**limits) -> dict[str, str]:
    """The lab's properties as ``{key: value}`` (each key once)."""
    listed = unit.lab_properties(UID, HOME, sandbox.netns(UID), "/state/tmp/50000/info",
                                 **{"memory_mib": 2048, "tasks": 4096, "tmp_mib": 512, **limits})
    found = dict(p.split("=", 1) for p in listed)
    assert len(found) == len(listed)
    return found


def test_systemd_on_cgroup2_gets_the_unit_backend(tmp_path):
    assert unit.choose(machine(tmp_path, systemd=True, v2=("cpuset", "cpu", "io", "memory", "pids"))) == unit.SYSTEMD


def test_cgroup_v1_without_systemd_gets_todays_backend_and_so_does_a_hybrid_systemd(tmp_path):
    assert unit.choose(machine(tmp_path / "plain", v1=("memory", "cpu", "pids"))) == unit.CGROUP_V1
    assert unit.choose(machine(tmp_path / "hybrid", systemd=True, v1=("memory", "cpu", "pids"))) == unit.CGROUP_V1


def test_cgroup2_without_systemd_or_nothing_mounted_is_refused_naming_the_server_to_rent(tmp_path):
    for root in (machine(tmp_path / "v2", v2=("memory",)), machine(tmp_path / "none", v1=("memory", "cpu"))):
        with pytest.raises(LabkitError, match="Debian 12/13 or Ubuntu 24.04"):
            unit.choose(root)


def test_this_machine_without_systemd_runs_todays_backend_with_cgroup_v1_groups():
    if unit.choose("/") != unit.CGROUP_V1:
        pytest.skip("this machine is not a cgroup v1 one")
    assert sandbox.cgroups(UID) == [sandbox.CGROUP_ROOT / c / "labkit" / str(UID) for c in sandbox.CONTROLLERS]


def test_a_lab_unit_has_every_limit_and_isolation_of_the_contract():
    found = properties()
    assert {k: found[k] for k in ("MemoryMax", "MemorySwapMax", "OOMPolicy", "CPUWeight", "TasksMax")} == {
        "MemoryMax": "2048M", "MemorySwapMax": "0", "OOMPolicy": "continue", "CPUWeight": "100", "TasksMax": "4096"}
    assert {k: found[k] for k in ("PrivateIPC", "PrivateDevices", "ProtectSystem", "ProtectHome", "ProtectProc",
                                  "ProtectControlGroups", "NoNewPrivileges")} == {
        "PrivateIPC": "yes", "PrivateDevices": "yes", "ProtectSystem": "strict", "ProtectHome": "tmpfs",
        "ProtectProc": "invisible", "ProtectControlGroups": "yes", "NoNewPrivileges": "yes"}
    assert found["NetworkNamespacePath"] == f"/run/netns/{sandbox.netns(UID)}"  # the namespace sandbox.prepare makes
    assert found["BindPaths"] == HOME
    assert found["BindReadOnlyPaths"] == f"/state/tmp/50000/info:{sandbox.INFO_MOUNT}"


def test_a_lab_s_temporary_folders_are_sized_tmpfs_and_not_private_tmp():
    folders = dict(entry.split(":", 1) for entry in properties(tmp_mib=64)["TemporaryFileSystem"].split())
    assert {where: options.split(",")[0] for where, options in folders.items()} == {
        "/tmp": "size=64M", "/var/tmp": "size=64M", "/dev/shm": "size=64M", "/run/lock": f"size={sandbox.RUN_LOCK_MIB}M"}
    assert all("mode=1777" in options.split(",") for options in folders.values())
    assert "PrivateTmp" not in properties()  # on systemd 252 a folder of the root disk, no size limit


def test_the_lab_command_waits_for_its_unit_and_names_the_environment_never_its_values():
    argv = unit.run_command(UID, UID + 7, ["MemoryMax=64M"], ["JUPYTERHUB_API_TOKEN", "HOME"], HOME)
    assert argv[1:4] == ["--wait", "--pipe", "--collect"]
    assert {f"--unit=labkit-lab-{UID}.service", f"--slice={unit.SLICE}", f"--uid={UID}", f"--gid={UID + 7}",
            f"--working-directory={HOME}", "--property=MemoryMax=64M"} <= set(argv)
    assert argv[-3:] == ["--setenv=JUPYTERHUB_API_TOKEN", "--setenv=HOME", "--"]  # values from systemd-run's env


def test_what_a_systemd_machine_lacks_is_named_with_its_fix(tmp_path):
    root = machine(tmp_path, systemd=True, v2=("cpu", "memory"))
    backend, lacking, line = unit.survey(root, version=247)
    assert backend == unit.SYSTEMD
    assert [item for item in lacking if "systemd-run (" not in item] == [
        "systemd 248 or later (this is 247: PrivateIPC= came in 248; Debian 12, 13 and Ubuntu 24.04 have it)",
        f"the cgroup v2 pids controller (not in {root / 'sys/fs/cgroup/cgroup.controllers'})",
        "D-Bus's system bus, for systemd-run --wait (apt-get install dbus)"]
    assert line.startswith("systemd on cgroup v2: each attendee's lab a transient systemd unit; missing: systemd 248")


def test_the_doctor_says_which_hub_backend_runs_in_one_line(tmp_path):
    nothing = check_hub(machine(tmp_path / "laptop"), version=0)
    assert (nothing.name, nothing.status) == ("hub backend", WARN)
    assert "Debian 12/13 or Ubuntu 24.04" in nothing.detail + nothing.fix and not nothing.blocks
    root = machine(tmp_path / "server", systemd=True, v2=("cpu", "memory", "pids"))
    server = check_hub(root, version=252)
    assert server.detail.startswith("systemd on cgroup v2")
    assert server.status == (OK if not unit.missing(unit.SYSTEMD, root, 252) else WARN)  # systemd-run here or not


def test_the_live_view_reads_a_unit_s_cgroup_v2_memory(tmp_path):
    (tmp_path / "memory.current").write_text("209715200\n")
    (tmp_path / "memory.max").write_text(f"{2048 << 20}\n")
    assert sandbox.memory_of(tmp_path) == (209715200, 2048 << 20)
    (tmp_path / "memory.max").write_text("max\n")
    assert sandbox.memory_of(tmp_path) is None  # no limit: not a lab's group
    assert sandbox.memory_of(tmp_path / "gone") is None


#: Run in the hub's venv (JupyterHub is there only), with the checkout first on its path: LabSpawner.start on a machine
#: taken for a systemd one (unit.chosen), the attendee's user, sandbox and LocalProcessSpawner's Popen stubbed; prints
#: the command, the environment's names and the preexec_fn JupyterHub would have run it with.
SPAWN_ON_SYSTEMD = r"""
import asyncio, json, pwd
from types import SimpleNamespace
from jupyterhub.spawner import LocalProcessSpawner
from labkit.hub import sandbox, spawner, unit, users

entry = pwd.getpwnam("nobody")
unit.chosen = lambda: unit.SYSTEMD
users.create = lambda name, room="": entry
sandbox.prepare = lambda uid, limits, tmp_root: sandbox.address(sandbox.ATTENDEE_UIDS[0])
spawner.pwd = SimpleNamespace(getpwnam=lambda name: entry)
seen = {}


async def start(self):
    seen.update(cmd=[*self.cmd, *self.get_args()], env=sorted(self.get_env()), preexec=self.make_preexec_fn("ann"))
    return self.ip, self.port


LocalProcessSpawner.start = start
hub = SimpleNamespace(public_host="", api_url="http://10.127.0.1:8081/hub/api", base_url="/hub/")
lab = spawner.LabSpawner(user=SimpleNamespace(name="ann", url="/user/ann/", escaped_name="ann", id=1), hub=hub,
                         private_tmp="/state/tmp", cmd=["python3", "-m", "labkit.hub.singleuser"],
                         api_token="the-api-token-value", memory_mib=1024)
asyncio.run(lab.start())
print(json.dumps({"uid": entry.pw_uid, "cmd": seen["cmd"], "env": seen["env"], "preexec": seen["preexec"]}))
"""


def test_on_systemd_the_spawner_runs_the_lab_as_its_unit_with_the_environment_by_name():
    python = install.venv_python(install.shared_prefix())
    if not python.exists():
        pytest.skip("no hub venv here (make hub makes it)")
    done = subprocess.run([str(python), "-c", SPAWN_ON_SYSTEMD], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    cmd, uid = seen["cmd"], seen["uid"]
    assert cmd[1:4] == ["--wait", "--pipe", "--collect"] and f"--unit={unit.unit_name(uid)}" in cmd
    assert f"--property=NetworkNamespacePath=/run/netns/{sandbox.netns(uid)}" in cmd
    assert "--property=MemoryMax=1024M" in cmd
    assert cmd[cmd.index("--") + 1:] == ["python3", "-m", "labkit.hub.singleuser"]
    assert {f"--setenv={name}" for name in seen["env"]} == {a for a in cmd if a.startswith("--setenv=")}
    assert "JUPYTERHUB_API_TOKEN" in seen["env"] and not any("the-api-token-value" in a for a in cmd)
    assert seen["preexec"] is None  # no cgroup v1 join: the unit has the limits and runs as the attendee
