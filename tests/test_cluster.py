"""labkit.lab.spark_cluster: a real Spark standalone master and worker (JVMs), their UI, stop, bad input, the CLI.

A pipeline's micro-batches running in the cluster's executors is notebook 04's claim (part 4: the worker launched an
executor for each driver, every input exactly once): the suite observes it there, not again here.
Each cluster test takes 15 to 60 s on a busy 2-core machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.core.errors import PortInUseError
from labkit.core.procs import start_time
from labkit.lab.spark_cluster import SparkClusterError, StandaloneCluster, down, running_cluster

REPO = Path(__file__).resolve().parents[1]
def group_members(pgids: set[int]) -> list[int]:
    """Live processes (not zombies) whose process group is one of ``pgids``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) in pgids and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_pinned_master_port_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = StandaloneCluster(master_port=port, folder=tmp_path)
        with pytest.raises(PortInUseError, match=str(port)):
            cluster.start()
    assert cluster.pids == {}


def test_a_daemon_that_exits_during_start_names_its_log(tmp_path):
    with pytest.raises(SparkClusterError, match="master exited during start") as caught:
        StandaloneCluster(folder=tmp_path, daemon_memory="nonsense").start(timeout_s=60)
    assert str(tmp_path / "master.log") in str(caught.value)
    assert "Invalid maximum heap size" in str(caught.value)


def test_cli_up_status_down(tmp_path):
    env = {**os.environ, "LABKIT_HOME": str(tmp_path)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "labkit", "spark-cluster", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=150)

    up = cli("up")
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith("export SPARK_MASTER=spark://127.0.0.1:")
    url = up.stdout.strip().split("=", 1)[1]
    try:
        status = cli("status")
        assert url in status.stdout
        state = json.loads((tmp_path / "spark-cluster" / "state.json").read_text())
        pgids = {state["pid"], *state["pids"].values()}
        assert len(group_members(pgids)) >= 3  # serve, master, worker
    finally:
        down = cli("down")
    assert "stopped" in down.stdout
    assert group_members(pgids) == []
    assert "not running" in cli("status").stdout


def test_a_web_ui_that_hangs_up_is_waited_for_then_named_with_its_last_error(tmp_path):
    """The master's log says it leads before its UI's server answers (a fresh clone's run read ``/json`` at once and
    got ``RemoteDisconnected``): start() waits for ``/json`` to list every worker ALIVE. A socket that accepts and
    hangs up stands in for a UI still starting; the wait ends at its deadline with the URL and the last error."""
    import threading

    from labkit.core.waiting import Deadline

    server = socket.create_server(("127.0.0.1", 0))
    def hang_up() -> None:
        while True:
            try:
                server.accept()[0].close()
            except OSError:
                return
    threading.Thread(target=hang_up, daemon=True).start()
    cluster = StandaloneCluster(folder=tmp_path, ui=True)
    cluster.ui_port = server.getsockname()[1]
    cluster._procs = [("master", None, tmp_path / "master.log")]
    try:
        with pytest.raises(SparkClusterError, match=r"/json did not show 1 ALIVE worker.*(RemoteDisconnected|ConnectionReset)"):
            cluster._await_ui(Deadline(1.0))
    finally:
        cluster._procs = []
        server.close()


def test_not_ready_within_timeout_stops_the_cluster(tmp_path):
    cluster = StandaloneCluster(folder=tmp_path)
    with pytest.raises(SparkClusterError, match="master was not ready within 1 s") as caught:
        cluster.start(timeout_s=1)
    assert str(tmp_path / "master.log") in str(caught.value)
    assert not cluster.is_running and cluster.pids == {}


