"""The workshop hub (labkit/hub/, issue 38): a real JupyterHub on this machine; three attendees signed in through
headless Chromium run notebook 00 whole at the same time, each on a broker of their own, started as them, on ports only
they can reach, from a shared read-only cache; the idle culler ends every process of an idle attendee's lab; the
instructor's live view shows an attendee's verdicts as their kernel reports them, and refuses what it must.

The hub tests need root (they make Unix users, an nftables table and run JupyterHub as root) and Debian's chromium;
without either they are skipped, saying why. One hub serves the whole module (started once: its CPU is the test's
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
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from labkit.broker import runtime
from labkit.errors import LabkitError
from labkit.hub import drive, firewall, install, names, report, run, users
from labkit.hub.config import HubSettings, configure
from labkit.hub.drive import sign_in as _sign_in
from labkit.waiting import wait_until

HUB_START_S = 180  # a cold hub on a loaded 2-core machine took 20 s; the set-up before it is not counted here
LAB_START_S = 420  # sign-in to the file browser, the attendee's broker started first: three at once on 2 cores
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
    assert c.SharedPasswordAuthenticator.user_password == "attendees"
    assert "--timeout=600" in c.JupyterHub.services[0]["command"]
    assert c.JupyterHub.db_url == "sqlite:////s/jupyterhub.sqlite" and c.ConfigurableHTTPProxy.command == ["/p"]


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


def test_a_broker_that_does_not_start_leaves_the_attendee_a_note(tmp_path, monkeypatch):
    """The attendee still gets JupyterLab (singleuser goes on), with a note in their file browser saying why."""
    from labkit.hub import singleuser

    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))  # the broker daemon fails: no Java there
    monkeypatch.delenv("LABKIT_BOOTSTRAP", raising=False)
    singleuser.prepare(tmp_path)
    assert singleuser.start_broker(tmp_path, timeout_s=120) is None
    note = (tmp_path / "work" / singleuser.FAILED_NOTE).read_text()
    assert "did not start" in note and "No Java found" in note and "Start My Server" in note, note


# --- a real hub, as root --------------------------------------------------------------------------------------------

def _skip_unless_hub_can_run() -> None:
    from labkit.browser import missing

    if os.geteuid() != 0:
        pytest.skip("the hub test makes Unix users and runs JupyterHub as root: run it as root (sudo make test)")
    if (why := missing()):
        pytest.skip(f"the hub test signs in through a browser: it {why}")


def _tree(folder: Path) -> dict[str, tuple]:
    """Every path under ``folder`` with its mode, owner, size and modification time: what a write would change."""
    return {str(p): (p.lstat().st_mode, p.lstat().st_uid, p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in [folder, *folder.rglob("*")]}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A running hub with a 60 s idle timeout (:func:`labkit.hub.drive.running_hub`): ``{"url", "password", "names",
    "log", "prefix", "admin", "admin_password", "table", "cache", "cache_tree"}``. The names are this run's; those whose
    Unix user did not exist before are removed after, with their homes and processes."""
    _skip_unless_hub_can_run()
    with drive.running_hub(tmp_path_factory.mktemp("hub"), 6, cull_idle_s=60, start_timeout_s=HUB_START_S,
                           extra={"JupyterHub": {"last_activity_interval": 10}}) as running:
        assert all(names.why_refused(n) is None for n in running["names"])
        print(f"set-up and hub start: {running['setup_s']:.1f} s")
        yield {**running, "cache_tree": _tree(running["cache"])}


def _wait_for_lab(page, hub: dict, name: str) -> None:
    drive.wait_for_lab(page, hub, name, LAB_START_S)


def _brokers(uid: int) -> list[psutil.Process]:
    """The broker JVMs among ``uid``'s processes (main class: the lab's launcher, or Kafka's)."""
    return [p for p in users.processes_of(uid)
            if any(arg in ("labkit.broker.Launcher", "kafka.Kafka") for arg in p.cmdline())]


def _listening(proc: psutil.Process) -> set[int]:
    return {c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}


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

#: Run as an attendee: try to read each file of ``argv[1:]`` (a folder: list it), then to SIGTERM the pid that is
#: ``argv[1]``, then to connect to each port of ``argv[2]`` (comma-separated); one word per try.
PROBE = """
import os, signal, socket, sys
pid, ports, paths = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
for path in paths:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path).read()
        print("read")
    except PermissionError:
        print("denied")
try:
    os.kill(pid, signal.SIGTERM)
    print("signalled")
except PermissionError:
    print("denied")
for port in ports:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=10).close()
        print("connected")
    except ConnectionRefusedError:
        print("refused")
"""


