"""The doctor's checks: each looks at one prerequisite of the lab and returns a :class:`Check` that names the fix when
it fails and the notebooks the failure stops (:mod:`labkit.doctor.needs`).

Every check takes the environment to judge (``env``: PATH, JAVA_HOME, LABKIT_HOME, LABKIT_BOOTSTRAP,
LABKIT_KAFKA_VERSION), so a test can take a prerequisite away without touching the machine. None starts more than a
``java -version``, a ``javac -version`` and, where systemd runs, a ``systemctl --version``; the network probes are in
:mod:`labkit.doctor.network`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import psutil

from labkit.broker import runtime
from labkit.broker.javac import NoJavacError, find_javac
from labkit.broker.ports import HOST, PORT_RANGE, ensure_free, free_port
from labkit.broker.probe import check_reachable
from labkit.broker.settings import kafka_version
from labkit.core.errors import BrokerUnreachableError, JavaError, JavaTooOldError, PortInUseError
from labkit.doctor import needs
from labkit.hub import unit

OK, WARN, FAIL = "ok", "warn", "FAIL"
REPO = Path(__file__).resolve().parents[2]
#: The venv ``make`` installs, and the stamp it touches once ``pip install`` finished (the Makefile's ``STAMP``).
STAMP = REPO / ".venv" / ".installed"
#: The venv's size once installed, MiB (about 1.4 GB, pyspark alone about 450 MB: issue 39).
VENV_MIB = 1400
#: What the lab writes to ``$LABKIT_HOME`` once the venv is in place, MiB: the jars (about 45 MB per Kafka release, 10
#: for Spark's connector), the class-data archives (about 500 MB per release), broker data and experiment files
#: (measured on this machine: 988 MB of archives for two releases, 150 MB of experiments).
LAB_HOME_MIB = 1024
#: Debian's package (``apt-get install chromium``) the browser tests drive (:mod:`labkit_dev.browser`); Playwright's own
#: browsers are not downloaded.
CHROMIUM = "/usr/bin/chromium"
_JDK_FIX = ("install a JDK 17 or newer (Debian/Ubuntu: `sudo apt-get install openjdk-17-jdk-headless`; macOS: "
            "`brew install openjdk@17`) and put its bin/ first on PATH, or set JAVA_HOME to it")
#: JDK releases with G1GC's data-corruption bug that Spark 4.2 warns about (apache/spark PR 55798): 25.0.0-25.0.2.
BAD_JDK_25 = ((25, 0, 0), (25, 0, 2))


@dataclass(frozen=True)
class Check:
    """One prerequisite's verdict.

    Attributes:
        name: the prerequisite ("java", "memory").
        status: :data:`OK`, :data:`WARN` (works, with a caveat) or :data:`FAIL`.
        detail: what was found.
        fix: what to do about it (empty when there is nothing to do).
        blocks: the notebooks (two-digit numbers) that cannot run because of it; only a failure blocks any.
    """

    name: str
    status: str
    detail: str
    fix: str = ""
    blocks: tuple[str, ...] = ()


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def external_broker(env: Mapping[str, str] | None = None) -> bool:
    """Whether the lab uses another cluster (``LABKIT_BOOTSTRAP`` set, e.g. docker compose's) instead of its own."""
    return bool(_env(env).get("LABKIT_BOOTSTRAP"))


def check_os(platform: str | None = None) -> Check:
    """The operating system, and which of the lab's faults work there (crash = SIGKILL, pause = SIGSTOP/SIGCONT, the
    fault proxy's lost responses, children killed with the lab: Linux's prctl ``PR_SET_PDEATHSIG``,
    :mod:`labkit.core.procs`).

    Args:
        platform: ``sys.platform`` to judge (default this one's).
    """
    platform = platform or sys.platform
    uname = os.uname() if hasattr(os, "uname") else None
    where = f"{uname.sysname} {uname.release} {uname.machine}" if uname else platform
    if platform.startswith("linux"):
        return Check("operating system", OK, f"{where}: Linux, the system the lab's test suite runs every fault on "
                                             "(crash, pause, the fault proxy, children dying with the lab: `make test`); "
                                             "this check probes none of them")
    if platform == "darwin":
        return Check("operating system", WARN, f"{where}: crash, pause and the fault proxy work; a lab killed hard "
                     "leaves its children running (no parent-death signal off Linux); not tested here",
                     "after a crash of the lab, `make stop` and end leftover java processes by hand")
    if platform in ("win32", "cygwin"):
        return Check("operating system", FAIL, f"{where}: no SIGSTOP or SIGKILL, so no pause or crash",
                     "run the lab in WSL2 (Ubuntu), where it is Linux (not tested here)",
                     tuple(nb.number for nb in needs.NOTEBOOKS))
    return Check("operating system", WARN, f"{where}: POSIX signals should work; not tested here",
                 "if a fault misbehaves, run the lab on Linux")


def check_cores() -> Check:
    """The CPU cores: how many the machine has and how many this process may use (its affinity, e.g. under
    ``taskset``). One is enough (``make test SPEED=half`` runs the suite on one), only slower."""
    total = psutil.cpu_count() or 1
    try:
        usable = len(psutil.Process().cpu_affinity())
    except (AttributeError, psutil.Error):  # no affinity on macOS
        usable = total
    detail = f"{total}" + (f" ({usable} usable by this process)" if usable != total else "")
    if usable >= 2:
        return Check("cores", OK, detail)
    return Check("cores", WARN, detail + ": the lab runs, slower (experiments take about twice as long)",
                 "close other busy programs; 2 or more cores make experiments quicker")


def lab_rss_mib() -> float:
    """Resident memory of the lab ``make lab`` started, if it runs (broker and JupyterLab, with their children:
    the broker JVM, kernels, participants), MiB; 0 when it does not run."""
    from labkit.lab import server as lab

    total = 0
    for state in (lab.running_broker_state(), lab.read_state("jupyter")):
        try:
            proc = psutil.Process(state["pid"]) if state else None
            for each in [proc, *proc.children(recursive=True)] if proc else []:
                total += each.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def check_memory(available_mib: float | None = None, env: Mapping[str, str] | None = None,
                 measured: Path | None = None, way: str = "lab") -> Check:
    """Free memory against each notebook's peak measured the way the lab runs here (``way``: ``"lab"``, ``make lab``'s,
    for a laptop, what ``make doctor`` judges; ``"hub"``, an attendee's on the workshop hub;
    :data:`labkit.doctor.needs.MEASURED_FOR`), the whole lab's (broker, JupyterLab, kernel, participants), counting the
    running lab's own memory as free (:func:`lab_rss_mib`). The detail names where the figures were measured. A notebook
    that does not fit fails; one not measured is never judged (a warning, whatever the memory); with no measured figures
    at all (an install without them) the check warns and judges nothing.

    Args:
        available_mib: memory available to new processes, MiB (default psutil's ``virtual_memory().available`` plus
            the running lab's).
        env: unused (with ``LABKIT_BOOTSTRAP`` the lab runs no broker here, yet the peaks are kept as measured, with
            the broker: a margin).
        measured: the measured figures' file (default the file of ``way``).
        way: ``"lab"`` or ``"hub"``.

    Raises:
        KeyError: ``way`` is neither.
    """
    default, where = needs.MEASURED_FOR[way]
    running = lab_rss_mib() if available_mib is None else 0
    available = psutil.virtual_memory().available / 2**20 + running if available_mib is None else available_mib
    counted = f" (counting the running lab's {running:.0f} as free)" if running else ""
    try:
        peaks = needs.measured_peaks(measured or default)
    except (OSError, ValueError) as exc:
        return Check("memory", WARN, f"{available:.0f} MiB available{counted}; no measured peaks to judge it by "
                     f"({exc})", f"install labkit from its repository, whose labkit/doctor/{default.name} has them")
    unmeasured = [nb.number for nb in needs.NOTEBOOKS if nb.number not in peaks]
    short = [nb.number for nb in needs.NOTEBOOKS if peaks.get(nb.number, 0) > available]
    listed = ", ".join(f"{nb.number} {peaks[nb.number]}" if nb.number in peaks else f"{nb.number} not measured"
                       for nb in needs.NOTEBOOKS)
    detail = f"{available:.0f} MiB available{counted}; peak of the whole lab per notebook (MiB, {where}): {listed}"
    if short:
        most = max(peaks[number] for number in short)
        return Check("memory", FAIL, detail,
                     f"free {most - available:.0f} MiB more (close browsers' tabs, IDEs, other labs: `make stop`), or "
                     f"run only the notebooks that fit", tuple(short))
    if unmeasured:
        return Check("memory", WARN, detail, f"{', '.join(unmeasured)} not judged (no measured run): watch the free "
                     "memory while it runs")
    return Check("memory", OK, detail)


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(env: Mapping[str, str] | None = None, free_mib: float | None = None) -> Check:
    """Free disk where the lab writes: ``$LABKIT_HOME`` (jars, archives, broker data) and, if the venv is not
    installed yet, the repository (about 1.4 GB).

    Args:
        free_mib: free space to judge, MiB (default psutil's ``disk_usage`` of ``$LABKIT_HOME``'s disk).
    """
    home = runtime.labkit_home(dict(_env(env)))
    needed = LAB_HOME_MIB + (0 if STAMP.exists() else VENV_MIB)
    free = psutil.disk_usage(str(_existing(home))).free / 2**20 if free_mib is None else free_mib
    detail = f"{free / 1024:.1f} GiB free at {_existing(home)} (the lab needs about {needed / 1024:.1f} GiB)"
    if free >= needed:
        return Check("disk", OK, detail)
    return Check("disk", FAIL, detail, f"free {needed - free:.0f} MiB on that disk, or set LABKIT_HOME to a folder on "
                 "a disk with room", tuple(nb.number for nb in needs.NOTEBOOKS))


def check_python(version: tuple[int, ...] | None = None) -> Check:
    """This Python (the venv's when run by ``make``): 3.11 or newer (pyproject.toml's ``requires-python``).

    Args:
        version: ``sys.version_info`` to judge (default this one's).
    """
    version = tuple(version or sys.version_info[:3])
    detail = f"{'.'.join(map(str, version))} ({sys.executable})"
    if version >= (3, 11):
        return Check("python", OK, detail)
    return Check("python", FAIL, detail, "install Python 3.11 or newer and run `make PYTHON=python3.11 lab`",
                 tuple(nb.number for nb in needs.NOTEBOOKS))


def java_release(java: str) -> tuple[int, int, int]:
    """``java``'s release as (feature, interim, update), from :func:`labkit.broker.runtime.java_version_text`
    (``version "25.0.1"`` -> (25, 0, 1), ``version "25"`` -> (25, 0, 0)); (0, 0, 0) if unknown.

    Raises:
        OSError, subprocess.TimeoutExpired: ``java`` cannot be run.
    """
    major = runtime.java_major(java)
    match = re.search(r'version "(\d+)(?:\.(\d+))?(?:\.(\d+))?', runtime.java_version_text(java))
    if not match or major != int(match.group(1)):  # "1.8.0_x" style: major from runtime, the rest unknown
        return (major, 0, 0)
    return (major, int(match.group(2) or 0), int(match.group(3) or 0))


def check_java(env: Mapping[str, str] | None = None) -> Check:
    """The ``java`` the lab runs (``$JAVA_HOME/bin/java``, else on PATH: :func:`labkit.broker.runtime.find_java`):
    17 or newer (Kafka 4.x); a warning for 25.0.0-25.0.2, which Spark 4.2 deprecates (G1GC data corruption,
    apache/spark PR 55798). Without it the notebooks that use a JVM (:data:`labkit.doctor.needs.JVM`, and every one
    while the lab runs its own broker) cannot run.
    """
    env = dict(_env(env))
    blocked = needs.users(needs.JVM, external_broker(env))
    try:
        java = runtime.find_java(env)
    except JavaTooOldError as exc:
        return Check("java", FAIL, f"{exc.java} is Java {exc.major or 'of unknown version'}, too old (17+ needed)",
                     _JDK_FIX, blocked)
    except JavaError:
        where = f"JAVA_HOME={env['JAVA_HOME']}" if env.get("JAVA_HOME") else "none on PATH"
        return Check("java", FAIL, f"no java ({where})", _JDK_FIX, blocked)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("java", FAIL, f"java does not run: {exc}", _JDK_FIX, blocked)
    release = java_release(java)
    detail = f"Java {'.'.join(map(str, release))} ({java})"
    if BAD_JDK_25[0] <= release <= BAD_JDK_25[1]:
        return Check("java", WARN, detail + ": Spark 4.2 deprecates JDK 25 before 25.0.3 (G1GC data corruption, "
                     "apache/spark PR 55798; notebook 04)", "upgrade to JDK 25.0.3 or newer, or use JDK 17 or 21")
    return Check("java", OK, detail)


def check_javac(env: Mapping[str, str] | None = None) -> Check:
    """``javac`` beside that Java (:func:`labkit.broker.javac.find_javac`), the sign of a JDK: the Java participant is
    compiled at first use, and notebook 05's Java program runs on ``java``'s source launcher, which only a JDK has
    (the notebooks of :data:`labkit.doctor.needs.JAVAC`; the broker runs without it)."""
    env = dict(_env(env))
    blocked = needs.users(needs.JAVAC, external_broker(env))
    try:
        javac = find_javac(env)
    except NoJavacError:
        return Check("javac", FAIL, "no javac (a Java runtime, not a JDK)", _JDK_FIX, blocked)
    except JavaError:
        return Check("javac", FAIL, "no Java 17+, so no javac", _JDK_FIX, blocked)
    try:
        out = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=30)
        version = (out.stdout + out.stderr).strip() or "javac"
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("javac", FAIL, f"{javac} does not run: {exc}", _JDK_FIX, blocked)
    return Check("javac", OK, f"{version} ({javac})")


