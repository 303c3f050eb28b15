"""The workshop hub (labkit/hub/, issue 38): a real JupyterHub on this machine; three attendees signed in through
headless Chromium run notebook 00 whole at the same time, each on a broker of their own, started as them, on ports only
they can reach, from a shared read-only cache; the idle culler ends every process of an idle attendee's lab; the
instructor's live view shows an attendee's verdicts as their kernel reports them, and refuses what it must.

The hub tests need root (they make Unix users, an nftables table and run JupyterHub as root) and Debian's chromium;
without either they are skipped, saying why (tests/hubtools.py). A room's first sign-ins at once and a hub restarted
after SIGKILL each need a hub of their own: they are in tests/test_hub_room.py, which the parallel suite runs on
another worker. One hub serves the whole module (started once: its CPU is the test's
largest cost). It does the hub's set-up itself (:func:`labkit.hub.install.install_shared`: once per machine, a few
minutes the first time, seconds after), runs on free ports with its own state folder and firewall table, a 60 s idle
timeout, and signs in names unique to the run (``t<random>a``..``f``), so parallel workers and second runs never
meet. Its teardown stops the hub (and with it the attendees' servers and its firewall table, which it checks) and
removes the Unix users, homes and processes of the names it made, and nothing else.

The checks that need neither root nor a hub (names, passwords, port, lock, configuration, the shared cache's lookup)
run everywhere.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from labkit.broker import runtime
from labkit.broker.ports import PORT_RANGE
from labkit.core.errors import LabkitError
from labkit.core.waiting import wait_until
from labkit.hub import config, firewall, install, names, observed, report, run, sandbox, users
from labkit.hub.config import HubSettings, configure
from labkit.hub.config import MEMORY_MIB, TASKS
from labkit.lab import connection, server as lab
from labkit.lessons import tour
from labkit_dev import drive
from labkit_dev.drive import sign_in as _sign_in
from tests.hubtools import (HUB_START_S, MEMORY_LIMIT_MIB, PROBE, TASK_LIMIT, as_attendee, ask_for_broker,
                            broker_state, broker_jvms, ensure_lab, lab_env, listening, skip_unless_hub_can_run,
                            join_to_server, wait_for_lab, wait_for_server)

RUN_ALL_S = 900  # notebook 00, Run All, three attendees at once on 2 cores
CULL_S = 300  # idle timeout 60 s, culler every 15 s, the hub's activity polled every 10 s; then the lab's ends
LAST_LINE = "All claims hold on the real broker."


# --- no root needed -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, refused", [
    ("ada", None), ("team-3", None), ("7up", None), ("a" * names.MAX_NAME, None),
    ("a" * (names.MAX_NAME + 1), "cannot be an attendee's name"), ("bad name", "cannot be an attendee's name"),
    ("-x", "cannot be an attendee's name"), ("émile", "cannot be an attendee's name"), ("", "cannot be"),
    ("root", "is an account of this machine"), ("daemon", "is an account of this machine"),
])
def test_names(name, refused):
    why = names.why_refused(name)
    assert (why is None) if refused is None else (refused in why), why


def test_a_lab_user_name_made_by_someone_else_is_refused(monkeypatch):
    other = pwd.struct_passwd(("lab-bob", "x", 4000, 4000, "Bob, by hand", "/home/lab-bob", "/bin/sh"))
    ours = pwd.struct_passwd(("lab-bob", "x", 4000, 4000, f"{names.COMMENT} bob", "/home/lab-bob", "/bin/bash"))
    for entry, refused in ((other, True), (ours, False)):
        monkeypatch.setattr(names.pwd, "getpwnam", lambda n, e=entry: e if n == "lab-bob" else (_ for _ in ()).throw(
            KeyError(n)))
        assert bool(names.why_refused("bob")) is refused


@pytest.mark.parametrize("password, admin, message", [
    (None, "a" * 32, "LABKIT_HUB_PASSWORD"), ("short", "a" * 32, "at least 8"),
    ("attendees", None, "LABKIT_HUB_ADMIN_PASSWORD"), ("attendees", "a" * 31, "at least 32"),
    ("a" * 32, "a" * 32, "must differ"),
])
def test_passwords_are_required(password, admin, message):
    with pytest.raises(LabkitError, match=message):
        run.check_passwords(password, admin)


def test_a_port_in_use_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(LabkitError, match="in use.*--port"):
            run.check_port("127.0.0.1", s.getsockname()[1])


def test_a_second_hub_on_the_same_state_is_refused(tmp_path):
    fd = run.lock_state(tmp_path / "state")
    try:
        assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
        with pytest.raises(LabkitError, match=f"already runs.*pid {os.getpid()}"):
            run.lock_state(tmp_path / "state")
    finally:
        os.close(fd)
    os.close(run.lock_state(tmp_path / "state"))  # free again once the first holder is gone


def test_not_root_is_refused(monkeypatch):
    monkeypatch.setattr(run.os, "geteuid", lambda: 1000)
    with pytest.raises(LabkitError, match="sudo make hub"):
        run.prepare()
    with pytest.raises(LabkitError, match="sudo make hub"):
        install.install_shared()


def test_no_npm_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    with pytest.raises(LabkitError, match="apt-get install npm"):
        install.install_proxy(tmp_path / "hub", say=lambda line: None)


def test_configuration(monkeypatch):
    from traitlets.config import Config

    monkeypatch.setenv("LABKIT_HUB_PASSWORD", "attendees")
    c = Config()
    configure(c, HubSettings(ip="127.0.0.1", port=1, hub_port=2, proxy_api_port=3, prefix="/opt/x", state="/s",
                             proxy="/p", cull_idle_s=600).__dict__)
    assert c.Spawner.cmd == ["/opt/x/venv/bin/python", "-m", "labkit.hub.singleuser"]
    assert c.Spawner.env_keep == ["LANG", "LC_ALL"] and c.Spawner.environment["PATH"].startswith("/opt/x/venv/bin:")
    assert c.LabAuthenticator.workshop_code == "attendees" and c.FirstUseAuthenticator.dbm_path == "/s/passwords.dbm"
    assert c.JupyterHub.template_paths == [str(Path(config.__file__).with_name("templates"))]
    assert c.JupyterHub.implicit_spawn_seconds == c.JupyterHub.template_vars["spawn_after_stop_seconds"] == 2
    assert "--timeout=600" in c.JupyterHub.services[0]["command"]
    assert c.JupyterHub.db_url == "sqlite:////s/jupyterhub.sqlite" and c.ConfigurableHTTPProxy.command == ["/p"]
    assert c.JupyterHub.default_url is config.landing and c.LabSpawner.room == ""  # the instructor: no lab unasked


def test_the_shared_venv_has_the_lab_and_pyspark_pins_but_not_the_test_tools():
    from labkit.spark.session import SPARK_VERSION

    pinned = install.pinned_packages()
    pins = {p.split("==")[0].lower() for p in pinned}
    assert {"jupyterlab", "jupyterhub", "jupyterhub-idle-culler", "confluent-kafka", "pyspark"} <= pins
    assert f"pyspark=={SPARK_VERSION}" in pinned  # the release of Spark's Kafka connector jars (notebook 04)
    assert not pins & {"pytest", "playwright"}


def test_a_prefix_under_a_folder_others_may_write_is_refused_naming_it(tmp_path):
    world = tmp_path / "world"
    world.mkdir()
    world.chmod(0o1777)  # as /tmp: anyone could make <prefix>/venv there first
    first = next(f for f in [*reversed(world.parents), world] if f.stat().st_mode & 0o002)  # /tmp, if tmp_path is in it
    with pytest.raises(LabkitError, match=f"cannot go in {world}/labkit: {first} is writable by others"):
        install.shared_prefix(world / "labkit")


@pytest.fixture
def root_folder():
    """A folder of root's, mode 0755, in /var/lib (root's and closed to others' writes all the way up), removed
    after; root only."""
    if os.geteuid() != 0:
        pytest.skip("the prefix's ownership checks make root-owned folders in /var/lib: run them as root")
    folder = Path("/var/lib") / f"labkit-test-{os.urandom(4).hex()}"
    folder.mkdir(mode=0o755)
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=True, timeout=60)


@pytest.mark.parametrize("mode, owner, refusal", [
    (0o775, 0, "is writable by its group"),
    (0o757, 0, "is writable by others"),
    (0o755, 65534, "is owned by uid 65534, not root"),
    (0o700, 0, "is not open to other users"),
])
def test_a_prefix_whose_folder_is_not_roots_alone_or_closed_to_attendees_is_refused(root_folder, mode, owner,
                                                                                     refusal):
    parent = root_folder / "parent"
    parent.mkdir()
    parent.chmod(mode)
    os.chown(parent, owner, owner)
    with pytest.raises(LabkitError, match=f"{parent} {refusal}"):
        install.shared_prefix(parent / "labkit")
    assert install.shared_prefix(root_folder / "labkit") == root_folder / "labkit"  # root's and open: accepted


def test_a_venv_the_set_up_did_not_make_is_refused(root_folder):
    python = install.venv_python(root_folder)
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    with pytest.raises(LabkitError, match="not made by the hub's set-up"):
        install.check_venv(root_folder)  # no record of it
    (root_folder / ".installed.json").write_text(json.dumps({"venv": install.SYSTEM_PYTHON}))
    install.check_venv(root_folder)  # recorded by the set-up: accepted
    python.unlink()
    python.symlink_to(install.SYSTEM_PYTHON)  # as venv makes it: a link (mode 777) to root's python3
    install.check_venv(root_folder)
    python.unlink()
    python.write_text("#!/bin/sh\n")
    os.chown(python, 65534, 65534)
    with pytest.raises(LabkitError, match=f"{python} is owned by uid 65534"):
        install.check_venv(root_folder)


def test_copied_files_lose_group_and_other_write_but_keep_execute(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    (source / "bin").mkdir(parents=True)
    for name, mode in (("open.py", 0o666), ("bin/run", 0o777), ("plain.txt", 0o644)):
        (source / name).write_text(name)
        (source / name).chmod(mode)
    install.copy_files(source, target, ["open.py", "bin/run", "plain.txt"])
    modes = {name: stat.S_IMODE((target / name).stat().st_mode) for name in ("open.py", "bin/run", "plain.txt")}
    assert modes == {"open.py": 0o644, "bin/run": 0o755, "plain.txt": 0o644}
    assert (target / "bin/run").read_text() == "bin/run"


def test_the_shared_cache_is_read_first_and_what_it_lacks_is_made_at_home(tmp_path):
    shared, home = tmp_path / "shared", tmp_path / "home"
    env = {"LABKIT_HOME": str(home), runtime.SHARED_CACHE_ENV: str(shared)}
    assert runtime.jar_dir(env, "4.4.0") == home / "kafka-4.4.0"  # not in the shared cache: made at home
    (shared / "kafka-4.4.0").mkdir(parents=True)
    assert runtime.jar_dir(env, "4.4.0") == home / "kafka-4.4.0"  # there, but unfinished (no .complete)
    (shared / "kafka-4.4.0" / ".complete").write_text("Kafka 4.4.0\n")
    assert runtime.jar_dir(env, "4.4.0") == shared / "kafka-4.4.0"
    assert runtime.cache_path("cds/x.jsa", env, marker=None) == home / "cds" / "x.jsa"
    (shared / "cds").mkdir()
    (shared / "cds" / "x.jsa").write_bytes(b"")
    assert runtime.cache_path("cds/x.jsa", env, marker=None) == shared / "cds" / "x.jsa"
    assert runtime.jar_dir({"LABKIT_HOME": str(home)}, "4.4.0") == home / "kafka-4.4.0"


def test_the_configuration_gives_each_attendee_the_cache_and_the_hubs_table(monkeypatch):
    from traitlets.config import Config

    c = Config()
    configure(c, HubSettings(ip="127.0.0.1", port=1, hub_port=2, proxy_api_port=3, prefix="/opt/x", state="/s",
                             proxy="/p").__dict__)
    assert c.LabSpawner.shared_cache == "/opt/x/cache" == str(install.cache_dir(Path("/opt/x")))
    assert c.LabSpawner.firewall_table == firewall.table_name("/s")
    # each attendee's lab: in its namespace, reaching the hub's API and the live view on the gateway only, limited
    liveview = int(c.Spawner.environment[report.URL_ENV].split(":")[2].split("/")[0])
    assert c.JupyterHub.hub_ip == sandbox.GATEWAY and c.Spawner.environment[report.URL_ENV].startswith(
        f"http://{sandbox.GATEWAY}:")
    assert liveview in firewall.HUB_PORTS and c.LabSpawner.private_tmp == "/s/tmp"
    assert (c.LabSpawner.memory_mib, c.LabSpawner.tasks) == (MEMORY_MIB, TASKS)


def _daemon(home: Path, **env: str) -> subprocess.Popen:
    """The attendee's broker daemon as their server starts it (``labkit.hub.singleuser serve-broker``), for ``home``."""
    from labkit.hub import singleuser

    singleuser.prepare(home)
    return subprocess.Popen([sys.executable, "-m", "labkit.hub.singleuser", "serve-broker"], stderr=subprocess.PIPE,
                            text=True, env={**{k: v for k, v in os.environ.items() if k != "LABKIT_BOOTSTRAP"},
                                            "LABKIT_HOME": str(home), **env})


