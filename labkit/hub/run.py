"""``make hub``: check what the workshop hub needs, set it up (:mod:`labkit.hub.install`), then run JupyterHub as root.

Usage: ``python -m labkit.hub [--room NAME | --state DIR] [--ip IP] [--port PORT] [--admin NAME] [--password PW]
[--admin-password PW] [--prefix DIR] [--timeout MINUTES] [--ssl-cert FILE --ssl-key FILE] [--memory MIB] [--tasks N]
[--tmp MIB]``, or through make: ``make hub [ROOM=NAME] ARGS="--ip 0.0.0.0 --port 8000"``. Each run is a room
(:mod:`labkit.hub.rooms`): a new one (``.hub/rooms/<date>``) unless ``--room NAME`` (``ROOM=NAME``) names one to resume;
the first lines say which, and name the rooms not ended. The passwords come from ``--password``/``--admin-password`` or,
better (a command line is visible to every user of the machine in ``ps``), from ``LABKIT_HUB_PASSWORD`` and
``LABKIT_HUB_ADMIN_PASSWORD``; there is no default. The hub stops with Ctrl-C, and every attendee's server with it.

This process runs JupyterHub as its child, in a session of its own, and watches it (:func:`serve`), for two things
JupyterHub alone does not do:

* **The URL once it works.** JupyterHub's proxy answers 404 until JupyterHub has added its route, seconds after the
  start (5-7 s here; the URL printed before JupyterHub started came 5 s before the first 200): the URL and what to
  tell the room are printed only once the sign-in page answers through the proxy (a GET of ``<url>hub/login``
  returning 200, :func:`login_answers`); after :data:`READY_S` seconds without it, a line says it does not answer and
  where its log is (JupyterHub's lines in this terminal).
* **A second Ctrl-C that ends it.** JupyterHub runs its whole stop again on each SIGINT or SIGTERM (its
  ``init_signal``: every signal schedules ``shutdown_cancel_tasks``, which awaits ``cleanup`` anew: with the hub
  exec'd by ``make hub``, two SIGINTs logged "initiating shutdown" and each lab's end twice), so a second Ctrl-C
  waited as long as the first: every attendee's server stopped by JupyterHub's ``LocalProcessSpawner``
  (SIGINT, SIGTERM after 10 s, SIGKILL after 5 more) and :class:`labkit.hub.spawner.LabSpawner`'s end of their
  processes (SIGKILL after 10 s). Here the first Ctrl-C (or SIGTERM) asks JupyterHub to stop (SIGTERM: its clean
  stop); the second SIGKILLs JupyterHub and stops at once what it ran, as the next hub would after a kill
  (:func:`labkit.hub.leftovers.stop_left_by`: every attendee's lab, SIGKILL after 10 s, and its sandbox; the proxy and
  the services; the firewall table), saying each. What can stay: an attendee's sandbox (namespace, cgroups) whose
  processes had all ended before the kill, and the hub's nftables table when nothing was left to stop; the
  attendee's next lab replaces the one (:func:`labkit.hub.sandbox.prepare`), ``make hub-end`` removes it with their
  user, and the next hub on the room makes the table again at its first sign-in.

Bad input is refused before anything starts, each message naming the fix (:class:`~labkit.core.errors.LabkitError`):
not root, a missing or short password (the workshop code 8 characters, as an attendee's own password
(:mod:`labkit.hub.auth`), the instructor's 32), the
port in use, a second hub on the same state folder (a ``flock`` on ``<state>/hub.lock``, held by this process and
JupyterHub for their whole lives), no ``npm``, a machine where attendees cannot be kept apart
(:func:`labkit.hub.sandbox.check`), a memory or task limit too small for a lab. What a hub on the same state folder
left running when it was killed is stopped first, and said (:mod:`labkit.hub.leftovers`).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Callable

import psutil

from labkit.broker.ports import ensure_free, free_port
from labkit.core.errors import LabkitError, PortInUseError
from labkit.hub import firewall, install, leftovers, rooms, sandbox, unit
from labkit.hub.sandbox import TMP_MIB
from labkit.hub.config import (ADMIN_PASSWORD_ENV, CULL_IDLE_S, MEMORY_MIB, PASSWORD_ENV, TASKS, HubSettings,
                               write_config_file)
from labkit.core.procs import spawn
from labkit.core.waiting import wait_until
from labkit.hub.names import why_refused

#: Seconds a new hub waits for the lock of one that has ended or is ending (its pid gone or a zombie: a hub killed
#: with SIGKILL releases the lock once its last thread has exited).
LOCK_WAIT_S = 10.0
#: The least memory (MiB) and tasks an instructor may give an attendee: JupyterLab, a kernel and the broker (256 MiB
#: heap) run in about 600 MiB and 300 threads.
MIN_MEMORY_MIB, MIN_TASKS = 768, 512
#: The least lengths of the workshop code (as of an attendee's own password, labkit.hub.auth.MIN_PASSWORD) and of the
#: instructor's password.
MIN_PASSWORD, MIN_ADMIN_PASSWORD = 8, 32
#: Seconds ``make hub`` waits for the hub's sign-in page to answer through its proxy before saying it does not
#: (JupyterHub answered about 10 s after its start here; a machine busy with a room's sign-ins takes longer). It waits
#: on after.
READY_S = 120.0
#: Seconds one GET of the sign-in page may take.
TRY_S = 2.0
#: Seconds JupyterHub may take to die of SIGKILL (a process in the kernel's uninterruptible sleep takes longer).
KILL_WAIT_S = 10.0
CLEAR_TEXT_WARNING = ("WARNING: no --ssl-cert/--ssl-key: the hub serves plain HTTP, so passwords and notebooks travel "
                      "in clear over the network. Fine on 127.0.0.1; in a room, give a certificate and key.")


def check_root() -> None:
    """Refuse to go on unless this process is root.

    Raises:
        LabkitError: not root (the message says ``sudo make hub``).
    """
    if os.geteuid() != 0:
        raise LabkitError("The hub runs as root (it makes a Unix user per attendee and starts their servers as them):"
                          " sudo make hub")


def check_passwords(password: str | None, admin_password: str | None) -> None:
    """Refuse a missing or too short password.

    Raises:
        LabkitError: the attendees' password is missing or under 8 characters, the instructor's missing or under 32,
            or both are the same (the message names the variable or option to set).
    """
    if not password or len(password) < MIN_PASSWORD:
        raise LabkitError(f"The attendees' shared password is {'too short' if password else 'missing'}: set "
                          f"{PASSWORD_ENV} (or --password) to one of at least {MIN_PASSWORD} characters.")
    if not admin_password or len(admin_password) < MIN_ADMIN_PASSWORD:
        raise LabkitError(f"The instructor's password is {'too short' if admin_password else 'missing'}: set "
                          f"{ADMIN_PASSWORD_ENV} (or --admin-password) to one of at least {MIN_ADMIN_PASSWORD} "
                          "characters, e.g. $(python3 -c 'import secrets; print(secrets.token_urlsafe(32))').")
    if password == admin_password:
        raise LabkitError(f"{PASSWORD_ENV} and {ADMIN_PASSWORD_ENV} must differ: the instructor's password is "
                          "their own.")


def check_port(ip: str, port: int) -> None:
    """Refuse ``port`` (TCP) on ``ip`` when something listens there already.

    Raises:
        LabkitError: the port is in use or the address is not this machine's (the message names ``--port``/``--ip``).
    """
    try:
        ensure_free(port, "the hub", host=ip)  # binds as tornado does (SO_REUSEADDR): TIME_WAIT is no conflict
    except PortInUseError:
        raise LabkitError(f"Port {port} on {ip} is in use (another hub, or another server): stop it, or "
                          "choose another with --port (or leave --port out for a free one).") from None
    except LabkitError as exc:
        raise LabkitError(f"{exc} --ip must be an address of this machine (0.0.0.0 for all).") from None


def lock_state(state: Path) -> int:
    """Take the hub's lock in ``state`` (made mode 0700), writing this process's pid in it, and return its file
    descriptor, inheritable so that the JupyterHub process this one starts holds it too while it runs.

    Raises:
        LabkitError: another hub holds it (its pid named, and how to stop it); one that has ended or is ending is
            waited for, at most :data:`LOCK_WAIT_S` seconds.
    """
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)
    fd = os.open(state / "hub.lock", os.O_RDWR | os.O_CREAT, 0o600)
    pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    if not wait_until(lambda: _locked(fd), LOCK_WAIT_S if _exiting(pid) else 0.0, 0.1):
        os.close(fd)
        raise LabkitError(f"A hub already runs from {state} (pid {pid}): use it, stop it first (Ctrl-C in its "
                          f"terminal, or kill {pid}), or give this one another --state folder.") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    os.set_inheritable(fd, True)
    return fd


def _locked(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _exiting(pid: str) -> bool:
    """Whether the hub that wrote ``pid`` in the lock file has ended or is ending (gone, or a zombie whose threads
    may still hold the lock: a hub killed with SIGKILL)."""
    try:
        return psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE
    except (ValueError, psutil.NoSuchProcess):
        return True
    except psutil.Error:
        return False


def prepare(ip: str = "127.0.0.1", port: int | None = None, admin: str = "instructor",
            prefix: Path | str | None = None, state: Path | None = None, cull_idle_s: int = CULL_IDLE_S,
            ssl_cert: str = "", ssl_key: str = "", extra: dict | None = None, memory_mib: int = MEMORY_MIB,
            tasks: int = TASKS, tmp_mib: int = TMP_MIB, say=print) -> tuple[list[str], HubSettings]:
    """Everything before JupyterHub starts: root and port checks, the set-up (:func:`labkit.hub.install.install_shared`,
    :func:`~labkit.hub.install.install_proxy`), the checks that attendees can be kept apart
    (:func:`labkit.hub.sandbox.check`) and the gateway address (:func:`~labkit.hub.sandbox.ensure_gateway`), the room's
    record (:func:`labkit.hub.rooms.ensure_record`) and the config file in ``state`` (None: a new room,
    :func:`labkit.hub.rooms.choose`). ``port`` None: a free one. Returns the hub's command line and its settings. Takes
    no lock (:func:`lock_state`) and checks no password.

    Raises:
        LabkitError: not root, the port in use, the admin name refused, a limit below its minimum, no npm, nftables,
            ``ip``, ``setpriv`` or cgroup v1 unusable, IP forwarding on, or the set-up failed.
    """
    check_root()
    if bool(ssl_cert) != bool(ssl_key):
        raise LabkitError("HTTPS needs both --ssl-cert and --ssl-key (PEM files).")
    if (why := why_refused(admin)):
        raise LabkitError(f"The admin name cannot be used: {why} (--admin NAME)")
    if memory_mib < MIN_MEMORY_MIB or tasks < MIN_TASKS:
        raise LabkitError(f"Each attendee needs at least {MIN_MEMORY_MIB} MiB (--memory) and {MIN_TASKS} tasks "
                          f"(--tasks) for their JupyterLab and broker; given {memory_mib} MiB and {tasks}.")
    port = port or free_port(ports=firewall.HUB_PORTS)
    check_port(ip, port)
    prefix = install.install_shared(prefix, say)
    proxy = install.install_proxy(say=say)
    firewall.check()
    sandbox.check()
    if (warning := sandbox.pid_room(tasks)):  # every attendee account's lab at its task limit at once
        say(f"warning: {warning}")
    sandbox.ensure_gateway()
    state = rooms.choose()[0] if state is None else Path(state)
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)
    settings = HubSettings(ip=ip, port=port, hub_port=free_port(ports=firewall.HUB_PORTS),
                           proxy_api_port=free_port(ports=firewall.HUB_PORTS), prefix=str(prefix),
                           state=str(Path(state).resolve()), proxy=str(proxy), admin=admin, cull_idle_s=cull_idle_s,
                           ssl_cert=ssl_cert, ssl_key=ssl_key, memory_mib=memory_mib, tasks=tasks,
                           tmp_mib=tmp_mib, room=rooms.ensure_record(state)["id"], extra=extra or {})
    config = write_config_file(settings)
    return [str(prefix / "venv" / "bin" / "jupyterhub"), "-f", str(config)], settings


def hub_env(password: str, admin_password: str) -> dict[str, str]:
    """The hub process's environment: this one without Python path settings (the hub imports the shared copy of
    labkit only), plus the two passwords (:data:`~labkit.hub.config.PASSWORD_ENV`, ``ADMIN_PASSWORD_ENV``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, PASSWORD_ENV: password, ADMIN_PASSWORD_ENV: admin_password}


