"""Every attack of issue 63 made at once by one attendee of a real hub, for the room rehearsal (bench/room.py): code
run in their own lab as their kernel would run it (:func:`labkit.hub.sandbox.enter_command`, as their uid, in their
namespace and groups: what tests/hubtools.py's ``as_attendee`` does), and sign-ins through the hub's pages from this
machine (its proxy's URL, as a browser posts the form). Each attack's outcome is recorded as observed: ``refused``,
``bounded`` or ``cleaned`` when it failed the way a safe room fails it, ``GOT THROUGH`` (with what was seen) when it
did not, ``not exercised`` when the attempt itself did not happen (e.g. the live view never probed the fake broker).

:class:`Rogue` starts the attacks that last (the hub's locks tried every second, SysV shared memory and a queue, a
fake broker, full temporary folders, a process that drops ``LABKIT_HUB_STATE`` and leaves its session, the memory
hog and the CPU burn), makes the one-shot ones (port scans of the machine and of the other attendees, ``/proc``, the
sign-ins), takes the lasting ones' results once they were held :data:`HOLD_S` seconds (or the room ran), then makes a
fork bomb held at the lab's task limit. Once the room ran, the attendee kills their own JupyterLab (``kill -9`` from
their lab, leaving the rest running): the hub must end the rest of the lab at its next poll, and what is left of them
on the machine is looked at. Run as root (bench/room.py checks it); every wait has a deadline.
"""

from __future__ import annotations

import html
import http.cookiejar
import json
import os
import pwd
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil

from labkit.core.waiting import wait_until
from labkit.hub import firewall, install, leftovers, names, sandbox, users
from labkit.hub.sandbox import GATEWAY

from attack_scripts import (ESCAPE, FAKE_BROKER, FILL, FORK_BOMB, KILL_OWN_SERVER, LOCKS, MISCHIEF, PROC, SCAN,
                            SYSV)  # bench/attack_scripts.py

REFUSED, BOUNDED, CLEANED, THROUGH, NOT_EXERCISED = "refused", "bounded", "cleaned", "GOT THROUGH", "not exercised"
#: Seconds a lasting attack's script may take to say it started, and to answer "stop" with its result.
START_S, STOP_S = 120.0, 60.0
#: Seconds the lasting attacks are held at least (from their start) before their results are taken.
HOLD_S = 240.0
#: Seconds the fork bomb holds its processes at the lab's task limit.
BOMB_HOLD_S = 30
#: Seconds the instructor's stop of the attendee's lab may take until none of its processes nor its sandbox is left.
LAB_STOP_S = 180.0
#: Growth of the live view's resident memory (MiB) that still counts as bounded: one table's probe round reads at most
#: a broker's answer, never the 2 GiB a fake one announces (issue 63: 86 -> 1,112 MiB before).
LIVEVIEW_GROWTH_MIB = 64
#: Longest a live view probe may keep a connection to the fake broker open (s): its one deadline (PROBE_TIMEOUT_S, 1 s)
#: and the time to see the close.
PROBE_HELD_S = 3.0

def sysv_of(uid: int) -> list[str]:
    """The SysV shared memory segments and message queues of the machine's IPC namespace owned by ``uid``
    (``/proc/sysvipc``, uid is the eighth column): ``"shm <id>"``, ``"msg <id>"``."""
    found = []
    for kind in ("shm", "msg"):
        for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[7] == str(uid):
                found.append(f"{kind} {fields[1]}")
    return found


def listening_ports(uid: int) -> list[int]:
    """The TCP ports listening in attendee ``uid``'s network namespace (``ss`` run inside it)."""
    out = subprocess.run(["ip", "netns", "exec", sandbox.netns(uid), "ss", "-Htln"], capture_output=True, text=True,
                         timeout=30).stdout
    return sorted({int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if line.strip()})


def liveview_process(state: Path | str) -> psutil.Process | None:
    """The hub's live view service (:mod:`labkit.hub.liveview`, root's) among ``state``'s hub processes."""
    return next((p for p in leftovers.hub_processes(state) if "labkit.hub.liveview" in " ".join(p.cmdline())), None)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # a sign-in's answer is read as it is: 302 means accepted
        return None