def _starting(home: Path) -> dict | None:
    state = observed.read_state(home / "lab" / "broker.json", os.getuid())
    return state if state and "bootstrap" not in state else None


def test_the_attendee_s_broker_starts_when_their_first_kernel_asks_and_not_before(tmp_path):
    """Their daemon says "starting" and starts no JVM until a kernel's labkit.connect asks; that kernel waits and gets
    the lab broker (no broker of its own); SIGTERM stops it and removes its state."""
    daemon = _daemon(tmp_path)
    try:
        assert wait_until(lambda: _starting(tmp_path) or daemon.poll() is not None, 60)
        time.sleep(2.0)  # held: a JVM would have started by now (the old daemon's within a second of its state)
        assert _starting(tmp_path)["pid"] == daemon.pid and not psutil.Process(daemon.pid).children(recursive=True)
        kernel = subprocess.run([sys.executable, "-c", "import labkit; print(labkit.connect())"], capture_output=True,
                                text=True, timeout=lab.BROKER_READY_S + 60,
                                env={**{k: v for k, v in os.environ.items() if k != "LABKIT_BOOTSTRAP"},
                                     "LABKIT_HOME": str(tmp_path), "JUPYTERHUB_USER": "ada"})  # as the hub's
        state = json.loads((tmp_path / "lab" / "broker.json").read_text())
        assert "The lab broker is starting: waiting for it" in kernel.stdout, kernel.stdout + kernel.stderr
        assert f"at {state['bootstrap']} ({connection.HUB_BROKER})" in kernel.stdout, kernel.stdout
    finally:
        daemon.terminate()
        daemon.wait(60)
    assert not (tmp_path / "lab" / "broker.json").exists()