def jar_caches(env: Mapping[str, str] | None = None) -> dict[str, Path | None]:
    """The lab's jar caches, by requirement key (:data:`~labkit.doctor.needs.KAFKA_JARS`,
    :data:`~labkit.doctor.needs.SPARK_JARS`): the folder if complete, else ``None`` (Maven resolves it at first use).

    Raises:
        LabkitError: ``LABKIT_KAFKA_VERSION`` names a release labkit does not run.
    """
    from labkit.spark.session import SPARK_VERSION  # the folder name of connector_jars(), which resolves as it looks

    env = dict(_env(env))
    spark = runtime.labkit_home(env) / f"spark-kafka-{SPARK_VERSION}"
    return {needs.KAFKA_JARS: runtime.jar_dir(env) if runtime.cached_jars(env) is not None else None,
            needs.SPARK_JARS: spark if runtime.complete_jars(spark) is not None else None}


def venv_installed() -> bool:
    """Whether ``make``'s venv is installed and newer than requirements.txt and pyproject.toml (else the next
    ``make`` reinstalls it from the package index)."""
    try:
        stamp = STAMP.stat().st_mtime
        return all(stamp >= (REPO / name).stat().st_mtime for name in ("requirements.txt", "pyproject.toml"))
    except OSError:
        return False