class HubClient:
    """The hub's sign-in form and API over HTTP through its proxy (``url``), with cookies of its own: what a browser
    posts, without one."""

    def __init__(self, url: str) -> None:
        self.url, self.jar = url, http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect)

    def _open(self, request: urllib.request.Request, timeout_s: float) -> tuple[int, dict, str]:
        try:
            with self.opener.open(request, timeout=timeout_s) as answer:
                return answer.status, dict(answer.headers), answer.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode(errors="replace")

    def _xsrf(self) -> str:
        return next((c.value for c in self.jar if c.name == "_xsrf"), "")

    def sign_in(self, name: str, password: str, code: str = "", headers: dict | None = None,
                timeout_s: float = 60.0) -> dict:
        """Post the sign-in form (its ``_xsrf`` from a GET of the form first): ``{"accepted", "status", "said"}``,
        ``accepted`` when the hub redirected away from the form, ``said`` the form's message (at most 300 characters)
        and ``said_chars`` its whole length."""
        status, _, page = self._open(urllib.request.Request(f"{self.url}hub/login", headers=headers or {}), timeout_s)
        found = re.search(r'name="_xsrf" value="([^"]+)"', page)
        body = urllib.parse.urlencode({"username": name, "password": password, "workshop_code": code,
                                       "_xsrf": found.group(1) if found else self._xsrf()}).encode()
        status, answer_headers, page = self._open(urllib.request.Request(
            f"{self.url}hub/login", data=body, headers=headers or {}, method="POST"), timeout_s)
        location = answer_headers.get("Location", "")
        said = re.search(r'class="[^"]*login_error[^"]*"[^>]*>(.*?)</', page, re.S)
        said_text = html.unescape(re.sub(r"\s+", " ", said.group(1)).strip()) if said else ""
        return {"accepted": status == 302 and "/hub/login" not in location, "status": status,
                "said": said_text[:300], "said_chars": len(said_text)}

    def api(self, method: str, path: str, timeout_s: float = 60.0) -> tuple[int, str]:
        """Call the hub's REST API ``hub/api/<path>`` with this client's sign-in (its cookie and XSRF token, as the
        admin page does); the HTTP status and the answer's body."""
        status, _, body = self._open(urllib.request.Request(f"{self.url}hub/api/{path}", method=method,
                                                            headers={"X-XSRFToken": self._xsrf()}), timeout_s)
        return status, body


def _first_refused(said: list[str]) -> int | None:
    """The 1-based index of the first attempt the throttle refused, None if none was."""
    return next((i + 1 for i, text in enumerate(said) if "Too many" in text), None)