def test_a_broker_that_does_not_start_leaves_the_attendee_a_note(tmp_path):
    """The attendee still has JupyterLab (the broker's daemon runs beside it), with a note in their file browser
    saying why; the daemon's state file goes, so a kernel waits for nothing more and starts a broker of its own."""
    from labkit.hub import singleuser

    daemon = _daemon(tmp_path, JAVA_HOME=str(tmp_path / "no-java"))  # the broker fails to start: no Java there
    assert wait_until(lambda: _starting(tmp_path) or daemon.poll() is not None, 60)
    (tmp_path / "lab" / lab.wanted_file().name).touch()  # a kernel asks (labkit.lab.server.want_broker)
    _, err = daemon.communicate(timeout=120)
    assert daemon.returncode == 1 and "the lab broker did not start" in err, err
    note = (tmp_path / "work" / singleuser.FAILED_NOTE).read_text()
    assert "did not start" in note and "No Java found" in note and "Start My Server" in note, note
    assert not (tmp_path / "lab" / "broker.json").exists()


# --- a real hub, as root --------------------------------------------------------------------------------------------

def _tree(folder: Path) -> dict[str, tuple]:
    """Every path under ``folder`` with its mode, owner, size and modification time: what a write would change."""
    return {str(p): (p.lstat().st_mode, p.lstat().st_uid, p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in [folder, *folder.rglob("*")]}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A running hub with a 60 s idle timeout (:func:`labkit_dev.drive.running_hub`): ``{"url", "password", "names",
    "log", "prefix", "admin", "admin_password", "table", "cache", "cache_tree"}``. The names are this run's; those whose
    Unix user did not exist before are removed after, with their homes and processes."""
    skip_unless_hub_can_run()
    with drive.running_hub(tmp_path_factory.mktemp("hub"), 6, cull_idle_s=60, start_timeout_s=HUB_START_S,
                           extra={"JupyterHub": {"last_activity_interval": 10},
                                  "LabSpawner": {"memory_mib": MEMORY_LIMIT_MIB, "tasks": TASK_LIMIT}}) as running:
        assert all(names.why_refused(n) is None for n in running["names"])
        print(f"set-up and hub start: {running['setup_s']:.1f} s")
        yield {**running, "cache_tree": _tree(running["cache"]), "idle": _left_idle(running, running["names"][3])}


def _left_idle(hub: dict, name: str) -> dict:
    """Sign ``name`` in, start their lab broker as a first kernel does, close the browser and leave the lab idle, for
    :func:`test_the_idle_culler_ends_every_process_of_the_lab_and_a_visit_to_it_starts_it_again`: done as the hub
    starts, so that the idle timeout runs out while the module's other tests run (the suite's longest worker, issue 52).
    ``{"name", "entry": pwd entry, "since": monotonic s the browser closed, "jvms_before": broker JVMs before the ask,
    "jvms": after, "rss", "pss": MiB, "kinds": process names}``."""
    from labkit_dev.browser import chromium

    with chromium() as page:
        submitted = join_to_server(page, hub, name)
        print(f"{name}: sign-in to their server answering {time.monotonic() - submitted:.1f} s")
    entry = pwd.getpwnam(names.unix_name(name))
    before = len(broker_jvms(entry.pw_uid))
    ask_for_broker(entry, hub)
    broker_state(entry)
    rss, pss = _memory_mib(entry.pw_uid)
    return {"name": name, "entry": entry, "since": time.monotonic(), "jvms_before": before, "jvms": len(broker_jvms(entry.pw_uid)),
            "rss": rss, "pss": pss, "kinds": sorted({p.name() for p in users.processes_of(entry.pw_uid)})}


def _memory_mib(uid: int) -> tuple[float, float]:
    """Resident and proportional set sizes (MiB) summed over ``uid``'s processes."""
    found = users.memory_mib(uid)
    return sum(rss for _, rss, _ in found), sum(pss for _, _, pss in found)


#: Run as an attendee with the shared venv's Python: produce one record to ``argv[1]`` (a bootstrap address) with
#: confluent-kafka, the lab's own client, after creating a topic; prints what happened, as JSON.
PRODUCE = """
import json, sys, uuid
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
errors, delivered = [], []
conf = {"bootstrap.servers": sys.argv[1], "error_cb": lambda e: errors.append(str(e)), "socket.timeout.ms": 10000}
topic, admin = f"hub-probe-{uuid.uuid4().hex[:8]}", AdminClient(conf)
try:
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=10)[topic].result(timeout=20)
except KafkaException as exc:
    errors.append(str(exc))
producer = Producer({**conf, "message.timeout.ms": 10000})
producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err is None))
producer.flush(20)
print(json.dumps({"delivered": delivered == [True], "errors": sorted(set(errors))}))
"""