def _mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.glob("*.jar")) / 2**20


def check_caches(env: Mapping[str, str] | None = None) -> Check:
    """The jar caches (Kafka's jars in ``$LABKIT_HOME/kafka-<release>``, Spark's connector in
    ``$LABKIT_HOME/spark-kafka-<release>``) and the wheels (the venv installed). A missing cache is only a warning:
    Maven or pip fills it on first use, if the network and Maven answer (checked by their own lines)."""
    caches = jar_caches(env)
    kafka = f"Kafka {kafka_version(None, dict(_env(env)))}"
    kafka_jars = caches[needs.KAFKA_JARS]
    parts = [f"{kafka} jars {f'cached ({_mib(kafka_jars):.0f} MiB)' if kafka_jars else 'not cached'}",
             f"Spark connector jars {'cached' if caches[needs.SPARK_JARS] else 'not cached'}",
             f"Python packages {'installed (.venv)' if venv_installed() else 'not installed or out of date'}"]
    detail = "; ".join(parts) + f" (in {runtime.labkit_home(dict(_env(env)))})"
    if all(caches.values()) and venv_installed():
        return Check("caches", OK, detail)
    return Check("caches", WARN, detail, "`make jars` (needs Maven and Maven Central) or `make setup` (needs the "
                 "package index) fills them; once filled, the lab needs no network")