class Rogue:
    """The misbehaving attendee ``name`` of ``hub`` (bench/room.py's :func:`labkit_dev.drive.running_hub` dict), whose
    lab runs; ``others`` the names of the room's attendees (their labs run too)."""

    def __init__(self, hub: dict, name: str, others: list[str]) -> None:
        self.hub, self.name, self.others = hub, name, others
        self.entry = pwd.getpwnam(names.unix_name(name))
        self.uid = self.entry.pw_uid
        self.lasting: dict[str, subprocess.Popen] = {}
        self.outcomes: dict[str, dict] = {}
        self.started: dict[str, str] = {}
        self.escaped_pid: int | None = None
        self.instructor = HubClient(hub["url"])  # the instructor's own sign-in, used for the API after
        self.instructor_checks: list[dict] = []
        self.liveview_mib = {"before": None, "peak": None}
        self._stop_sampling = threading.Event()
        self.stop_hold = threading.Event()  # set: the lasting attacks' hold ends now (the room ran already)
        self.begun = 0.0
        self._sampler: threading.Thread | None = None

    # --- running code in the lab ------------------------------------------------------------------------------------

    def _command(self, script: str, *args: str) -> list[str]:
        return [*sandbox.enter_command(self.uid, self.entry.pw_gid, sandbox.private_root(self.hub["state"])),
                os.path.join(self.hub["prefix"], "venv", "bin", "python"), "-c", script, *args]

    def _env(self) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": self.entry.pw_dir, "LABKIT_HUB_STATE": str(self.hub["state"])}

    def run(self, script: str, *args: str, timeout_s: float = 180.0) -> subprocess.CompletedProcess:
        """Run ``script`` to its end in the lab, as the attendee."""
        return subprocess.run(self._command(script, *args), preexec_fn=lambda: sandbox.join_cgroups(self.uid),
                              capture_output=True, text=True, timeout=timeout_s, env=self._env())

    def start(self, what: str, script: str, *args: str) -> str:
        """Start the lasting ``script`` in the lab and wait for its first line (what it said when started)."""
        proc = subprocess.Popen(self._command(script, *args), preexec_fn=lambda: sandbox.join_cgroups(self.uid),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self._env())
        self.lasting[what] = proc
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_S)
        self.started[what] = (line[0].strip() if line else "") or f"no line in {START_S:g} s"
        return self.started[what]

    def stop(self, what: str) -> dict | None:
        """Ask the lasting ``what`` to stop; its JSON result (None if it gave none: its stderr's end is kept)."""
        proc = self.lasting.pop(what, None)
        if proc is None:
            return None
        try:
            out, err = proc.communicate("stop\n", timeout=STOP_S)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            proc.kill()
            out, err = proc.communicate(timeout=30)
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.outcomes.setdefault(f"{what} (its script)", {"outcome": NOT_EXERCISED, "stderr": err[-600:],
                                                             "returncode": proc.returncode})
            return None

    # --- the attacks ----------------------------------------------------------------------------------------------

    def begin(self) -> None:
        """Start every lasting attack (fills first, while the group has room, then the rest, the hog and burn last)."""
        self.begun = time.monotonic()
        self.liveview_mib["before"] = self._liveview_mib()
        self._sampler = threading.Thread(target=self._sample_liveview, daemon=True)
        self._sampler.start()
        self.start("fill", FILL)
        self.start("sysv", SYSV)
        self.start("locks", LOCKS, str(users.ACCOUNTS_LOCK), str(install.setup_lock(Path(self.hub["prefix"]))))
        self.start("fake broker", FAKE_BROKER)
        escaped = self.run(ESCAPE)
        words = escaped.stdout.split() if escaped.returncode == 0 else []
        self.escaped_pid = int(words[0]) if words else None
        self.started["escape"] = str(self.escaped_pid) if self.escaped_pid else escaped.stderr[-300:]
        self.start("mischief", MISCHIEF)

    def during(self, say=print) -> None:
        """The one-shot attacks, while the lasting ones run and the room runs its notebooks. An attempt that raised is
        recorded as not exercised, with what it raised, and the next one is made."""
        self.outcomes["escape, while the lab runs"] = {
            "outcome": "running" if self.escaped_pid and psutil.pid_exists(self.escaped_pid) else NOT_EXERCISED,
            "pid": self.escaped_pid, "env_has_hub_state": self._has_hub_state(self.escaped_pid)}
        for what, attempt in (("sysv, while held", self._sysv_held), ("fill, while held", self._fill_held),
                              ("host ports 30000-32767", self._scan_host),
                              ("other attendees' addresses", self._scan_others), ("/proc of others", self._proc),
                              ("sign-ins", self._sign_ins), ("lasting attacks' results", self._collect),
                              ("fork bomb", self._fork_bomb)):
            try:
                self.outcomes[what] = attempt()
            except Exception as exc:  # noqa: BLE001 (recorded; the other attacks are still made)
                self.outcomes[what] = {"outcome": NOT_EXERCISED, "raised": f"{type(exc).__name__}: {exc}"[:600]}
            row = self.outcomes[what]
            say(f"rogue: {what}: " + (", ".join(f"{k} {v['outcome']}" for k, v in row.items())
                                      if "outcome" not in row else row["outcome"]))

    def _collect(self) -> dict:
        """Once the lasting attacks were held :data:`HOLD_S` seconds at least: their results (the hog and burn go on
        until the lab stops). Before the fork bomb: at the lab's task limit, its scripts could not answer."""
        self.stop_hold.wait(max(0.0, self.begun + HOLD_S - time.monotonic()))
        held_s = round(time.monotonic() - self.begun)
        locks = self.stop("locks")
        if locks is not None:
            got = {path: counts for path, counts in locks.items() if set(counts) - {"PermissionError",
                                                                                   "FileNotFoundError"}}
            self.outcomes["the hub's lock files"] = {"outcome": THROUGH if got else REFUSED, "tries": locks}
        fake = self.stop("fake broker")
        self._stop_sampling.set()
        self.outcomes["fake broker vs the live view"] = self._fake_broker(fake)
        fill = self.stop("fill")
        if fill is not None:
            self.outcomes["fill, while held"]["written"] = fill
            if any(row["errno"] != "ENOSPC" for row in fill.values()):  # stopped by something else than its size
                self.outcomes["fill, while held"]["outcome"] = THROUGH
        sysv = self.stop("sysv")
        if sysv is not None:
            self.outcomes["sysv, while held"]["made"] = sysv
        self.outcomes["sysv, once its process ended"] = {"outcome": THROUGH if sysv_of(self.uid) else CLEANED,
                                                          "machine_sees": sysv_of(self.uid)}
        return {"outcome": "collected", "held_s": held_s}

    def end(self, say=print) -> None:
        """Once the room ran: the hog's OOM kills, then the attendee kills their own JupyterLab and what is left of
        them on the machine is looked at once the hub ended their lab (or, if it did not, the instructor stopped it)."""
        kills = sandbox.oom_kills(self.uid)
        self.outcomes["memory hog"] = {"outcome": BOUNDED if kills else NOT_EXERCISED, "oom_kills_in_its_group": kills}
        # the attendee ends their own JupyterLab (kill -9 from their terminal), leaving the rest of their lab
        # running: the hub sees its server gone at its next poll (Spawner.poll_interval, 10 s: labkit.hub.config) and
        # must end every other process of the lab, the one that left its session without the hub's variable too, and
        # release its sandbox; only if it did not, the instructor stops the lab (the admin page's Stop Server)
        def gone() -> bool:
            for proc in self.lasting.values():  # reaped as they end: the bench started them, a zombie is its own
                proc.poll()
            return not users.processes_of(self.uid) and not sandbox.exists(self.uid)

        killed = self.run(KILL_OWN_SERVER)
        started = time.monotonic()
        by_the_hub = wait_until(gone, LAB_STOP_S, 1.0)
        ended_s = round(time.monotonic() - started, 1)
        status = None
        if not by_the_hub:
            self.instructor.sign_in(self.hub["admin"], self.hub["admin_password"])  # its session for the API
            status, _ = self.instructor.api("DELETE", f"users/{self.name}/server")
            wait_until(gone, LAB_STOP_S, 1.0)
        left = {"processes": [f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in users.processes_of(self.uid)],
                "in_its_groups": sorted(leftovers.in_groups(self.uid)), "sysv": sysv_of(self.uid),
                "shared_folders": [str(p) for p in sandbox.owned_by(self.uid)],
                "private_folder": sorted(os.listdir(sandbox.private_tmp(sandbox.private_root(self.hub["state"]),
                                                                        self.uid)))
                if sandbox.private_tmp(sandbox.private_root(self.hub["state"]), self.uid).exists() else []}
        escaped_alive = bool(self.escaped_pid) and psutil.pid_exists(self.escaped_pid) and \
            psutil.Process(self.escaped_pid).status() != psutil.STATUS_ZOMBIE
        for what, proc in list(self.lasting.items()):  # the hog and burn: the lab's stop must have ended them
            if proc.poll() is None:
                left["processes"].append(f"{what} still running after the lab's stop")
                proc.kill()
            proc.wait(30)
        self.lasting.clear()
        self.outcomes["setsid without LABKIT_HUB_STATE, once the lab stopped"] = {
            "outcome": NOT_EXERCISED if not self.escaped_pid else THROUGH if escaped_alive else CLEANED,
            "pid": self.escaped_pid}
        self.outcomes["the lab's leftovers once its JupyterLab was killed"] = {
            "outcome": CLEANED if by_the_hub and not any(left[k] for k in ("processes", "in_its_groups", "sysv",
                                                                          "shared_folders")) else THROUGH,
            "killed": killed.stdout.strip() or killed.stderr[-300:], "ended_by_the_hub_in_s": ended_s if by_the_hub
            else None, "instructor_stop_status": status, **left}
        say(f"rogue: lab ended {'by the hub' if by_the_hub else 'NOT by the hub'} {ended_s} s after its JupyterLab "
            f"was killed; left: {left}")

    # --- each outcome ---------------------------------------------------------------------------------------------

    def _liveview_mib(self) -> float | None:
        proc = liveview_process(self.hub["state"])
        try:
            return round(proc.memory_info().rss / 2**20, 1) if proc else None
        except psutil.Error:
            return None

    def _sample_liveview(self) -> None:
        while not self._stop_sampling.wait(0.5):
            now = self._liveview_mib()
            if now is not None:
                self.liveview_mib["peak"] = max(self.liveview_mib["peak"] or 0.0, now)

    def _fake_broker(self, result: dict | None) -> dict:
        before, peak = self.liveview_mib["before"], self.liveview_mib["peak"]
        row = {"port": self.started.get("fake broker"), "liveview_rss_mib_before": before,
               "liveview_rss_mib_peak": peak, **(result or {})}
        held = (result or {}).get("held", [])
        kinds = {h["kind"] for h in held}
        if kinds != {"2 GiB", "trickle"} or before is None or peak is None:
            row["outcome"] = NOT_EXERCISED
        elif max(h["held_s"] for h in held) <= PROBE_HELD_S and peak - before <= LIVEVIEW_GROWTH_MIB:
            row["outcome"] = BOUNDED
        else:
            row["outcome"] = THROUGH
        row["longest_held_s"] = max((h["held_s"] for h in held), default=None)
        row["held"] = held[:10]  # the first few, for the record
        return row

    def _sysv_held(self) -> dict:
        seen = sysv_of(self.uid)
        return {"outcome": THROUGH if seen else REFUSED if self.started.get("sysv") == "started" else NOT_EXERCISED,
                "machine_sees": seen, "memory_charged_to_its_group": True}

    def _fill_held(self) -> dict:
        ours = [str(p) for p in sandbox.owned_by(self.uid)]
        private = sandbox.private_tmp(sandbox.private_root(self.hub["state"]), self.uid)
        on_disk = sum(p.stat().st_size for p in private.rglob("*") if p.is_file()) if private.exists() else 0
        ok = self.started.get("fill") == "started"
        return {"outcome": NOT_EXERCISED if not ok else THROUGH if ours or on_disk > 2**20 else BOUNDED,
                "machine_shared_folders": ours, "bytes_under_the_hub_state": on_disk}

    @staticmethod
    def _has_hub_state(pid: int | None) -> bool | None:
        try:
            return "LABKIT_HUB_STATE" in psutil.Process(pid).environ() if pid else None
        except psutil.Error:
            return None

    def _scan_host(self) -> dict:
        service = socket.create_server(("0.0.0.0", _free_hub_port()))  # another program of the machine, all addresses
        port = service.getsockname()[1]
        hub_own = sorted({c.laddr.port for c in psutil.net_connections("tcp")
                          if c.status == psutil.CONN_LISTEN and c.laddr.ip == GATEWAY})
        try:
            done = self.run(SCAN, json.dumps([f"{GATEWAY}:{p}" for p in firewall.HUB_PORTS]), timeout_s=600)
        finally:
            service.close()
        if done.returncode:
            return {"outcome": NOT_EXERCISED, "stderr": done.stderr[-600:]}
        found = json.loads(done.stdout)
        reached = sorted(int(t.rsplit(":", 1)[1]) for t in found["connected"])
        through = [p for p in reached if p not in hub_own]
        return {"outcome": THROUGH if through else REFUSED, "ports": len(firewall.HUB_PORTS),
                "host_service_port": port, "reached": reached, "hub_own_gateway_ports": hub_own,
                "reached_not_the_hub_s": through, "counts": found["counts"]}

    def _scan_others(self) -> dict:
        targets = []
        for name in self.others:
            uid = pwd.getpwnam(names.unix_name(name)).pw_uid
            targets += [f"{sandbox.address(uid)}:{port}" for port in listening_ports(uid)]
        done = self.run(SCAN, json.dumps(targets), timeout_s=300)
        if done.returncode or not targets:
            return {"outcome": NOT_EXERCISED, "targets": len(targets), "stderr": done.stderr[-600:]}
        found = json.loads(done.stdout)
        return {"outcome": THROUGH if found["connected"] else REFUSED, "targets": len(targets),
                "connected": found["connected"], "counts": found["counts"]}

    def _proc(self) -> dict:
        others = []
        for name in self.others[:2]:
            uid = pwd.getpwnam(names.unix_name(name)).pw_uid
            others += [str(p.pid) for p in users.processes_of(uid)[:3]]
        others.append(str(self.hub["pid"]))
        done = self.run(PROC, *others)
        if done.returncode:
            return {"outcome": NOT_EXERCISED, "stderr": done.stderr[-600:]}
        found = json.loads(done.stdout)
        foreign = {uid: n for uid, n in found["uids_listed"].items() if int(uid) != self.uid}
        read = {k: v for k, v in found["others"].items() if v == "read"}
        return {"outcome": THROUGH if foreign or read else REFUSED, "listed_of_other_uids": foreign,
                "read_of_others": read, "tried": found["others"]}

    def _fork_bomb(self) -> dict:
        proc = subprocess.Popen(self._command(FORK_BOMB, str(BOMB_HOLD_S)),
                                preexec_fn=lambda: sandbox.join_cgroups(self.uid), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self._env())
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(180)
        pids = next(g for g in sandbox.cgroups(self.uid) if (g / "pids.max").exists())
        pids_now = int((pids / "pids.current").read_text())
        # while the bomb holds the lab's tasks, the machine still starts a process (another attendee's, the hub's)
        machine = subprocess.run(["true"], timeout=30).returncode == 0
        try:
            proc.communicate(timeout=BOMB_HOLD_S + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=30)
        words = line[0].split() if line else []
        if len(words) != 2:
            return {"outcome": NOT_EXERCISED, "said": line, "returncode": proc.returncode}
        started, errno = map(int, words)
        limit = int((pids / "pids.max").read_text())
        return {"outcome": BOUNDED if errno == 11 and started < limit and machine else THROUGH,
                "started": started, "errno": errno, "pids_max": limit, "lab_tasks_while_held": pids_now,
                "machine_started_a_process_meanwhile": machine, "held_s": BOMB_HOLD_S}

    def _sign_ins(self) -> dict:
        """The sign-in attacks through the hub's proxy from this machine (the room's address too)."""
        hub, found = self.hub, {}
        victim = self.others[0]
        jupyterhub = psutil.Process(hub["pid"])
        # megabyte names: refused, cut short in the log, no memory kept per name (issue 63 #10: 100 of them grew the
        # hub by 117 MiB, never freed): three rounds of 30, the hub's resident memory after each; a memory kept per
        # name grows with every round, the allocator's high-water mark of the request bodies only with the first
        rss, logged = [jupyterhub.memory_info().rss / 2**20], hub["log"].stat().st_size
        said = []
        for _ in range(3):
            said += [HubClient(hub["url"]).sign_in(chr(97 + i % 26) * 2**20, "a-password", "wrong-code")
                     for i in range(30)]
            rss.append(jupyterhub.memory_info().rss / 2**20)
        longest = max((len(line) for line in hub["log"].read_bytes()[logged:].splitlines()), default=0)
        found["90 names of 1 MiB"] = {
            "outcome": REFUSED if all("cannot be an attendee's name" in s["said"] for s in said)
            and rss[3] - rss[1] < 10 and longest < 2000 else THROUGH,
            "hub_rss_mib_before_and_after_each_30": [round(r, 1) for r in rss],
            "longest_new_log_line": longest, "said": said[0]["said"], "said_chars": said[0]["said_chars"]}
        # a 73-byte password, as a first one and under a taken name (issue 63 #14)
        first = HubClient(hub["url"]).sign_in(f"{self.name}z", "b" * 73, hub["password"])
        taken = HubClient(hub["url"]).sign_in(self.name, "b" * 73)
        found["a 73-byte password"] = {
            "outcome": REFUSED if all(r["status"] < 500 and not r["accepted"] and "at most 72 bytes" in r["said"]
                                      for r in (first, taken)) else THROUGH, "first": first, "taken": taken}
        # wrong passwords under the instructor's and another attendee's name, then their right ones (issue 63 #4)
        wrong_admin = [HubClient(hub["url"]).sign_in(hub["admin"], f"guess-{i}")["said"] for i in range(35)]
        right_admin = self.instructor.sign_in(hub["admin"], hub["admin_password"])
        found["35 wrong passwords under the instructor's name"] = {
            "outcome": REFUSED if right_admin["accepted"] else THROUGH, "right_password": right_admin,
            "wrong_refused_by_throttle": sum("Too many" in s for s in wrong_admin)}
        from labkit_dev.drive import own_password
        wrong_victim = [HubClient(hub["url"]).sign_in(victim, f"guess-{i}")["said"] for i in range(10)]
        right_victim = HubClient(hub["url"]).sign_in(victim, own_password(hub, victim))
        found[f"10 wrong passwords under {victim}'s name"] = {
            "outcome": REFUSED if right_victim["accepted"] else THROUGH, "right_password": right_victim,
            "wrong_said": wrong_victim[-1]}
        # 35 failed first sign-ins, each with a new forged X-Real-IP and X-Forwarded-For entry (issue 63 #8)
        forged = [HubClient(hub["url"]).sign_in(f"{self.name}f{i}", "a-password", "wrong-code",
                                                headers={"X-Real-IP": f"10.9.0.{i}",
                                                         "X-Forwarded-For": f"10.8.0.{i}"})["said"]
                  for i in range(35)]
        first_refused = _first_refused(forged)
        found["35 forged X-Real-IP and X-Forwarded-For"] = {
            "outcome": REFUSED if first_refused and first_refused <= 31 and all("Too many" in s for s in
                                                                                 forged[first_refused - 1:])
            else THROUGH, "first_refused_at": first_refused, "last_said": forged[-1]}
        self.instructor_signs_in("once the sign-in attacks were made")
        return found

    def instructor_signs_in(self, when: str) -> bool:
        """The instructor signs in with their right password, in a client of its own; recorded in
        :attr:`instructor_checks` with ``when``; whether it was accepted."""
        answer = HubClient(self.hub["url"]).sign_in(self.hub["admin"], self.hub["admin_password"])
        self.instructor_checks.append({"when": when, **answer})
        return answer["accepted"]

    def every_outcome(self) -> dict[str, str]:
        """``{attack: outcome}``, the sign-ins' each under its own name."""
        flat = {}
        for what, row in self.outcomes.items():
            if what == "sign-ins":
                flat.update({f"sign-in: {k}": v["outcome"] for k, v in row.items()})
            else:
                flat[what] = row["outcome"] if isinstance(row, dict) and "outcome" in row else str(row)
        return flat


def _free_hub_port() -> int:
    """A port of :data:`labkit.hub.firewall.HUB_PORTS` free on every address of this machine."""
    from labkit.broker.ports import free_port
    return free_port(ports=firewall.HUB_PORTS)