def test_three_attendees_run_notebook_00_at_once_each_on_a_broker_only_they_reach(hub):
    from playwright.sync_api import expect

    from labkit_dev.browser import chromium, new_page

    attendees = hub["names"][:3]
    with chromium() as first:
        pages = [first] + [new_page(first.context.browser) for _ in attendees[1:]]
        submitted = {name: drive.join(page, hub, name) for page, name in zip(pages, attendees)}
        for page, name in zip(pages, attendees):
            wait_for_lab(page, hub, name)
            print(f"{name}: sign-in to the file browser {time.monotonic() - submitted[name]:.1f} s")
        # the lab's JupyterLab settings reach the attendee's JupyterLab (no "Jupyter news" prompt)
        settings = pages[0].request.get(f"{hub['url']}user/{attendees[0]}/lab/api/settings/"
                                        "@jupyterlab/apputils-extension:notification").json()
        assert settings["schema"]["properties"]["fetchNews"]["default"] == "false", settings
        # ... nor its page configuration: no page asked the server for a build check (``node yarn.js`` each time)
        assert "/lab/api/build" not in hub["log"].read_text()

        started = time.monotonic()
        # each opens notebook 00 from the file browser and runs it whole (Run > Run All Cells)
        for page, name in zip(pages, attendees):
            drive.open_from_file_browser(page, hub["url"], name, "00_tour.ipynb")
            drive.run_all(page, name)
        for page, name in zip(pages, attendees):
            stopped = drive.wait_for_run(page, name, RUN_ALL_S)
            assert stopped is None, f"{name}'s notebook 00 {stopped}"
            expect(page.locator(".jp-OutputArea-output", has_text=LAST_LINE)).to_be_visible()
            # the notebook used the attendee's lab broker, not one of its own
            expect(page.locator(".jp-OutputArea-output", has_text=f"({connection.HUB_BROKER})")).to_be_visible()
        print(f"notebook 00, Run All, three attendees at once: {time.monotonic() - started:.1f} s")
        # one kernel per opened notebook: each attendee's JupyterLab made one session (Jupyter Server logs each POST),
        # none started beside it and shut down (drive.run_all and wait_for_run ask nothing twice)
        log = hub["log"].read_text()
        made = {name: len(re.findall(rf" 201 POST /user/{name}/api/sessions\b", log)) for name in attendees}
        assert made == dict.fromkeys(attendees, 1), made

        entries = {name: pwd.getpwnam(names.unix_name(name)) for name in attendees}
        brokers = {}
        for name, entry in entries.items():
            assert names.is_lab_user(entry) and entry.pw_uid in sandbox.ATTENDEE_UIDS and sandbox.exists(entry.pw_uid)
            home = os.stat(entry.pw_dir)
            assert (stat.S_IMODE(home.st_mode), home.st_uid) == (0o700, entry.pw_uid)
            assert os.stat(os.path.join(entry.pw_dir, "labkit", "work", "00_tour.ipynb")).st_uid == entry.pw_uid
            # exactly one broker of their own, as them, in their cgroups, answering in their namespace, from the
            # shared read-only cache
            found = broker_jvms(entry.pw_uid)
            assert len(found) == 1, f"{name} has {len(found)} brokers: {[p.cmdline()[-2:] for p in found]}"
            broker = brokers[name] = found[0]
            for group in sandbox.cgroups(entry.pw_uid):
                assert str(broker.pid) in (group / "cgroup.procs").read_text().split(), group
            state = json.loads(Path(entry.pw_dir, "labkit", "lab", "broker.json").read_text())
            port = int(state["bootstrap"].rsplit(":", 1)[1])
            assert port in listening(entry.pw_uid)
            assert observed.answers_kafka(port, 5.0, sandbox.netns(entry.pw_uid))
            cmdline = " ".join(broker.cmdline())
            assert f"{hub['cache']}/kafka-" in cmdline and f"-XX:SharedArchiveFile={hub['cache']}/cds/" in cmdline
            assert "-Xmx256m" in broker.cmdline() and "-XX:+UseSerialGC" in broker.cmdline()  # the hub's small heap
            lab_files = Path(entry.pw_dir, "labkit", "lab")  # from the notebook's request to the broker's address
            started_s = os.stat(lab_files / "broker.json").st_mtime - os.stat(lab_files / "broker.wanted").st_mtime
            rss, pss = _memory_mib(entry.pw_uid)
            print(f"{name}: broker start {started_s:.1f} s; after notebook 00: RSS {rss:.0f} MiB, PSS {pss:.0f} MiB "
                  f"({len(users.processes_of(entry.pw_uid))} processes)")
        assert _tree(hub["cache"]) == hub["cache_tree"], "an attendee's lab wrote into the shared cache"
        assert all(not (mode & 0o022) and owner == 0 for mode, owner, *_ in hub["cache_tree"].values())

        # each chooses an answer with the widget's buttons (notebook 00's opening question), after the run: the widget
        # keeps it as chosen after the run, and the kernel reports no prediction (issue 66)
        chosen = dict(zip(attendees, ("gone", "nobody", "uncommitted_only")))
        for page, name in zip(pages, attendees):
            page.locator(".widget-radio-box label", has_text=tour.QUESTION.choices[chosen[name]]).click()
            page.locator("button.jupyter-button", has_text="Lock in").click()
            expect(page.locator(".widget-html", has_text="Chosen after the run:")).to_be_visible()

        # the instructor's live view: a row per attendee with notebook 00's verdicts, as their kernels reported them
        # (an exercise verdict, whichever it was, and the claims held), and no prediction counted for notebook 00: a
        # choice made after the run is none (the counting itself: tests/test_hub_liveview.py's real kernel)
        instructor = new_page(first.context.browser)
        _sign_in(instructor, hub["url"], hub["admin"], hub["admin_password"], next_path="/services/liveview/")
        for name in attendees:
            drive.wait_for_live_marks(instructor, name, "^E…C✓$")  # its exercise left unanswered, its claims held
        assert instructor.evaluate(drive.LIVE_PREDICTIONS_JS, "00") == {}, instructor.inner_text("body")[:2000]

    # A cannot read B's files nor signal B's broker (real PermissionErrors), nor connect to any port B's lab listens on
    # (B's address: stopped by the wall; 127.0.0.1 in A's namespace: nothing of B's is there)
    a, b = (entries[n] for n in attendees[:2])
    b_lab = os.path.join(b.pw_dir, "labkit", "lab")
    b_ports, a_ports = listening(b.pw_uid), listening(a.pw_uid)
    addresses = [f"{sandbox.address(b.pw_uid)}:{p}" for p in sorted(b_ports)]
    addresses += [f"127.0.0.1:{p}" for p in sorted(b_ports - a_ports)]
    tried = as_attendee(a, hub, PROBE, str(brokers[attendees[1]].pid), ",".join(addresses), b.pw_dir, b_lab,
                os.path.join(b_lab, "broker.json")).stdout.split()
    assert tried == ["denied"] * 4 + ["unreachable"] * len(b_ports) + ["refused"] * len(b_ports - a_ports), tried
    assert brokers[attendees[1]].is_running()
    # ... nor produce with a real client; B's own producer gets through, and A's to its own broker too
    b_bootstrap = json.loads(Path(b_lab, "broker.json").read_text())["bootstrap"]
    a_bootstrap = json.loads(Path(a.pw_dir, "labkit", "lab", "broker.json").read_text())["bootstrap"]
    b_from_a = b_bootstrap.replace("127.0.0.1", sandbox.address(b.pw_uid))
    a_to_b = json.loads(as_attendee(a, hub, PRODUCE, b_from_a).stdout)
    assert not a_to_b["delivered"] and any("unreachable" in e or "No route to host" in e for e in a_to_b["errors"]), \
        a_to_b
    assert json.loads(as_attendee(b, hub, PRODUCE, b_bootstrap).stdout)["delivered"]
    assert json.loads(as_attendee(a, hub, PRODUCE, a_bootstrap).stdout)["delivered"]


