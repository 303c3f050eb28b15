"""The workshop hub (labkit/hub/, issue 38): a real JupyterHub on this machine; three attendees signed in through
headless Chromium run notebook 00 whole at the same time, each on a broker of their own, started as them, on ports only
they can reach, from a shared read-only cache; the idle culler ends every process of an idle attendee's lab.

The hub tests need root (they make Unix users, an nftables table and run JupyterHub as root) and Debian's chromium;
without either they are skipped, saying why. One hub serves the whole module (started once: its CPU is the test's
largest cost). It does the hub's set-up itself (:func:`labkit.hub.install.install_shared`: once per machine, a few
minutes the first time, seconds after), runs on free ports with its own state folder and firewall table, a 60 s idle
timeout, and signs in names unique to the run (``t<random>a``..``d``), so parallel workers and second runs never
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
import secrets
import signal
import socket
import stat
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from labkit.broker import runtime
from labkit.errors import LabkitError
from labkit.hub import firewall, install, names, run, users
from labkit.hub.config import HubSettings, configure
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


def test_the_shared_venv_leaves_out_the_test_tools_and_pyspark():
    pins = {p.split("==")[0].lower() for p in install.pinned_packages()}
    assert {"jupyterlab", "jupyterhub", "jupyterhub-idle-culler", "confluent-kafka"} <= pins
    assert not pins & {"pytest", "playwright", "pyspark"}


def test_the_prefix_must_be_open_to_attendees(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(LabkitError, match="not open to other users"):
        install.shared_prefix(closed / "labkit")


def test_the_shared_cache_is_read_first_and_never_written(tmp_path):
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


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except OSError:
        return False


def _tree(folder: Path) -> dict[str, tuple]:
    """Every path under ``folder`` with its mode, owner, size and modification time: what a write would change."""
    return {str(p): (p.lstat().st_mode, p.lstat().st_uid, p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in [folder, *folder.rglob("*")]}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A running hub with a 60 s idle timeout: ``{"url", "password", "names", "log", "prefix", "admin",
    "admin_password", "table", "cache"}``. The names are this run's; those whose Unix user did not exist before are
    removed after, with their homes and processes."""
    _skip_unless_hub_can_run()
    tag = secrets.token_hex(3)
    made = [f"t{tag}{x}" for x in "abcd"]
    assert all(names.why_refused(n) is None for n in made)
    fresh = [n for n in made if not _exists(names.unix_name(n))]
    state = tmp_path_factory.mktemp("hub") / "state"
    log = state.parent / "hub.log"
    password, admin_password = secrets.token_urlsafe(12), secrets.token_urlsafe(32)
    t0 = time.monotonic()
    admin = f"i{tag}"  # the instructor's name: unique too (signing in never spawns a server for it here)
    proc, settings = run.start(password, admin_password, state, log, admin=admin, say=lambda line: None,
                               cull_idle_s=60, extra={"JupyterHub": {"last_activity_interval": 10}})
    table = firewall.table_name(settings.state)
    cache = install.cache_dir(Path(settings.prefix))
    try:
        deadline = time.monotonic() + HUB_START_S
        while not _answers(f"{settings.url}hub/api") and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        if not _answers(f"{settings.url}hub/api"):
            pytest.fail(f"the hub did not answer within {HUB_START_S} s:\n{log.read_text()[-3000:]}")
        print(f"set-up and hub start: {time.monotonic() - t0:.1f} s")
        yield {"url": settings.url, "password": password, "names": made, "log": log, "prefix": settings.prefix,
               "admin": admin, "admin_password": admin_password, "table": table, "cache": cache,
               "cache_tree": _tree(cache)}
    finally:
        _stop(proc)
        table_left = firewall.exists(table)
        firewall.remove_table(table)
        for name in fresh:
            users.remove(name)
        left = [n for n in fresh if _exists(names.unix_name(n))]
        assert not left, f"Unix users left behind: {left}"
        assert not table_left, f"the hub's firewall table {table} outlived the hub"


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def _stop(proc, timeout_s: float = 90) -> None:
    """SIGTERM the hub (it stops the proxy, the culler and every attendee's server), SIGKILL after ``timeout_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _sign_in(page, url: str, name: str, password: str, next_path: str = "") -> float:
    """Fill and submit the hub's sign-in form; returns the time of the submit (``time.monotonic``)."""
    page.goto(f"{url}hub/login" + (f"?next={next_path}" if next_path else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    submitted = time.monotonic()
    page.click("#login_submit")
    return submitted


def _wait_for_lab(page, hub: dict, name: str) -> None:
    try:
        page.wait_for_selector(".jp-DirListing-itemText:has-text('00_tour.ipynb')", timeout=LAB_START_S * 1000)
    except Exception:
        pytest.fail(f"{name}'s JupyterLab did not show 00_tour.ipynb (at {page.url}):\n"
                    f"{page.inner_text('body')[:1000]}\n{hub['log'].read_text()[-3000:]}")
    assert page.url.startswith(f"{hub['url']}user/{name}/lab"), page.url


def _brokers(uid: int) -> list[psutil.Process]:
    """The broker JVMs among ``uid``'s processes (main class: the lab's launcher, or Kafka's)."""
    return [p for p in users.processes_of(uid)
            if any(arg in ("labkit.broker.Launcher", "kafka.Kafka") for arg in p.cmdline())]


def _listening(proc: psutil.Process) -> set[int]:
    return {c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}


def _memory_mib(uid: int) -> tuple[float, float]:
    """Resident and proportional set sizes (MiB) summed over ``uid``'s processes."""
    rss = pss = 0
    for proc in users.processes_of(uid):
        try:
            info = proc.memory_full_info()
        except psutil.NoSuchProcess:
            continue
        rss, pss = rss + info.rss, pss + info.pss
    return rss / 2**20, pss / 2**20


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


def _run_all(page, name: str, tries: int = 3) -> None:
    """Run > Run All Cells in JupyterLab's menu, again (up to ``tries`` times) while no cell was taken: a run asked
    for while a new kernel's connection still settles is dropped (as tests/test_browser.py saw)."""
    from playwright.sync_api import expect

    taken = page.locator(".jp-CodeCell .jp-InputArea-prompt").filter(has_text=re.compile(r"\[(\*|\d+)\]"))
    for _ in range(tries):
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        try:
            expect(taken.first).to_be_visible(timeout=20_000)
            return
        except AssertionError:
            continue
    page.screenshot(path=f"/tmp/hub-run-all-{name}.png")
    pytest.fail(f"{name}'s Run All Cells started no cell in {tries} tries (screenshot /tmp/hub-run-all-{name}.png)")


def test_three_attendees_run_notebook_00_at_once_each_on_a_broker_only_they_reach(hub):
    from playwright.sync_api import expect

    from labkit.browser import chromium

    attendees = hub["names"][:3]
    with chromium() as first:
        pages = [first] + [first.context.browser.new_page(viewport=first.viewport_size) for _ in attendees[1:]]
        submitted = {name: _sign_in(page, hub["url"], name, hub["password"]) for page, name in zip(pages, attendees)}
        for page, name in zip(pages, attendees):
            _wait_for_lab(page, hub, name)
            print(f"{name}: sign-in to the file browser (broker started first) {time.monotonic() - submitted[name]:.1f} s")
        # the lab's JupyterLab settings reach the attendee's JupyterLab (no "Jupyter news" prompt)
        settings = pages[0].request.get(f"{hub['url']}user/{attendees[0]}/lab/api/settings/"
                                        "@jupyterlab/apputils-extension:notification").json()
        assert settings["schema"]["properties"]["fetchNews"]["default"] == "false", settings

        started = time.monotonic()
        for page, name in zip(pages, attendees):  # each opens notebook 00 and runs it whole (Run > Run All Cells)
            # JupyterLab may ask for the kernel even when it has started it: take the one it proposes
            page.add_locator_handler(page.locator(".jp-Dialog", has_text="Select Kernel"),
                                     lambda dialog: dialog.locator(".jp-Dialog-button.jp-mod-accept").click())
            page.goto(f"{hub['url']}user/{name}/lab/tree/00_tour.ipynb")
            expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_visible(timeout=180_000)
            _run_all(page, name)
        for page, name in zip(pages, attendees):
            last = page.locator(".jp-OutputArea-output", has_text=LAST_LINE)
            try:
                expect(last).to_be_visible(timeout=RUN_ALL_S * 1000)
            except AssertionError:
                errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
                pytest.fail(f"{name}'s notebook 00 did not end with its claims line; errors shown: "
                            f"{[e.inner_text()[:500] for e in errors.all()]}")
            # the notebook used the attendee's lab broker, not one of its own
            expect(page.locator(".jp-OutputArea-output", has_text="(the lab broker, make lab)")).to_be_visible()
        print(f"notebook 00, Run All, three attendees at once: {time.monotonic() - started:.1f} s")

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
            started_s = os.stat(Path(entry.pw_dir, "labkit", "lab", "broker.json")).st_mtime - state["started"]
            rss, pss = _memory_mib(entry.pw_uid)
            print(f"{name}: broker start {started_s:.1f} s; after notebook 00: RSS {rss:.0f} MiB, PSS {pss:.0f} MiB "
                  f"({len(users.processes_of(entry.pw_uid))} processes)")
        assert _tree(hub["cache"]) == hub["cache_tree"], "an attendee's lab wrote into the shared cache"
        assert all(not (mode & 0o022) and owner == 0 for mode, owner, *_ in hub["cache_tree"].values())

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


def test_root_an_existing_user_and_a_bad_name_are_refused_and_the_admin_page_lists_attendees(hub):
    from labkit.browser import chromium

    with chromium() as page:
        for name, why in (("root", "is an account of this machine"), ("daemon", "is an account of this machine"),
                          ("Bad Name!", "cannot be an attendee's name")):
            _sign_in(page, hub["url"], name, hub["password"])
            page.wait_for_load_state()
            assert why in page.inner_text("body"), page.inner_text("body")[:1000]
            assert "/hub/login" in page.url
        assert not _exists("lab-root") and not _exists("lab-daemon")
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
    ended = [line for line in hub["log"].read_text().splitlines() if f"Ended {entry.pw_name}'s lab:" in line]
    assert ended and "java" in ended[-1], ended