def start(password: str, admin_password: str, state: Path, log_path: Path, **options) -> tuple[subprocess.Popen,
                                                                                              HubSettings]:
    """Start a hub in the background (the test's way): :func:`check_passwords`, :func:`lock_state` on ``state``,
    :func:`prepare` with ``options``, then JupyterHub with its output in ``log_path``, started by
    :func:`labkit.core.procs.spawn` (SIGKILLed if this process dies). Returns the process (its own session: stop it with
    SIGTERM, it stops the attendees' servers and removes its firewall table) and the settings.

    Raises:
        LabkitError: as :func:`check_passwords`, :func:`lock_state` and :func:`prepare`.
    """
    check_passwords(password, admin_password)
    fd = lock_state(state)
    try:
        leftovers.stop_left_by(state, options.get("say", print))
        argv, settings = prepare(state=state, **options)
        with open(log_path, "ab") as log:
            proc = spawn(argv, env=hub_env(password, admin_password), cwd=settings.state, stdout=log,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=(fd,))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{proc.pid}\n".encode(), 0)  # the pid a second hub's message names
    finally:
        os.close(fd)  # the hub holds its inherited copy
    return proc, settings


def login_answers(url: str, timeout_s: float = TRY_S) -> bool:
    """Whether the hub at ``url`` (its public URL, ending in ``/``) serves its sign-in page: a GET of ``<url>hub/login``
    through its proxy answered 200 within ``timeout_s`` seconds (the proxy answers 404 until JupyterHub added its
    route; JupyterHub's login handler answers 200). An HTTPS certificate is not checked: this asks whether the hub
    answers, not who it is."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"{url}hub/login", timeout=timeout_s, context=context) as answer:
            return answer.status == 200
    except (OSError, ValueError):  # refused, a 404 (HTTPError), no answer in time
        return False


def count_stops() -> list[int]:
    """Count Ctrl-C (SIGINT) and SIGTERM from now on, for :func:`serve`: returns the list each signal's number is
    appended to as it comes. Call it before starting JupyterHub: a child's exec resets a handled signal to its default,
    where an ignored one (a shell's background job ignores SIGINT and SIGQUIT) would stay ignored in JupyterHub and
    its services (the idle culler, stopped with SIGINT); SIGQUIT is reset to its default here for the same reason."""
    stops: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stops.append(signum))
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    return stops


def serve(proc: subprocess.Popen, url: str, state: Path, ready_lines: list[str], stops: list[int],
          ready_s: float = READY_S, say: Callable[[str], None] = print) -> int:
    """Watch the hub ``proc`` (JupyterHub in a session of its own, on ``state``) until it ends, as the module docstring
    says: say ``ready_lines`` once :func:`login_answers` at ``url`` (or, after ``ready_s`` seconds without, that it
    does not answer and where its log is; the lines follow if it answers later); on the first signal counted in
    ``stops`` (:func:`count_stops`) SIGTERM it (its own stop: every attendee's server, then itself), on the second
    SIGKILL it and stop what it ran (:func:`labkit.hub.leftovers.stop_left_by`, each said). Checks every 0.2 s (and
    up to :data:`TRY_S` s for each GET). Returns JupyterHub's exit status, or 130 (128 + SIGINT) when stopped at once.

    Raises:
        LabkitError: as :func:`labkit.hub.leftovers.stop_left_by` (a sandbox that could not be removed).
    """
    started, ready, late, stopping = time.monotonic(), False, False, False
    while proc.poll() is None:
        if len(stops) > 1:
            return stop_at_once(proc, state, say)
        if stops and not stopping:
            stopping = True
            proc.send_signal(signal.SIGTERM)
            say("Stopping the hub: every attendee's server first (up to about 30 s; their files are kept). Ctrl-C "
                "again to stop it at once.")
        if not (ready or stopping):
            if login_answers(url):
                ready = True
                for line in ready_lines:
                    say(line)
            elif not late and time.monotonic() - started > ready_s:
                late = True
                say(f"The hub does not answer at {url}hub/login after {ready_s:g} s: its log is JupyterHub's lines "
                    "above in this terminal. Still waiting (Ctrl-C stops it).")
        time.sleep(0.2)
    if not (ready or stopping):
        say(f"The hub ended (exit status {proc.returncode}) before it answered: its log is JupyterHub's lines above.")
    return proc.returncode


def stop_at_once(proc: subprocess.Popen, state: Path, say: Callable[[str], None] = print) -> int:
    """SIGKILL JupyterHub ``proc`` (waiting at most :data:`KILL_WAIT_S` s) and stop what it ran on ``state``
    (:func:`labkit.hub.leftovers.stop_left_by`: attendees' labs, proxy, services, firewall table, each said); returns
    130 (128 + SIGINT).

    Raises:
        LabkitError: as :func:`labkit.hub.leftovers.stop_left_by`.
    """
    say("Stopping the hub at once: JupyterHub killed, then every attendee's lab and the hub's own processes stopped "
        "(their files are kept).")
    proc.kill()
    try:
        proc.wait(KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        say(f"JupyterHub (pid {proc.pid}) is still dying after SIGKILL; stopping what it ran anyway.")
    if not leftovers.stop_left_by(state, say):
        say("Nothing of the hub was left running.")
    return 128 + signal.SIGINT


def main(argv: list[str]) -> int:
    """The command line (module docstring): check, set up, start JupyterHub (the lock inherited), then watch it
    (:func:`serve`): the URL and what to tell the room once it answers, Ctrl-C to stop it, twice to stop it at once.
    Returns the exit status."""
    parser = argparse.ArgumentParser(prog="make hub ARGS=...", description="The lab for a room: JupyterHub on this "
                                     "machine, one Unix user per attendee.")
    parser.add_argument("--ip", default="127.0.0.1", help="address to listen on (0.0.0.0: every network of the room)")
    parser.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    parser.add_argument("--admin", default="instructor", help="the instructor's sign-in name (default instructor)")
    parser.add_argument("--password", default=os.environ.get(PASSWORD_ENV),
                        help=f"attendees' password ({PASSWORD_ENV})")
    parser.add_argument("--admin-password", default=os.environ.get(ADMIN_PASSWORD_ENV),
                        help=f"the instructor's password ({ADMIN_PASSWORD_ENV})")
    parser.add_argument("--prefix", default=None, help="shared install (default $LABKIT_HUB_PREFIX or /opt/labkit)")
    parser.add_argument("--room", default=None, help="the room to resume, or to start under this name (default: a "
                        f"new room named after the day, in {rooms.ROOMS})")
    parser.add_argument("--state", type=Path, default=None, help="a state folder of the hub's instead of a room's name")
    parser.add_argument("--timeout", type=float, default=CULL_IDLE_S / 60, help="minutes idle before a server stops")
    parser.add_argument("--ssl-cert", default="", help="PEM certificate for HTTPS")
    parser.add_argument("--ssl-key", default="", help="PEM key for HTTPS")
    parser.add_argument("--memory", type=int, default=MEMORY_MIB,
                        help=f"each attendee's memory limit, MiB (default {MEMORY_MIB}: notebook 04's peak and room)")
    parser.add_argument("--tasks", type=int, default=TASKS,
                        help=f"each attendee's limit of processes and threads (default {TASKS})")
    parser.add_argument("--tmp", type=int, default=TMP_MIB,
                        help=f"the size of each attendee's /tmp and /dev/shm, MiB (default {TMP_MIB}; tmpfs: what is "
                        "written there counts toward their --memory)")
    args = parser.parse_args(argv)
    on_cli = [name for name in ("--password", "--admin-password")
              if any(arg == name or arg.startswith(f"{name}=") for arg in argv)]
    if args.room is not None and args.state is not None:
        parser.error("--room or --state, not both")
    check_root()
    check_passwords(args.password, args.admin_password)
    state, new = (args.state, rooms.unused(args.state)) if args.state else rooms.choose(args.room)
    fd = lock_state(state)  # held by this process and inherited by JupyterHub: the lock lasts as long as either
    rooms.ensure_record(state)
    for line in rooms.first_lines(state, new):
        print(line, flush=True)
    print(f"Attendees' labs: {unit.survey()[2]}", flush=True)  # the sandbox's backend (labkit.hub.unit), what it lacks
    leftovers.stop_left_by(state)
    command, settings = prepare(args.ip, args.port, args.admin, args.prefix, state, int(args.timeout * 60),
                                args.ssl_cert, args.ssl_key, memory_mib=args.memory, tasks=args.tasks, tmp_mib=args.tmp)
    if on_cli:
        print(f"note: {' and '.join(on_cli)} on the command line can be read by every user of this machine (ps): "
              f"prefer {PASSWORD_ENV} / {ADMIN_PASSWORD_ENV}.")
    if not args.ssl_cert:
        print(CLEAR_TEXT_WARNING)
    where = settings.url if args.ip != "0.0.0.0" else f"{settings.url} here; in the room, http://<this machine's " \
        f"address>:{settings.port}/ (hostname -I lists them)"
    ready = [f"The hub is ready: {where}\n  attendees: their first sign-in takes a name of theirs (lowercase letters, "
             f"digits, - _), a password of their own and the workshop code (the shared password); later, name and own "
             f"password\n  instructor: {args.admin} and the admin password\n  idle servers stop after "
             f"{args.timeout:g} min; each attendee's lab may use {args.memory} MiB and {args.tasks} tasks; Ctrl-C "
             "stops the hub and every attendee's server (twice: at once)."]
    os.chdir(settings.state)  # where rooms.hub_pid finds the hub named in its lock
    stops = count_stops()
    print("Starting JupyterHub: the URL follows once it answers.", flush=True)
    proc = spawn(command, env=hub_env(args.password, args.admin_password), cwd=settings.state,
                 stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=(fd,))
    return serve(proc, settings.url, Path(settings.state), ready, stops,
                 say=lambda line: print(line, flush=True))

