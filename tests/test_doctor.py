"""`make doctor` (`python -m labkit doctor`, labkit/doctor/): on this machine every notebook can run; then each
prerequisite is taken away in turn (javac, Maven, a free port, memory, Java 17) and the doctor names the fix, lists the
notebooks that cannot run and exits non-zero. The PATH cases run the doctor as a subprocess with its own PATH: a folder
of links to the tools kept, and fake ``java`` scripts."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from labkit.doctor import checks, needs, network, report
from labkit.doctor.cli import run_checks

REPO = Path(__file__).resolve().parents[1]
ALL = [nb.number for nb in needs.NOTEBOOKS]
#: The notebooks that need a JDK (needs.JAVAC): the Java participant (01 part 4, 02, 03, 06, 08), and 05's Java
#: program on the source launcher.
JAVAC_NOTEBOOKS = ["01", "02", "03", "05", "06", "08", "09"]
#: The notebooks that run with Docker alone: LABKIT_BOOTSTRAP, no Java, no jar cache (tests/test_bootstrap_route.py).
DOCKER_ALONE = ["00", "07"]
#: The notebooks' measured peaks (MiB) in labkit/doctor/lab-memory.json (make lab's), which `make doctor` judges the
#: memory by.
PEAKS = needs.measured_peaks()


def base_env(**changes: str) -> dict[str, str]:
    """This environment without what points the lab elsewhere (a test session's broker, JAVA_HOME), plus
    ``changes``."""
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BOOTSTRAP", "LABKIT_PROXIED", "JAVA_HOME")}
    return env | changes


def tools(folder: Path, *names: str) -> str:
    """A PATH of one folder holding links to the real ``names`` (a PATH without every other tool)."""
    folder.mkdir(exist_ok=True)
    for name in names:
        if not shutil.which(name):
            pytest.skip(f"no {name} on this machine's PATH")
        (folder / name).symlink_to(os.path.realpath(shutil.which(name)))
    return str(folder)


def fake_java(folder: Path, version: str, *, with_javac: bool = False) -> None:
    """A ``java`` script in ``folder`` that prints ``java -version``'s text of release ``version`` (and a ``javac``)."""
    folder.mkdir(exist_ok=True)
    scripts = {"java": f'echo \'openjdk version "{version}" 2024-01-16\' >&2'}
    if with_javac:
        scripts["javac"] = f"echo 'javac {version}'"
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m labkit doctor ARGS`` in ``env`` (default :func:`base_env`)."""
    return subprocess.run([sys.executable, "-m", "labkit", "doctor", *args], env=env or base_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def line_of(out: str, name: str) -> str:
    """The report's line of prerequisite ``name``."""
    return next(line for line in out.splitlines() if re.match(rf"  (ok|warn|FAIL)\s+{re.escape(name)} ", line))


def cannot_run(out: str) -> list[str]:
    """The notebooks the verdict says cannot run."""
    return [m.group(1) for m in re.finditer(r"^  (\d\d) .* cannot run", out, re.M)]


def test_on_this_machine_every_notebook_can_run():
    started = time.monotonic()
    done = doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"All {len(ALL)} notebooks can run here." in done.stdout
    assert "FAIL" not in done.stdout
    for name in ("operating system", "cores", "memory", "disk", "python", "java", "javac", "maven", "make", "ports",
                 "caches", "network", "chromium"):
        assert line_of(done.stdout, name)
    assert "not needed: everything is cached" in line_of(done.stdout, "network")
    assert time.monotonic() - started < 10


def test_no_javac_stops_the_java_participant_notebooks(tmp_path):
    done = doctor(env=base_env(PATH=tools(tmp_path / "bin", "java", "mvn", "make")))
    assert done.returncode == 1
    javac = line_of(done.stdout, "javac")
    assert javac.startswith("  FAIL") and "no javac" in javac and "openjdk-17-jdk-headless" in javac
    assert line_of(done.stdout, "java").startswith("  ok")
    assert cannot_run(done.stdout) == JAVAC_NOTEBOOKS
    assert "01 idempotence           cannot run (parts 1-3 and 5-7 run; part 4 needs a JDK): javac" in done.stdout


def test_no_maven_with_the_jars_cached_is_a_warning(tmp_path):
    done = doctor(env=base_env(PATH=tools(tmp_path / "bin", "java", "javac", "make")))
    assert done.returncode == 0, done.stdout
    maven = line_of(done.stdout, "maven")
    assert maven.startswith("  warn") and "every jar is cached" in maven and "apt-get install maven" in maven


def test_no_maven_and_no_jars_stops_every_notebook(tmp_path):
    env = base_env(PATH=tools(tmp_path / "bin", "java", "javac", "make"), LABKIT_HOME=str(tmp_path / "home"))
    done = doctor(env=env)
    assert done.returncode == 1
    maven = line_of(done.stdout, "maven")
    assert maven.startswith("  FAIL") and "not cached" in maven and "apt-get install maven" in maven
    assert cannot_run(done.stdout) == ALL
    assert "not cached" in line_of(done.stdout, "caches")


def test_a_port_in_use_is_named_with_its_fix():
    # The lab has no fixed port (it picks free ones); a port the user needs is checked with --port.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = doctor("--port", str(port))
    assert done.returncode == 1
    ports = line_of(done.stdout, "ports")
    assert ports.startswith("  FAIL") and f"port {port}" in ports and f"ss -ltnp 'sport = :{port}'" in ports
    assert cannot_run(done.stdout) == ALL


def test_too_little_memory_names_the_notebooks_that_do_not_fit():
    available = sorted(PEAKS.values())[len(PEAKS) // 2]  # the middle peak: the heavier notebooks do not fit
    done = doctor("--memory-mib", str(available))
    assert done.returncode == 1
    memory = line_of(done.stdout, "memory")
    assert memory.startswith("  FAIL") and f"{available} MiB available" in memory
    assert f"free {max(PEAKS.values()) - available} MiB more" in memory
    assert cannot_run(done.stdout) == [number for number in ALL if PEAKS.get(number, 0) > available]


def test_memory_is_read_with_psutil(monkeypatch):
    below = min(PEAKS.values()) - 1
    real = psutil.virtual_memory()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: real._replace(available=below * 2**20))
    monkeypatch.setattr(checks, "lab_rss_mib", lambda: 0)  # a lab running on this machine would count as free
    check = checks.check_memory()
    assert check.status == checks.FAIL and check.blocks == tuple(n for n in ALL if n in PEAKS)
    assert f"{below} MiB available" in check.detail


def test_make_lab_stops_only_when_no_notebook_can_run():
    available = sorted(PEAKS.values())[len(PEAKS) // 2]
    fit = len([number for number in ALL if PEAKS.get(number, 0) <= available])
    some = doctor("--lab", "--memory-mib", str(available))
    assert some.returncode == 0 and f"{fit} of {len(ALL)} notebooks can run here" in some.stdout
    assert "  ok  " not in some.stdout  # make lab's brief report: only what warns or fails
    none = doctor("--lab", "--memory-mib", str(min(PEAKS.values()) - 1))
    # a notebook not measured is never stopped by the memory, so make lab goes on
    assert none.returncode == (1 if set(PEAKS) == set(ALL) else 0)
    assert ("make lab stops here" in none.stderr) == (set(PEAKS) == set(ALL))


def test_a_notebook_not_measured_is_never_judged(tmp_path):
    """Hand-written figures: 00 measured, 02's run failed, 03's claims never reached the live view (bench/hub.py fails
    that run too), the others not run: only 00 can fail; the rest warn."""
    rows = [{"notebook": "00_tour.ipynb", "error": None, "peak_mib": 500},
            {"notebook": "02_zombie_fencing.ipynb", "error": "AssertionError: fenced", "peak_mib": 2000},
            {"notebook": "03_isolation_levels.ipynb", "error": None, "live_view_error": "the live view shows 'E·C·'",
             "peak_mib": 600}]
    (tmp_path / "hub-memory.json").write_text(json.dumps({"notebooks": rows}))
    assert needs.measured_peaks(tmp_path / "hub-memory.json") == {"00": 500}
    short = checks.check_memory(400, measured=tmp_path / "hub-memory.json")
    assert short.status == checks.FAIL and short.blocks == ("00",) and "free 100 MiB more" in short.fix
    assert "00 500, 01 not measured, 02 not measured, 03 not measured" in short.detail
    fits = checks.check_memory(600, measured=tmp_path / "hub-memory.json")
    assert fits.status == checks.WARN and fits.blocks == () and "not judged" in fits.fix
    assert fits.fix.startswith(", ".join(n for n in ALL if n != "00"))


def test_a_failed_make_lab_run_gives_no_figure(tmp_path):
    """bench/lab_memory.py's rows (no live view there): a run that raised, or printed no claims line, has an error and
    no figure, whatever its peak; the doctor says where the figures were measured."""
    rows = [{"notebook": "00_tour.ipynb", "error": None, "claims_line": "All claims hold on the real broker.",
             "peak_mib": 512},
            {"notebook": "01_idempotence.ipynb", "error": "CellExecutionError: AssertionError", "peak_mib": 3000},
            {"notebook": "02_zombie_fencing.ipynb", "error": "every cell ran, but no output says the claims hold",
             "claims_line": None, "peak_mib": 900}]
    path = tmp_path / "lab-memory.json"
    path.write_text(json.dumps({"notebooks": rows}))
    assert needs.measured_peaks(path) == {"00": 512}
    check = checks.check_memory(1000, measured=path)
    assert check.status == checks.WARN and check.blocks == ()
    assert "(MiB, measured in make lab): 00 512, 01 not measured, 02 not measured, 03 not measured" in check.detail


def test_the_doctor_judges_a_laptop_by_make_lab_s_figures_and_the_hub_by_the_hub_s(tmp_path):
    """The same notebook measured both ways, each file with its own figure: `make doctor` (way "lab", its default)
    quotes and judges by make lab's, the hub's check by the hub's, and each says where they were measured."""
    lab, hub = tmp_path / "lab-memory.json", tmp_path / "hub-memory.json"
    lab.write_text(json.dumps({"notebooks": [{"notebook": "09_replication.ipynb", "error": None, "peak_mib": 1557}]}))
    hub.write_text(json.dumps({"notebooks": [{"notebook": "09_replication.ipynb", "error": None,
                                              "live_view_error": None, "peak_mib": 1176}]}))
    laptop = checks.check_memory(1300, measured=lab)
    assert laptop.status == checks.FAIL and laptop.blocks == ("09",) and "free 257 MiB more" in laptop.fix
    assert "(MiB, measured in make lab): " in laptop.detail and "09 1557" in laptop.detail
    attendee = checks.check_memory(1300, measured=hub, way="hub")
    assert attendee.status == checks.WARN and attendee.blocks == ()  # fits; the others are not measured
    assert "(MiB, measured on the workshop hub): " in attendee.detail and "09 1176" in attendee.detail


@pytest.mark.parametrize("content", [None, "not JSON", '{"rows": []}', '{"notebooks": [{"peak_mib": 5}]}'])
def test_without_measured_figures_the_memory_warns(tmp_path, content):
    """An install without the figures' file (or a damaged one) still gets its report: the memory is not judged."""
    path = tmp_path / "hub-memory.json"
    if content is not None:
        path.write_text(content)
    check = checks.check_memory(100, measured=path)
    assert check.status == checks.WARN and check.blocks == () and "no measured peaks" in check.detail
    assert str(path) in check.detail
    if content is not None:
        assert "not a memory bench's JSON" in check.detail


def test_java_11_stops_every_notebook(tmp_path):
    fake_java(tmp_path / "bin", "11.0.22")
    done = doctor(env=base_env(PATH=str(tmp_path / "bin") + os.pathsep + tools(tmp_path / "tools", "mvn", "make")))
    assert done.returncode == 1
    java = line_of(done.stdout, "java")
    assert java.startswith("  FAIL") and "Java 11, too old (17+ needed)" in java and "openjdk-17-jdk" in java
    assert line_of(done.stdout, "javac").startswith("  FAIL")
    assert cannot_run(done.stdout) == ALL


def test_an_old_java_is_named_from_the_error_s_fields(tmp_path):
    """find_java's JavaTooOldError carries the java and its major release: "1.8.0_402" is Java 8."""
    fake_java(tmp_path / "bin", "1.8.0_402")
    check = checks.check_java(base_env(PATH=str(tmp_path / "bin")))
    assert check.status == checks.FAIL
    assert check.detail == f"{tmp_path / 'bin' / 'java'} is Java 8, too old (17+ needed)"


@pytest.mark.parametrize("version, status", [("25.0.1", "warn"), ("25", "warn"), ("25.0.3", "ok"), ("21.0.5", "ok")])
def test_jdk_25_before_25_0_3_is_a_warning_for_spark(tmp_path, version, status):
    fake_java(tmp_path / "bin", version, with_javac=True)
    check = checks.check_java(base_env(PATH=str(tmp_path / "bin")))
    assert check.status == status and not check.blocks
    assert ("PR 55798" in check.detail) == (status == "warn")


def test_with_docker_alone_the_doctor_names_the_notebooks_that_run(tmp_path, bootstrap):
    """LABKIT_BOOTSTRAP names a real broker (the session's, standing in for docker compose's), no java or javac on
    PATH, an empty jar cache: the report ends with exactly the notebooks that run with Docker alone."""
    env = base_env(PATH=tools(tmp_path / "bin", "mvn", "make"), LABKIT_BOOTSTRAP=bootstrap,
                   LABKIT_HOME=str(tmp_path / "home"))
    done = doctor(env=env)
    assert done.returncode == 1
    assert line_of(done.stdout, "LABKIT_BOOTSTRAP").startswith("  ok")
    assert line_of(done.stdout, "java").startswith("  FAIL") and line_of(done.stdout, "javac").startswith("  FAIL")
    runs = [nb for nb in ALL if nb not in cannot_run(done.stdout)]
    assert runs == DOCKER_ALONE, done.stdout
    assert "01 idempotence           cannot run (parts 1-3 and 5-7 run; part 4 needs a JDK): java, javac" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    can = f"{len(DOCKER_ALONE)} of {len(ALL)} notebooks can run here: {', '.join(DOCKER_ALONE)}; cannot: "
    assert last.startswith(can), last


def test_a_cluster_that_does_not_answer_stops_every_notebook():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the check
    check = checks.check_bootstrap(base_env(LABKIT_BOOTSTRAP=f"127.0.0.1:{port}"), timeout_s=1.0)
    assert check.status == checks.FAIL and "docker compose up -d" in check.fix and check.blocks == tuple(ALL)


def test_a_port_that_accepts_connections_is_not_yet_a_broker():
    """Something listens at LABKIT_BOOTSTRAP but never answers Kafka's metadata request: not a cluster."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        check = checks.check_bootstrap(base_env(LABKIT_BOOTSTRAP=f"127.0.0.1:{silent.getsockname()[1]}"),
                                       timeout_s=1.0)
    assert check.status == checks.FAIL and "no Kafka broker answers" in check.detail, check
    assert time.monotonic() - started < 15


def test_the_network_is_asked_only_for_what_is_not_cached(tmp_path, monkeypatch):
    assert "everything is cached" in network.check_network(base_env()).detail
    with socket.socket() as silent:  # accepts, never answers: the probe's deadline ends it
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setattr(network, "MAVEN_CENTRAL", f"http://127.0.0.1:{silent.getsockname()[1]}/")
        started = time.monotonic()
        check = network.check_network(base_env(LABKIT_HOME=str(tmp_path)), timeout_s=0.5)
    assert time.monotonic() - started < 2
    assert check.status == checks.FAIL and "Maven Central" in check.detail and "make jars" in check.fix
    assert check.blocks == tuple(ALL)


def test_the_operating_systems():
    linux = checks.check_os("linux")  # says what the suite tests where, not that this machine's faults work
    assert linux.status == checks.OK and "probes none" in linux.detail and "tested here" not in linux.detail
    mac = checks.check_os("darwin")
    assert mac.status == checks.WARN and "not tested here" in mac.detail
    windows = checks.check_os("win32")
    assert windows.status == checks.FAIL and "WSL2" in windows.fix and windows.blocks == tuple(ALL)


def test_every_notebook_has_its_needs():
    on_disk = sorted(p.name[:2] for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert on_disk == ALL
    assert needs.users(needs.JAVAC, external_broker=False) == tuple(JAVAC_NOTEBOOKS)
    # With another cluster, only 00 and 07 need nothing on this machine: no JVM, no Kafka jars, no Spark jars.
    local = (needs.JVM, needs.JAVAC, needs.KAFKA_JARS, needs.SPARK_JARS)
    assert [nb.number for nb in needs.NOTEBOOKS
            if not any(needs.users(key, external_broker=True).count(nb.number) for key in local)] == DOCKER_ALONE
    assert report.blocked(run_checks(base_env(), memory_mib=10**6)) == {}


def test_without_the_venv_the_package_index_is_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(checks, "STAMP", tmp_path / "no-venv" / ".installed")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        check = network.check_network(base_env(PIP_INDEX_URL=f"http://127.0.0.1:{silent.getsockname()[1]}/simple/"),
                                      timeout_s=0.5)
    assert check.status == checks.FAIL and "the package index" in check.detail and "Maven" not in check.detail
    assert check.blocks == tuple(ALL)