#: Run as attendee A: listen on every port of the lab's range its namespace has free, print how many, accept (and
#: count) connections until a line comes on stdin, then print that count: B's clients, if A could squat B's ports.
SQUAT = """
import selectors, socket, sys
from labkit.broker.ports import PORT_RANGE
watch = selectors.DefaultSelector()  # epoll: select() stops at fd 1024
for port in PORT_RANGE:
    try:
        watch.register(socket.create_server(("127.0.0.1", port)), selectors.EVENT_READ)
    except OSError:
        pass
print(len(watch.get_map()), flush=True)
watch.register(sys.stdin, selectors.EVENT_READ)
reached = 0
while True:
    for key, _ in watch.select():
        if key.fileobj is sys.stdin:
            print(reached)
            sys.exit(0)
        key.fileobj.accept()[0].close()
        reached += 1
"""

#: Run as an attendee: a kernel of their own (ipykernel, as JupyterLab starts one), left running; prints its
#: connection file (ports on 127.0.0.1).
KERNEL = """
import os, subprocess, sys, time
path = "/tmp/probe-kernel.json"
subprocess.Popen([sys.executable, "-m", "ipykernel_launcher", "-f", path], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 120
while not (os.path.exists(path) and os.path.getsize(path)) and time.monotonic() < deadline:
    time.sleep(0.2)
time.sleep(1)
print(open(path).read())
"""

#: Run as an attendee: take memory 64 MiB at a time (each page written) up to ``argv[1]`` MiB; prints "survived" if
#: it got there.
HOG = """
import sys
chunks = []
for _ in range(int(sys.argv[1]) // 64):
    chunk = bytearray(64 * 2**20)
    chunk[::4096] = b"x" * len(chunk[::4096])
    chunks.append(chunk)
print("survived")
"""

#: Run as an attendee: start ``sleep`` processes until the system refuses one; prints how many ran and the errno.
FORK_BOMB = """
import os
pids = []
try:
    while len(pids) < 100000:
        pids.append(os.posix_spawn("/bin/sleep", ["sleep", "300"], {}))
    print(len(pids), 0)
except OSError as exc:
    print(len(pids), exc.errno)
finally:
    for pid in pids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
"""


def test_an_attendee_cannot_squat_eavesdrop_or_starve_another_and_leaves_nothing_when_removed(hub):
    from labkit_dev.browser import chromium, new_page

    a_name, b_name = hub["names"][:2]
    with chromium() as a_page:  # each lab open in a browser all along, as an attendee's is: never culled as idle
        a, b = ensure_lab(hub, a_name, a_page), ensure_lab(hub, b_name, new_page(a_page.context.browser))

        # A binds every free port of the lab's range in its namespace while B restarts its broker: B's broker comes back
        # on a port of that range, and B's producer reaches it, not A (no connection reached A's sockets)
        squat = subprocess.Popen([*sandbox.enter_command(a.pw_uid, a.pw_gid, sandbox.private_root(hub["state"])),
                                  os.path.join(hub["prefix"], "venv", "bin", "python"), "-c", SQUAT, "60"],
                                 preexec_fn=lambda: sandbox.join_cgroups(a.pw_uid), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env={"PATH": "/usr/bin:/bin", "HOME": a.pw_dir})
        held = int(squat.stdout.readline())
        assert held > len(PORT_RANGE) - 100, held  # all but A's own lab's ports
        (old_broker,) = broker_jvms(b.pw_uid)
        old_broker.terminate()
        old_broker.wait(60)
        restarted = as_attendee(b, hub, "from labkit.lab import server as lab; print(lab.start_broker(120))", env=lab_env(b, hub))
        b_bootstrap = restarted.stdout.split()[-1]
        assert int(b_bootstrap.rsplit(":", 1)[1]) in PORT_RANGE
        assert json.loads(as_attendee(b, hub, PRODUCE, b_bootstrap).stdout)["delivered"]
        reached, _ = squat.communicate("stop\n", timeout=60)
        assert squat.returncode == 0 and int(reached) == 0, (squat.returncode, reached)

        # A cannot reach B's kernel: its ports listen on 127.0.0.1 of B's namespace (B's own client connects), and from
        # A's they are someone else's or nothing, and B's address is walled
        b_kernel = json.loads(as_attendee(b, hub, KERNEL).stdout)
        iopub = [f"127.0.0.1:{b_kernel['iopub_port']}", f"{sandbox.address(b.pw_uid)}:{b_kernel['iopub_port']}"]
        assert as_attendee(b, hub, PROBE, str(os.getpid()), iopub[0]).stdout.split() == ["denied", "connected"]
        if b_kernel["iopub_port"] not in listening(a.pw_uid):
            assert as_attendee(a, hub, PROBE, str(os.getpid()), ",".join(iopub)).stdout.split() == ["denied", "refused",
                                                                                             "unreachable"]

        # A past its memory limit loses its own process (the OOM killer, inside A's group); A's broker, B's lab and the
        # hub carry on
        kills = sandbox.oom_kills(a.pw_uid)
        hog = as_attendee(a, hub, HOG, str(2 * MEMORY_LIMIT_MIB), check=False)
        assert hog.returncode == -9 and "survived" not in hog.stdout, (hog.returncode, hog.stdout, hog.stderr[-500:])
        assert sandbox.oom_kills(a.pw_uid) > kills
        # ... and A's notebook hears of it (labkit.hub.memory_notice): the hub's next poll writes it where A's lab reads it
        def seen_in_a_s_lab() -> dict:
            return json.loads(as_attendee(a, hub, "print(open('/run/labkit/memory.json').read())").stdout)
        assert wait_until(lambda: seen_in_a_s_lab()["oom_kills"] > kills, 60, 2.0), seen_in_a_s_lab()
        assert seen_in_a_s_lab()["limit_mib"] == MEMORY_LIMIT_MIB
        assert len(broker_jvms(a.pw_uid)) == 1 and observed.answers_kafka(int(b_bootstrap.rsplit(":", 1)[1]), 5.0,
                                                                         sandbox.netns(b.pw_uid))
        assert drive.answers(f"{hub['url']}hub/api")

        # A's fork bomb stops at A's task limit; B still starts processes (its producer)
        started, errno = map(int, as_attendee(a, hub, FORK_BOMB).stdout.split())
        assert errno == 11 and started < TASK_LIMIT, (started, errno)  # EAGAIN: pids.max reached
        assert json.loads(as_attendee(b, hub, PRODUCE, b_bootstrap).stdout)["delivered"]
        print(f"A held {held} ports while B's broker restarted; A's hog killed at {MEMORY_LIMIT_MIB} MiB; A's fork bomb "
              f"stopped at {started} processes")

        # A's /tmp and /run/lock are its lab's own (tmpfs, gone with it): nothing reaches the machine's; removing A
        # leaves no file of A's uid in its private folder nor the machine's shared writable ones
        as_attendee(a, hub, "open('/tmp/left', 'w').write('x'); open('/run/lock/left-by-a', 'w').write('x')")
        assert not Path("/run/lock/left-by-a").exists()
        # A closes their page; the instructor (a page of their own) stops A's server (the admin page's call), then
        # removes A
        browser = a_page.context.browser
        a_page.close()
        assert _admin_api(new_page(browser), hub, "DELETE", f"users/{a_name}/server") in (202, 204)
        assert wait_until(lambda: not users.processes_of(a.pw_uid) and not sandbox.exists(a.pw_uid), 120, 1.0)
        users.remove(a_name, sandbox.private_root(hub["state"]))
        assert not drive.user_exists(a.pw_name) and not sandbox.exists(a.pw_uid) and not users.processes_of(a.pw_uid)
        left = [str(path) for path in sandbox.owned_by(a.pw_uid)]
        assert not left and not sandbox.private_tmp(sandbox.private_root(hub["state"]), a.pw_uid).exists(), left