def check_maven(env: Mapping[str, str] | None = None) -> Check:
    """``mvn`` on PATH: needed only while a jar cache is missing (Maven 3.8+ resolves the jars, ``jvm/*.xml``)."""
    env = dict(_env(env))
    mvn = shutil.which("mvn", path=env.get("PATH"))
    missing = [key for key, folder in jar_caches(env).items() if folder is None]
    if mvn:
        return Check("maven", OK, mvn)
    fix = "install Maven 3.8+ (Debian/Ubuntu: `sudo apt-get install maven`; macOS: `brew install maven`)"
    if not missing:
        return Check("maven", WARN, "no mvn on PATH; not needed now: every jar is cached", fix + " before a new "
                     "Kafka release or an emptied cache needs it")
    blocked = sorted({n for key in missing for n in needs.users(key, external_broker(env))})
    return Check("maven", FAIL, f"no mvn on PATH, and the {', '.join(missing)} are not cached", fix, tuple(blocked))


def check_make(env: Mapping[str, str] | None = None) -> Check:
    """GNU make on PATH (``make lab``, ``make test``; macOS's make 3.81 is GNU make too)."""
    make = shutil.which("make", path=_env(env).get("PATH"))
    fix = "install GNU make (Debian/Ubuntu: `sudo apt-get install make`; macOS: `xcode-select --install`)"
    if not make:
        return Check("make", WARN, "no make on PATH (`python -m labkit up` starts the lab without it)", fix)
    try:
        first = subprocess.run([make, "--version"], capture_output=True, text=True, timeout=5).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        first = []
    if first and first[0].startswith("GNU Make"):
        return Check("make", OK, f"{first[0]} ({make})")
    return Check("make", WARN, f"{make} is not GNU make", fix + " (BSD: `gmake`)")