def _as(entry: pwd.struct_passwd, prefix: str, script: str, *args: str) -> str:
    done = subprocess.run([os.path.join(prefix, "venv", "bin", "python"), "-c", script, *args], user=entry.pw_uid,
                          group=entry.pw_gid, extra_groups=[], cwd="/", capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_three_attendees_run_notebook_00_at_once_each_on_a_broker_only_they_reach(hub):
    from playwright.sync_api import expect

    from labkit.browser import chromium, new_page

    attendees = hub["names"][:3]
    with chromium() as first:
        pages = [first] + [new_page(first.context.browser) for _ in attendees[1:]]
        submitted = {name: _sign_in(page, hub["url"], name, hub["password"]) for page, name in zip(pages, attendees)}
        for page, name in zip(pages, attendees):
            _wait_for_lab(page, hub, name)
            print(f"{name}: sign-in to the file browser (broker started first) {time.monotonic() - submitted[name]:.1f} s")
        # the lab's JupyterLab settings reach the attendee's JupyterLab (no "Jupyter news" prompt)
        settings = pages[0].request.get(f"{hub['url']}user/{attendees[0]}/lab/api/settings/"
                                        "@jupyterlab/apputils-extension:notification").json()
        assert settings["schema"]["properties"]["fetchNews"]["default"] == "false", settings
        # ... nor its page configuration: no page asked the server for a build check (``node yarn.js`` each time)
        assert "/lab/api/build" not in hub["log"].read_text()

        started = time.monotonic()
        for page, name in zip(pages, attendees):  # each opens notebook 00 and runs it whole (Run > Run All Cells)
            # every cell drawn, so that drive.wait_for_run reads every queued cell's prompt
            drive.lab_setting(page, hub["url"], name, "@jupyterlab/notebook-extension:tracker",
                              {"windowingMode": "none"})
            drive.open_notebook(page, hub["url"], name, "00_tour.ipynb")
            drive.run_all(page, name)
        for page, name in zip(pages, attendees):
            stopped = drive.wait_for_run(page, name, RUN_ALL_S)
            assert stopped is None, f"{name}'s notebook 00 {stopped}"
            expect(page.locator(".jp-OutputArea-output", has_text=LAST_LINE)).to_be_visible()
            # the notebook used the attendee's lab broker, not one of its own
            expect(page.locator(".jp-OutputArea-output", has_text="(the lab broker, make lab)")).to_be_visible()
        print(f"notebook 00, Run All, three attendees at once: {time.monotonic() - started:.1f} s")
        # one kernel per opened notebook: each attendee's JupyterLab made one session (Jupyter Server logs each POST),
        # none started beside it and shut down (drive.run_all and wait_for_run ask nothing twice)
        log = hub["log"].read_text()
        made = {name: len(re.findall(rf" 201 POST /user/{name}/api/sessions\b", log)) for name in attendees}
        assert made == dict.fromkeys(attendees, 1), made

        entries = {name: pwd.getpwnam(names.unix_name(name)) for name in attendees}
        brokers = {}
        for name, entry in entries.items():
            assert names.is_lab_user(entry) and entry.pw_uid in firewall.ATTENDEE_UIDS
            home = os.stat(entry.pw_dir)
            assert (stat.S_IMODE(home.st_mode), home.st_uid) == (0o700, entry.pw_uid)
            assert os.stat(os.path.join(entry.pw_dir, "labkit", "work", "00_tour.ipynb")).st_uid == entry.pw_uid
            # exactly one broker of their own, as them, on ports of their block, from the shared read-only cache
            found = _brokers(entry.pw_uid)
            assert len(found) == 1, f"{name} has {len(found)} brokers: {[p.cmdline()[-2:] for p in found]}"
            broker = brokers[name] = found[0]
            block = firewall.port_block(entry.pw_uid)
            assert _listening(broker) and _listening(broker) <= set(block), (_listening(broker), block)
            state = json.loads(Path(entry.pw_dir, "labkit", "lab", "broker.json").read_text())
            assert int(state["bootstrap"].rsplit(":", 1)[1]) in block
            cmdline = " ".join(broker.cmdline())
            assert f"{hub['cache']}/kafka-" in cmdline and f"-XX:SharedArchiveFile={hub['cache']}/cds/" in cmdline
            assert "-Xmx256m" in broker.cmdline() and "-XX:+UseSerialGC" in broker.cmdline()  # the hub's small heap
            started_s = os.stat(Path(entry.pw_dir, "labkit", "lab", "broker.json")).st_mtime - state["started"]
            rss, pss = _memory_mib(entry.pw_uid)
            print(f"{name}: broker start {started_s:.1f} s; after notebook 00: RSS {rss:.0f} MiB, PSS {pss:.0f} MiB "
                  f"({len(users.processes_of(entry.pw_uid))} processes)")
        assert _tree(hub["cache"]) == hub["cache_tree"], "an attendee's lab wrote into the shared cache"
        assert all(not (mode & 0o022) and owner == 0 for mode, owner, *_ in hub["cache_tree"].values())

        # the instructor's live view: a row per attendee with notebook 00's verdicts, as their kernels reported them
        # (an exercise verdict, whichever it was, and the claims cell held)
        instructor = new_page(first.context.browser)
        _sign_in(instructor, hub["url"], hub["admin"], hub["admin_password"], next_path="/services/liveview/")
        for name in attendees:
            drive.wait_for_live_marks(instructor, name, "^E…C✓$")  # its exercise left unanswered, its claims held

    # A cannot read B's files nor signal B's broker (real PermissionErrors), nor connect to any of B's broker ports
    a, b = (entries[n] for n in attendees[:2])
    b_lab = os.path.join(b.pw_dir, "labkit", "lab")
    b_broker = brokers[attendees[1]]
    b_ports = ",".join(map(str, sorted(_listening(b_broker))))
    tried = _as(a, hub["prefix"], PROBE, str(b_broker.pid), b_ports, b.pw_dir, b_lab,
                os.path.join(b_lab, "broker.json")).split()
    assert tried == ["denied"] * 4 + ["refused"] * len(_listening(b_broker)), tried
    assert b_broker.is_running()
    # ... nor produce with a real client; B's own producer gets through, and A's to its own broker too
    b_bootstrap = json.loads(Path(b_lab, "broker.json").read_text())["bootstrap"]
    a_bootstrap = json.loads(Path(a.pw_dir, "labkit", "lab", "broker.json").read_text())["bootstrap"]
    a_to_b = json.loads(_as(a, hub["prefix"], PRODUCE, b_bootstrap))
    assert not a_to_b["delivered"] and any("Connection refused" in e for e in a_to_b["errors"]), a_to_b
    assert json.loads(_as(b, hub["prefix"], PRODUCE, b_bootstrap))["delivered"]
    assert json.loads(_as(a, hub["prefix"], PRODUCE, a_bootstrap))["delivered"]


def test_root_an_existing_user_and_a_bad_name_are_refused_and_the_instructor_reaches_the_admin_page(hub):
    from labkit.browser import chromium

    with chromium() as page:
        for name, why in (("root", "is an account of this machine"), ("daemon", "is an account of this machine"),
                          ("Bad Name!", "cannot be an attendee's name")):
            _sign_in(page, hub["url"], name, hub["password"])
            page.wait_for_load_state()
            assert why in page.inner_text("body"), page.inner_text("body")[:1000]
            assert "/hub/login" in page.url
        assert not drive.user_exists("lab-root") and not drive.user_exists("lab-daemon")
        # the instructor's name takes the instructor's password only
        _sign_in(page, hub["url"], hub["admin"], hub["password"])
        page.wait_for_load_state()
        assert "Invalid username or password" in page.inner_text("body")
        _sign_in(page, hub["url"], hub["admin"], hub["admin_password"], next_path="/hub/admin")
        page.wait_for_load_state()
        assert "/hub/admin" in page.url, page.url


def test_the_idle_culler_ends_every_process_of_the_lab(hub):
    from labkit.browser import chromium

    name = hub["names"][3]
    with chromium() as page:
        submitted = _sign_in(page, hub["url"], name, hub["password"])
        _wait_for_lab(page, hub, name)
        print(f"{name}: sign-in to the file browser {time.monotonic() - submitted:.1f} s")
    entry = pwd.getpwnam(names.unix_name(name))
    assert len(_brokers(entry.pw_uid)) == 1, [p.cmdline()[-2:] for p in users.processes_of(entry.pw_uid)]
    rss, pss = _memory_mib(entry.pw_uid)
    kinds = sorted({p.name() for p in users.processes_of(entry.pw_uid)})
    print(f"{name} idle (JupyterLab and broker, no kernel): RSS {rss:.0f} MiB, PSS {pss:.0f} MiB: {kinds}")
    idle_since = time.monotonic()  # the browser is closed: nothing reaches the server any more
    if not wait_until(lambda: not users.processes_of(entry.pw_uid), CULL_S, 2.0):
        left = [(p.pid, p.name()) for p in users.processes_of(entry.pw_uid)]
        pytest.fail(f"{name}'s lab was not culled within {CULL_S} s; left: {left}\n{hub['log'].read_text()[-3000:]}")
    print(f"{name}: culled and every process ended {time.monotonic() - idle_since:.1f} s after the browser closed")
    def ended() -> list[str]:  # the hub logs it once end_processes returns: after the processes are gone
        return [line for line in hub["log"].read_text().splitlines() if f"Ended {entry.pw_name}'s lab:" in line]

    assert wait_until(ended, 60, 1.0), hub["log"].read_text()[-3000:]
    assert "java" in ended()[-1], ended()


# --- the instructor's live view on the same hub (labkit/hub/liveview.py; its other tests: tests/test_hub_liveview.py)

#: An attendee's cells (notebook 00's session): an exercise check unanswered, wrong, raising (the lab's error), then
#: right; a claims cell failing then holding; and two reports the service must refuse, sent from the kernel with the
#: kernel's own means. Each run of cells is a new kernel: SETUP first.
SETUP = ("import os\nimport labkit\nfrom labkit.exercise import compare, marked, unanswered\n"
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
    from labkit.browser import chromium, new_page
    from labkit.hub import observed

    a, b = hub["names"][4:6]  # names of this test's own: the others' attendees have run notebook 00
    url, view = hub["url"], f"{hub['url']}services/liveview/"
    t0, cpu0 = time.monotonic(), time.process_time()
    with chromium() as page_a:
        browser = page_a.context.browser
        _sign_in(page_a, url, a, hub["password"])
        _wait_for_lab(page_a, hub, a)
        instructor = new_page(browser)
        _sign_in(instructor, url, hub["admin"], hub["admin_password"], next_path="/services/liveview/")
        instructor.wait_for_selector(f"#live th.who:text-is('{a}')", timeout=60_000)
        assert instructor.url.startswith(view), instructor.url
        drive.wait_for_live_marks(instructor, a, "^E·C·$")  # signed in, nothing run yet

        setup, asked = drive.run_cells(page_a, url, a, [SETUP, EXERCISE_UNANSWERED], timeout_s=KERNEL_S)
        assert (setup["status"], setup["output"].split()) == ("ok", ["00_tour.ipynb", "True"]), setup
        assert "UNANSWERED" in asked["output"], asked
        drive.wait_for_live_marks(instructor, a, "^E…C·$")  # the open page refreshed itself: not answered, not wrong
        _, claims_fail, wrong = drive.run_cells(page_a, url, a, [SETUP, CLAIMS_FAIL, EXERCISE_WRONG], timeout_s=KERNEL_S)
        assert claims_fail["status"] == "error" and "a claim that does not hold" in claims_fail["output"]
        assert "NOT YET" in wrong["output"], wrong
        drive.wait_for_live_marks(instructor, a, "^E✗C✗$")
        _, outage = drive.run_cells(page_a, url, a, [SETUP, EXERCISE_ERROR], timeout_s=KERNEL_S)
        assert outage["status"] == "error" and "the broker did not answer" in outage["output"], outage
        drive.wait_for_live_marks(instructor, a, "^E!C✗$")  # the lab's error, not the learner's wrong answer
        _, right, claims_pass, refused = drive.run_cells(page_a, url, a, [SETUP, EXERCISE_RIGHT, CLAIMS_PASS,
                                                                         _refused_cell(b)], timeout_s=KERNEL_S)
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
        assert observed.state_file(entry.pw_dir).exists()  # the attendee's broker
        assert row[1].startswith("yes") and row[2] == "up" and row[3] == "up", row  # signed in, server ready, broker

        # an attendee opening the live view, or its table, is refused
        page_b = new_page(browser)
        _sign_in(page_b, url, b, hub["password"], next_path="/services/liveview/")
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