#: Run as an attendee in their lab: a ``sleep`` that drops the hub's variable and leaves its session (issue 63), and
#: stays (``setsid`` forks it when it leads its group already, so the test finds it by name).
LEAVE_SESSION = """
import subprocess
subprocess.Popen(["env", "-u", "LABKIT_HUB_STATE", "setsid", "sleep", "1000"], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def test_an_attendee_s_jupyterlab_killed_from_their_own_lab_leaves_nothing_of_their_lab_running(hub):
    """JupyterHub stops a server whose process ended by itself without calling the spawner's ``stop``
    (``User.stop``): the lab's other processes, a broker and one that left its session among them, and its namespace
    stayed (the room rehearsal: a CPU burn outlived its JupyterLab's OOM kill). The hub's post-stop hook ends them
    (:meth:`labkit.hub.spawner.LabSpawner.run_post_stop_hook`) once its poll sees the server gone."""
    entry = ensure_lab(hub, hub["names"][1])
    uid = entry.pw_uid
    as_attendee(entry, hub, LEAVE_SESSION)
    assert wait_until(lambda: [p for p in users.processes_of(uid) if p.name() == "sleep"], 10, 0.2)
    assert broker_jvms(uid)
    # their server: labkit.hub.singleuser replaced itself with jupyterhub-singleuser (os.execv)
    (server,) = [p for p in users.processes_of(uid) if any("jupyterhub-singleuser" in a for a in p.cmdline())]
    as_attendee(entry, hub, f"import os, signal; os.kill({server.pid}, signal.SIGKILL)")  # from their own lab
    assert wait_until(lambda: not users.processes_of(uid) and not sandbox.exists(uid), 180, 1.0), [
        p.cmdline() for p in users.processes_of(uid)]
    assert f"Ended {entry.pw_name}'s lab" in hub["log"].read_text()


def _admin_api(page, hub: dict, method: str, path: str) -> int:
    """Call the hub's REST API ``path`` (after ``hub/api/``) as the instructor, signed in on ``page``, as the admin page
    does (its cookie and the ``_xsrf`` one); returns the HTTP status."""
    return _admin_call(page, hub, method, path).status


def _admin_call(page, hub: dict, method: str, path: str):
    """:func:`_admin_api`'s call itself: Playwright's APIResponse (``.status``, ``.json()``)."""
    if not any(c["name"] == "_xsrf" for c in page.context.cookies()) or "/hub/admin" not in page.url:
        _sign_in(page, hub["url"], hub["admin"], hub["admin_password"], next_path="/hub/admin")
        page.wait_for_load_state()
    xsrf = next(c["value"] for c in page.context.cookies() if c["name"] == "_xsrf")
    return page.request.fetch(f"{hub['url']}hub/api/{path}", method=method, headers={"X-XSRFToken": xsrf})


def _form_says(page) -> str:
    page.wait_for_load_state()
    assert "/hub/login" in page.url, page.url  # refused: still on the sign-in form, nothing started
    return page.inner_text("body")


def test_a_name_is_its_owner_s_a_newcomer_needs_the_code_and_failures_never_refuse_the_right_password(hub):
    from labkit_dev.browser import chromium

    owner = hub["names"][0]
    ensure_lab(hub, owner)  # its first sign-in set its password
    newcomer = f"{hub['names'][0]}z"  # a name nobody has signed in with
    with chromium() as page:
        # someone else under the owner's name: refused, as a wrong password, or as "taken" when they came as new
        _sign_in(page, hub["url"], owner, "not-the-owners-password")
        assert "Invalid username or password" in _form_says(page)
        _sign_in(page, hub["url"], owner, "not-the-owners-password", code=hub["password"])
        assert f"The name {owner} is taken" in _form_says(page)
        # a first sign-in: without the code, with a wrong one, or with the code as its own password: refused
        _sign_in(page, hub["url"], newcomer, "a-password-of-mine")
        assert "needs the workshop code" in _form_says(page)
        _sign_in(page, hub["url"], newcomer, hub["password"], code=hub["password"])
        assert "Choose a password of your own" in _form_says(page)
        assert not drive.user_exists(names.unix_name(newcomer))
        for _ in range(4):
            _sign_in(page, hub["url"], newcomer, "a-password-of-mine", code="not-the-code")
            assert "That is not the workshop code" in _form_says(page)
        assert not drive.user_exists(names.unix_name(newcomer))
        # failures under a name never refuse its right password (issue 63; the address throttle is
        # tests/test_hub_attacks.py's): five wrong ones in all, then the owner's own
        for _ in range(3):
            _sign_in(page, hub["url"], owner, "not-the-owners-password")
            assert "Invalid username or password" in _form_says(page)
        _sign_in(page, hub["url"], owner, drive.own_password(hub, owner), next_path="/hub/home")
        page.wait_for_load_state()
        assert "/hub/home" in page.url, page.inner_text("body")[:1000]
    log = hub["log"].read_text()
    assert f"Refused sign-in (name:{newcomer}" in log and hub["password"] not in log


def test_root_an_existing_user_and_a_bad_name_are_refused_and_the_instructor_reaches_the_admin_page(hub):
    from labkit_dev.browser import chromium

    with chromium() as page:
        for name, why in (("root", "is an account of this machine"), ("daemon", "is an account of this machine"),
                          ("Bad Name!", "cannot be an attendee's name")):
            drive.join(page, hub, name)
            page.wait_for_load_state()
            assert why in page.inner_text("body"), page.inner_text("body")[:1000]
            assert "/hub/login" in page.url
        assert not drive.user_exists("lab-root") and not drive.user_exists("lab-daemon")
        # the instructor's name takes the instructor's password only: no first sign-in can set one for it
        _sign_in(page, hub["url"], hub["admin"], hub["password"])
        assert "Invalid username or password" in _form_says(page)
        _sign_in(page, hub["url"], hub["admin"], "a-password-of-mine", code=hub["password"])
        assert "Invalid username or password" in _form_says(page)
        _sign_in(page, hub["url"], hub["admin"], hub["admin_password"], next_path="/hub/admin")
        page.wait_for_load_state()
        assert "/hub/admin" in page.url, page.url


def test_the_instructor_resets_a_forgotten_password_and_the_attendee_sets_a_new_one(hub):
    """JupyterHub's admin *Delete User* (its REST call, as the admin page makes it) drops the name's password
    (FirstUseAuthenticator.delete_user), but the name stays its owner's: a sign-in with the workshop code is refused.
    The instructor's reset (``python -m labkit.hub reset-password``, the run-sheet's way) prints a one-time code, with
    which the attendee sets a new password and gets their lab back; their Unix user and files stay."""
    from labkit_dev.browser import chromium

    name = hub["names"][2]
    entry = ensure_lab(hub, name)
    kept = Path(entry.pw_dir, "labkit", "work", "00_tour.ipynb")
    assert kept.exists()
    with chromium() as page:
        # the hub fixture's idle culler (a short timeout, for its own test) may be stopping the lab right now, and
        # JupyterHub refuses to delete a user while their server stops ("in the process of stopping, please wait",
        # UserAPIHandler.delete): wait, as the admin page would show, until no stop is pending
        assert wait_until(lambda: _admin_call(page, hub, "GET", f"users/{name}").json()["pending"] != "stop", 90, 1.0)
        assert _admin_api(page, hub, "DELETE", f"users/{name}") == 204
        page.context.clear_cookies()
        _sign_in(page, hub["url"], name, "a-takers-password", code=hub["password"])  # anyone with the workshop code
        assert f"{name} has a lab on this machine already" in _form_says(page)
        reset = subprocess.run([sys.executable, "-m", "labkit.hub", "reset-password", name, "--state", hub["state"]],
                               capture_output=True, text=True, timeout=60)
        assert reset.returncode == 0, reset.stdout + reset.stderr
        one_time = reset.stdout.split(f"One-time code for {name}: ", 1)[1].split()[0]
        _sign_in(page, hub["url"], name, drive.own_password(hub, name), code=one_time)  # their new password
        wait_for_server(page, hub, name)
    assert kept.exists() and pwd.getpwnam(names.unix_name(name)).pw_uid == entry.pw_uid


def test_the_idle_culler_ends_every_process_of_the_lab_and_a_visit_to_it_starts_it_again(hub):
    idle, started = hub["idle"], time.monotonic()  # the attendee the hub fixture left idle (_left_idle)
    entry = idle["entry"]
    assert idle["jvms_before"] == 0  # no notebook asked for it before
    assert idle["jvms"] == 1, idle["kinds"]
    print(f"{entry.pw_name} idle (JupyterLab and broker, no kernel): RSS {idle['rss']:.0f} MiB, PSS {idle['pss']:.0f} "
          f"MiB: {idle['kinds']}")
    left_s = CULL_S - (started - idle["since"])  # the browser closed then: nothing reached the server after
    if not wait_until(lambda: not users.processes_of(entry.pw_uid), max(left_s, 0), 2.0):
        left = [(p.pid, p.name()) for p in users.processes_of(entry.pw_uid)]
        pytest.fail(f"{entry.pw_name}'s lab was not culled within {CULL_S} s; left: {left}\n"
                    f"{hub['log'].read_text()[-3000:]}")
    print(f"{entry.pw_name}: every process ended by {time.monotonic() - idle['since']:.1f} s after the browser closed "
          f"(this test waited {time.monotonic() - started:.1f} s of it)")

    def ended() -> list[str]:  # the hub logs it once end_processes returns: after the processes are gone
        return [line for line in hub["log"].read_text().splitlines() if f"Ended {entry.pw_name}'s lab:" in line]

    assert wait_until(ended, 60, 1.0), hub["log"].read_text()[-3000:]
    assert "java" in ended()[-1], ended()

    # back at their lab's URL, they meet JupyterHub's "not running" page, which starts their lab itself (the
    # configuration's implicit_spawn_seconds: the page the reset test once met and waited on for 420 s)
    from labkit_dev.browser import chromium, new_page

    with chromium() as page:
        went: list[str] = []
        page.on("framenavigated", lambda frame: went.append(frame.url) if frame == page.main_frame else None)
        # no click on Launch Server
        join_to_server(page, hub, idle["name"], next_path=f"/hub/user/{idle['name']}/lab")
        # through the page that, without the setting, waits for a click on Launch Server (420 s, then the wait fails)
        assert [urllib.parse.urlsplit(url).path for url in went][1:3] == [f"/hub/user/{idle['name']}/lab",
                                                                         f"/hub/spawn-pending/{idle['name']}"], went
        # one who came while it was stopping reaches "not running" from the "stopping" page, which reloads itself once
        # the stop is done: there too their lab starts again with no click (templates/not_running.html; JupyterHub's
        # setting does not reach that page: the reset test met it as the culler stopped the lab it signed in to)
        assert _admin_api(new_page(page.context.browser), hub, "DELETE", f"users/{idle['name']}/server") in (202, 204)
        assert wait_until(lambda: not users.processes_of(entry.pw_uid), CULL_S, 1.0)
        went.clear()
        asked = re.compile(rf" GET /hub/spawn/{idle['name']}\b")  # the page's request to start it (JupyterHub's log)
        before = len(asked.findall(hub["log"].read_text()))
        page.goto(f"{hub['url']}hub/spawn-pending/{idle['name']}")
        wait_for_server(page, hub, idle["name"])
        # "not running", then (the start asked for: a redirect) the start's progress, then the lab
        assert [urllib.parse.urlsplit(url).path for url in went][:2] == [f"/hub/spawn-pending/{idle['name']}"] * 2, went
        assert len(asked.findall(hub["log"].read_text())) == before + 1


# --- the instructor's live view on the same hub (labkit/hub/liveview.py; its other tests: tests/test_hub_liveview.py)

#: An attendee's cells (notebook 00's session): an exercise check unanswered, wrong, raising (the lab's error), then
#: right; a claims cell failing then holding; and two reports the service must refuse, sent from the kernel with the
#: kernel's own means. Each run of cells is a new kernel: SETUP first.
SETUP = ("import os\nimport labkit\nfrom labkit.learn.exercise import compare, marked, unanswered\n"
         "from labkit.hub import report\n"
         "@marked\ndef check(answer):\n"
         "    if answer == 'outage':\n        raise ConnectionError('the broker did not answer')\n"
         "    return unanswered(answer, 'a number') or compare(2, answer, 'Right.', 'Not yet: count again.')\n"
         "print(os.path.basename(os.environ['JPY_SESSION_NAME']), report._reporter is not None)")
EXERCISE_UNANSWERED, EXERCISE_WRONG, EXERCISE_ERROR, EXERCISE_RIGHT = (
    "check(...)", "check(3)", "check('outage')", "check(1 + 1)")
CLAIMS_FAIL = 'assert 1 + 1 == 3, "a claim that does not hold"\nlabkit.claims_hold("All claims hold on the real broker.")'
CLAIMS_PASS = 'assert 1 + 1 == 2\nlabkit.claims_hold("All claims hold on the real broker.")'
KERNEL_S = 240  # a kernel's start and a cell's reply on a loaded 2-core machine


def _refused_cell(other: str) -> str:
    """A cell sending, with the kernel's own means, a report with a bad token and one naming ``other``."""
    return ("url, token = os.environ[report.URL_ENV], os.environ[report.TOKEN_ENV]\n"
            "claim = {'notebook': '01', 'kind': 'claims', 'state': 'held'}\n"
            f"print(report.send(url, 'x' + token[1:], claim), report.send(url, token, {{**claim, 'user': {other!r}}}))")