def check_ports(ports: Mapping[int, str] | None = None, env: Mapping[str, str] | None = None) -> Check:
    """The lab's ports on 127.0.0.1: the lab picks free ones in :data:`labkit.broker.ports.PORT_RANGE` (broker,
    JupyterLab, the fault proxy), so one must be free there; and each port of ``ports``, which the lab (or the user's
    set-up) needs as it is (:func:`labkit.broker.ports.ensure_free`).

    Args:
        ports: TCP port number -> what it is for (e.g. ``{9092: "docker compose's broker"}``).
    """
    everyone = tuple(nb.number for nb in needs.NOTEBOOKS)
    try:
        free_port(attempts=50)
    except PortInUseError as exc:
        return Check("ports", FAIL, f"no free port in {PORT_RANGE.start}-{PORT_RANGE.stop - 1} on {HOST}",
                     str(exc).split(": ", 1)[-1], everyone)
    for port, what in (ports or {}).items():
        try:
            ensure_free(port, what)
        except PortInUseError as exc:
            return Check("ports", FAIL, f"port {port} ({what}) is in use on {HOST}",
                         str(exc).split(" is in use: ", 1)[-1], everyone)
    named = "".join(f", {port} ({what})" for port, what in (ports or {}).items())
    return Check("ports", OK, f"free on {HOST}: ports in {PORT_RANGE.start}-{PORT_RANGE.stop - 1} (the lab picks "
                 f"its own){named}")


def check_bootstrap(env: Mapping[str, str] | None = None, timeout_s: float = 2.0) -> Check | None:
    """With ``LABKIT_BOOTSTRAP`` set, whether a Kafka broker answers there (a metadata request:
    :func:`labkit.broker.probe.check_reachable`, as :func:`labkit.connect` asks it; the lab then starts no broker of
    its own); ``None`` without it.

    Args:
        timeout_s: the answer's deadline, s.
    """
    bootstrap = _env(env).get("LABKIT_BOOTSTRAP")
    if not bootstrap:
        return None
    try:
        check_reachable(bootstrap, timeout_s)
    except BrokerUnreachableError:
        return Check("LABKIT_BOOTSTRAP", FAIL, f"no Kafka broker answers at {bootstrap} within {timeout_s:g} s",
                     "start that cluster (`docker compose up -d`), or unset LABKIT_BOOTSTRAP so the lab runs its own "
                     "broker", tuple(nb.number for nb in needs.NOTEBOOKS))
    return Check("LABKIT_BOOTSTRAP", OK, f"a Kafka broker answers at {bootstrap}: the lab uses that cluster, no local "
                 "broker")


def check_chromium(env: Mapping[str, str] | None = None) -> Check:
    """Debian's ``chromium`` at :data:`CHROMIUM`, where the browser tests look for it (Playwright drives it). No
    notebook needs it. ``env`` is unused: the path is fixed, not looked up on PATH."""
    if os.path.exists(CHROMIUM):
        return Check("chromium", OK, f"{CHROMIUM} (for the browser test)")
    return Check("chromium", WARN, f"no {CHROMIUM}: `make test` skips the browser test (no notebook needs it)",
                 "`sudo apt-get install chromium` (Debian), or `make browser` as root")


def check_hub(root: Path | str = "/", version: int | None = None) -> Check:
    """Which backend ``make hub`` (the room on one server) keeps attendees apart with on the machine whose root is
    ``root``, and what it lacks there (:func:`labkit.hub.unit.survey`; ``version``: systemd's, default the running
    one's). No notebook needs the hub: at worst a warning.

    Raises:
        LabkitError: ``systemctl --version`` overran its deadline.
    """
    backend, lacking, line = unit.survey(root, version)
    if backend and not lacking:
        return Check("hub backend", OK, line)
    fix = ("install what is missing" if backend else
           "only `make hub` needs it: for a room, rent a stock Debian 12/13 or Ubuntu 24.04 server (docs/instructor.md)")
    return Check("hub backend", WARN, line, fix)