def test_a_state_file_pid_of_another_start_time_is_not_the_cluster_and_never_signalled(tmp_path, monkeypatch):
    """A state file whose ``serve`` pid now names another process (its start time differs: the pid was reused, e.g.
    after a reboot) is no running cluster, and ``down`` leaves that process alone."""
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    stranger = subprocess.Popen(["sleep", "600"])
    try:
        state = {"pid": stranger.pid, "master_url": "spark://127.0.0.1:7077", "pids": {}, "folder": str(tmp_path)}
        path = tmp_path / "spark-cluster" / "state.json"
        path.parent.mkdir()
        path.write_text(json.dumps({**state, "started": start_time(stranger.pid) - 3600}))
        assert running_cluster() is None
        assert down(timeout_s=5) is False
        assert stranger.poll() is None
        path.write_text(json.dumps({**state, "started": start_time(stranger.pid)}))
        assert running_cluster() == {**state, "started": start_time(stranger.pid)}
    finally:
        stranger.kill()
        stranger.wait()


def test_a_cluster_in_a_port_block_runs_a_job_and_stop_ends_every_process(tmp_path):
    """A real master and worker (UI on) come up alive; a driver's job runs in an executor; with ``LABKIT_PORT_RANGE``
    set (as the hub sets it), the master, worker, executor and driver listen (as the OS reports their JVMs' sockets)
    only on ports of the block, but for pyspark's secret-guarded py4j gateway: no master REST server on 6066, no
    kernel-picked worker port. ``stop()`` (the ``with`` block's end) leaves no process of the daemons' groups, and a
    second ``stop()`` does nothing."""
    from labkit.broker.ports import PORT_RANGE, free_port

    start = min(free_port(), PORT_RANGE.stop - 100)
    block = range(start, start + 100)
    job = ("import json, sys, time, urllib.request, psutil\nfrom labkit.lab.spark_cluster import StandaloneCluster\n"
           "from labkit.spark import spark_session\n"
           "t = time.monotonic()\n"
           "with StandaloneCluster(folder=sys.argv[1], ui=True) as c:\n"
           "    start_s = time.monotonic() - t\n"
           "    status = json.load(urllib.request.urlopen(c.ui_url + '/json', timeout=10))\n"
           "    s = spark_session(c.master_url, app_name='t')\n"
           "    assert s.range(1000).repartition(2).count() == 1000\n"
           "    daemons = [psutil.Process(pid) for pid in c.pids.values()]\n"
           "    jvms = {p for d in daemons for p in [d, *d.children(recursive=True)]}\n"
           "    jvms |= set(psutil.Process().children(recursive=True))\n"
           "    ports = {p.pid: sorted(c.laddr.port for c in p.net_connections('inet')\n"
           "                           if c.status == psutil.CONN_LISTEN) for p in jvms if p.name() == 'java'}\n"
           "    seen = [ports, s.sparkContext._gateway.gateway_parameters.port, status['status'],\n"
           "            [w['state'] for w in status['workers']], sorted(set(c.pids.values())), c.master_url, repr(c)]\n"
           "    s.stop()\n"
           "    t = time.monotonic()\n"
           "stop_s = time.monotonic() - t\n"
           "c.stop()  # idempotent\n"
           "print(json.dumps([*seen, repr(c), c.is_running, round(start_s, 1), round(stop_s, 1)]))\n")
    env = {**os.environ, "LABKIT_PORT_RANGE": f"{block.start}-{block.stop - 1}"}
    done = subprocess.run([sys.executable, "-c", job, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ports, gateway, alive, workers, pgids, url, running, stopped, is_running, start_s, stop_s = json.loads(
        done.stdout.strip().splitlines()[-1])
    print(f"\nstart() {start_s} s, stop() {stop_s} s")
    assert (alive, workers, len(pgids)) == ("ALIVE", ["ALIVE"], 2)
    assert url.startswith("spark://127.0.0.1:") and "running" in running
    assert "stopped" in stopped and not is_running and group_members(set(pgids)) == []
    listening = [p for p in ports.values() if p]
    assert len(listening) >= 4, ports  # master, worker, the app's executor, the driver
    assert {p for pids in listening for p in pids} - {gateway} <= set(block), (ports, block)