def test_the_instructor_sees_an_attendee_s_verdicts_live(hub, tmp_path):
    """An attendee signed in through Chromium runs claims-like cells and an exercise check in a kernel of theirs (the
    Jupyter server's REST API and kernel websocket, driven from their page) while the instructor's live view, open in
    another page, shows their row change; a report with a bad token, or naming another user, is refused; an attendee
    opening the live view gets a 403. A screenshot of the page at 1280x800 is saved (its path printed)."""
    from labkit_dev.browser import chromium, new_page
    from labkit.hub import observed

    a, b = hub["names"][4:6]  # names of this test's own: the others' attendees have run notebook 00
    url, view = hub["url"], f"{hub['url']}services/liveview/"
    t0, cpu0 = time.monotonic(), time.process_time()
    with chromium() as page_a:
        browser = page_a.context.browser
        drive.join(page_a, hub, a)
        wait_for_lab(page_a, hub, a)
        instructor = new_page(browser)
        _sign_in(instructor, url, hub["admin"], hub["admin_password"], next_path="/services/liveview/")
        instructor.wait_for_selector(f"#live th.who:text-is('{a}')", timeout=60_000)
        assert instructor.url.startswith(view), instructor.url
        drive.wait_for_live_marks(instructor, a, "^E·C·$")  # signed in, nothing run yet

        setup, asked = drive.run_cells(page_a, url, a, [SETUP, EXERCISE_UNANSWERED], timeout_s=KERNEL_S)
        assert (setup["status"], setup["output"].split()) == ("ok", ["00_tour.ipynb", "True"]), setup
        assert "UNANSWERED" in asked["output"], asked
        drive.wait_for_live_marks(instructor, a, "^E…C·$")  # the open page refreshed itself: not answered, not wrong
        # the claims cell fails, then (the learner's fix) the same cell, by its id, holds: C✗, then C✓
        _, claims_fail, wrong = drive.run_cells(page_a, url, a, [SETUP, ("claims", CLAIMS_FAIL), EXERCISE_WRONG],
                                                timeout_s=KERNEL_S)
        assert claims_fail["status"] == "error" and "a claim that does not hold" in claims_fail["output"]
        assert "NOT YET" in wrong["output"], wrong
        drive.wait_for_live_marks(instructor, a, "^E✗C✗$")
        _, outage = drive.run_cells(page_a, url, a, [SETUP, EXERCISE_ERROR], timeout_s=KERNEL_S)
        assert outage["status"] == "error" and "the broker did not answer" in outage["output"], outage
        drive.wait_for_live_marks(instructor, a, "^E!C✗$")  # the lab's error, not the learner's wrong answer
        _, right, claims_pass, refused = drive.run_cells(
            page_a, url, a, [SETUP, EXERCISE_RIGHT, ("claims", CLAIMS_PASS), _refused_cell(b)], timeout_s=KERNEL_S)
        assert "RIGHT" in right["output"] and claims_pass["status"] == "ok", (right, claims_pass)
        assert refused["output"].split() == ["403", "400"], refused  # a bad token; a report naming another user
        drive.wait_for_live_marks(instructor, a, "^E✓C✓$")
        # a kernel of another notebook reports for that notebook (its JPY_SESSION_NAME)
        (claims_01,) = drive.run_cells(page_a, url, a, ["import labkit\n" + CLAIMS_FAIL], path="01_idempotence.ipynb",
                                       timeout_s=KERNEL_S)
        assert claims_01["status"] == "error", claims_01
        drive.wait_for_live_marks(instructor, a, "^E·C✗$", notebook=1)
        assert drive.live_marks(instructor, a) == "E✓C✓"

        row = drive.live_row(instructor, a)
        entry = pwd.getpwnam(names.unix_name(a))
        assert observed.state_file(entry.pw_dir).exists()  # the attendee's broker's daemon, waiting for a request
        # signed in, server ready, broker not asked for (no cell called labkit.connect); once asked for, up
        assert row[1].startswith("yes") and row[2] == "up" and row[3] == "not up yet", row
        ask_for_broker(entry, hub)
        broker_state(entry)
        assert wait_until(lambda: drive.live_row(instructor, a)[3] == "up", 60, 1.0), drive.live_row(instructor, a)

        # an attendee opening the live view, or its table, is refused
        page_b = new_page(browser)
        drive.join(page_b, hub, b, next_path="/services/liveview/")
        page_b.wait_for_load_state()
        response = page_b.goto(view)
        assert response.status == 403, (response.status, page_b.inner_text("body")[:500])
        assert "permission" in page_b.inner_text("body").lower()
        assert page_b.request.get(f"{view}api/table", max_redirects=0).status in (302, 403)
        # ... and b, who ran nothing, has no mark: not a's, not the one a's kernel tried to file under b's name
        instructor.reload()
        instructor.wait_for_selector(f"#live th.who:text-is('{b}')", timeout=60_000)
        assert drive.live_marks(instructor, b) == "E·C·"
        assert drive.live_row(instructor, b)[-1] == "none"  # no report at all, 01's refused one included
        shot = tmp_path / "liveview-1280x800.png"
        instructor.screenshot(path=str(shot))
        print(f"the live view as the instructor sees it: {shot}")
    print(f"live view test: {time.monotonic() - t0:.1f} s wall, {time.process_time() - cpu0:.1f} s CPU (this process)")


def test_a_report_without_a_known_token_is_refused(hub):
    report_url = f"{hub['url']}services/liveview/api/report"
    claim = {"notebook": "00", "kind": "claims", "state": "held"}
    assert report.send(report_url.removesuffix("api/report"), "not-a-token", claim) == 403
    request = urllib.request.Request(report_url, data=json.dumps(claim).encode(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401
