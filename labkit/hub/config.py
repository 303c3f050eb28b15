"""The workshop hub's JupyterHub configuration, built from a few settings (:class:`HubSettings`).

:func:`configure` fills JupyterHub's config object ``c`` (what ``jupyterhub -f <file>`` runs the file with; the file is
written by :func:`write_config_file`, two lines calling :func:`configure`). Every behaviour below is a JupyterHub 6.1
setting, named as JupyterHub names it:

* ``JupyterHub.ip``/``port``: where attendees connect (127.0.0.1 unless ``--ip``); ``ssl_cert``/``ssl_key`` for HTTPS.
  ``JupyterHub.hub_ip``: :data:`labkit.hub.sandbox.GATEWAY`, the one address of the machine an attendee's network
  namespace reaches (their JupyterLab talks to the hub's API there); ``hub_port`` and
  ``ConfigurableHTTPProxy.api_url`` (127.0.0.1): free ports (JupyterHub's defaults, 8081 and 8001, would clash with
  a second hub on the machine, e.g. the test's).
* ``ConfigurableHTTPProxy.command``: the proxy ``make hub`` installed with npm
  (:func:`labkit.hub.install.install_proxy`).
* ``JupyterHub.db_url``, ``cookie_secret_file``, ``ConfigurableHTTPProxy.pid_file``: in the hub's state folder (0700).
* ``JupyterHub.authenticator_class``: :class:`labkit.hub.auth.LabAuthenticator` (``FirstUseAuthenticator``: each
  name's own password, in ``<state>/passwords.dbm``), its ``workshop_code`` and ``admin_password`` from the hub
  process's environment (:data:`PASSWORD_ENV`, :data:`ADMIN_PASSWORD_ENV`: never written to a file);
  ``LabAuthenticator.instructor``: the instructor's name, who is no JupyterHub admin (``Authenticator.admin_users``
  empty, the ``admin`` role's members set to none in ``load_roles``, which also demotes an admin of an older room's
  database at start) but holds :data:`INSTRUCTOR_ROLE`; ``JupyterHub.template_paths``: the lab's sign-in form
  (:data:`TEMPLATES`, with the workshop code field).
* ``JupyterHub.spawner_class``: :class:`labkit.hub.spawner.LabSpawner`, with the attendees' private temporary folders
  (``private_tmp``, in the state folder) and the limits (``memory_mib``, ``tasks``, ``tmp_mib``: :class:`HubSettings`);
  ``Spawner.cmd``: the shared venv's Python running :mod:`labkit.hub.singleuser`; ``Spawner.environment``: the shared
  venv first on ``PATH``; ``Spawner.env_keep``: only the locale (nothing of root's environment, e.g. its ``VIRTUAL_ENV``
  or a password, reaches an attendee).
* ``JupyterHub.services`` and ``load_roles``: ``jupyterhub-idle-culler`` (PyPI) as a hub-managed service with the scopes
  its README lists, stopping a server idle for ``cull_idle_s`` (default 60 min, ``--timeout``); and the instructor's
  live view (:mod:`labkit.hub.liveview`) on a free port of the gateway, proxied at ``/services/liveview/``
  (``oauth_no_confirm``: part of the hub) and listening on the gateway, with the scopes it reads the hub with
  (``list:users``, ``read:users``, ``read:roles:users``, ``read:servers``); only :data:`INSTRUCTOR_ROLE` holds its
  access scope. The ``user`` role is :data:`USER_SCOPES`.
  ``Spawner.environment`` gives attendees its address (:data:`labkit.hub.report.URL_ENV`), to which their kernels report
  with their own API token.
* ``JupyterHub.cleanup_servers`` (True, JupyterHub's default, kept explicit): stopping the hub stops every attendee's
  server.
* ``JupyterHub.default_url`` (:func:`landing`): where a sign-in without a ``next`` page lands. An attendee: their lab
  (JupyterHub's own default, the spawn). The instructor: the live view, so no lab of theirs is made unless they ask
  for one (*Start My Server* on the hub's home page): that lab is a Unix user of the room like an attendee's
  (``LabSpawner.room``, the room's id: :mod:`labkit.hub.rooms`), removed with the room.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labkit.broker.ports import free_port
from labkit.hub.firewall import HUB_PORTS, table_name
from labkit.hub.sandbox import GATEWAY, TMP_MIB, private_root

#: The environment variable holding the attendees' shared password (at least 8 characters).
PASSWORD_ENV = "LABKIT_HUB_PASSWORD"
#: The environment variable holding the instructor's own password (at least 32 characters).
ADMIN_PASSWORD_ENV = "LABKIT_HUB_ADMIN_PASSWORD"
#: The lab's JupyterHub templates (labkit.hub.auth): the sign-in form with the workshop code field.
TEMPLATES = Path(__file__).with_name("templates")
#: Seconds JupyterHub's "not running" page waits before it starts the attendee's lab itself
#: (``implicit_spawn_seconds``; after a stop, the lab's own ``templates/not_running.html``).
IMPLICIT_SPAWN_S = 2
#: Idle time after which the culler stops an attendee's server, in seconds (issue 38: 60 min).
CULL_IDLE_S = 60 * 60
#: Each attendee's memory limit, MiB, unless the instructor sets one (``--memory``): the largest notebook's peak on the
#: hub, 04 at about 1.5 GiB with JupyterLab (labkit/doctor/hub-memory.json), and room for a re-run.
MEMORY_MIB = 2048
#: The instructor's role (``JupyterHub.load_roles``), held by the ``--admin`` name instead of JupyterHub's ``admin``
#: role, whose scopes JupyterHub fixes (``jupyterhub.roles.create_role`` refuses to change them) and include
#: ``access:servers`` and ``tokens`` of every user. With those, a page of an attendee's server open in the instructor's
#: browser runs on the hub's own origin (no subdomains) and can use the hub's API as the instructor: make its author an
#: admin, mint itself a token, open every lab (tests/test_hub_origin.py; docs/hub-decisions.md).
INSTRUCTOR_ROLE = "instructor"
#: What the instructor may do: the admin page (``admin-ui``) and what its buttons call (start, stop, edit and delete
#: users and their servers: ``admin:users``, ``servers``), and the live view (its ``access:services`` scope). Not
#: ``access:servers`` (no attendee's JupyterLab: their notebooks are read in the live view, script-free:
#: :mod:`labkit.hub.notebook_view`), nor ``tokens`` of others, nor ``admin`` (JupyterHub refuses to make anyone an
#: admin for a user who is not one: ``UserAPIHandler.patch``).
INSTRUCTOR_SCOPES = ["admin-ui", "admin:users", "servers", "access:services!service=liveview"]
#: Every user's own scopes (the ``user`` role, by default ``self``): their model, activity, server and its access, and
#: to read their tokens, but not to make tokens (``tokens``; JupyterHub makes the ones a lab needs itself) nor share a
#: server (``shares``): so a script running as the instructor cannot mint itself a lasting instructor token.
USER_SCOPES = ["read:users!user", "users:activity!user", "servers!user", "access:servers!user", "read:tokens!user"]
#: Each attendee's limit of processes and threads (``--tasks``): notebook 04's Spark cluster beside the broker runs
#: about a thousand threads; a fork bomb stops here.
TASKS = 4096


@dataclass
class HubSettings:
    """What :func:`configure` needs: addresses (``ip`` str, ``port``, ``hub_port``, ``proxy_api_port`` TCP ports),
    folders (``prefix`` the shared install, ``state`` the hub's own 0700 folder, ``proxy`` the proxy command), the
    instructor's hub name ``admin``, ``cull_idle_s`` seconds, the TLS ``ssl_cert``/``ssl_key`` paths (or ""), and each
    attendee's limits: ``memory_mib`` (MiB), ``tasks`` (processes and threads) and ``tmp_mib`` (MiB, the size of each of
    their ``/tmp`` and ``/dev/shm``: :attr:`labkit.hub.sandbox.Limits.tmp_mib`); ``room``: the room's id
    (:func:`labkit.hub.rooms.ensure_record`, "" for none), written in each Unix user the hub makes."""

    ip: str
    port: int
    hub_port: int
    proxy_api_port: int
    prefix: str
    state: str
    proxy: str
    admin: str = "instructor"
    cull_idle_s: int = CULL_IDLE_S
    ssl_cert: str = ""
    ssl_key: str = ""
    memory_mib: int = MEMORY_MIB
    tasks: int = TASKS
    tmp_mib: int = TMP_MIB
    room: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The URL attendees open."""
        host = "127.0.0.1" if self.ip in ("", "0.0.0.0") else self.ip
        return f"{'https' if self.ssl_cert else 'http'}://{host}:{self.port}/"


def configure(c, settings: dict) -> None:
    """Fill JupyterHub's config ``c`` from ``settings`` (:class:`HubSettings` as a dict), as the module docstring says.

    Raises:
        KeyError: a setting is missing. (JupyterHub itself rejects a password too short, naming the trait.)
    """
    s = HubSettings(**settings)
    state, venv_bin = Path(s.state), Path(s.prefix) / "venv" / "bin"
    c.JupyterHub.ip, c.JupyterHub.port = s.ip, s.port
    if s.ssl_cert:
        c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = s.ssl_cert, s.ssl_key
    c.JupyterHub.hub_ip, c.JupyterHub.hub_port = GATEWAY, s.hub_port
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
    c.ConfigurableHTTPProxy.command = [s.proxy]
    c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
    c.JupyterHub.cleanup_servers = True

    c.JupyterHub.authenticator_class = "labkit.hub.auth.LabAuthenticator"
    c.LabAuthenticator.workshop_code = os.environ.get(PASSWORD_ENV, "")
    c.LabAuthenticator.admin_password = os.environ.get(ADMIN_PASSWORD_ENV, "")
    c.FirstUseAuthenticator.dbm_path = str(state / "passwords.dbm")  # each attendee's own password (bcrypt)
    c.JupyterHub.template_paths = [str(TEMPLATES)]  # the sign-in form with the workshop code
    c.LabAuthenticator.instructor = s.admin
    c.Authenticator.admin_users = set()  # nobody is JupyterHub's admin: INSTRUCTOR_ROLE instead
    c.Authenticator.allow_all = True

    c.JupyterHub.spawner_class = "labkit.hub.spawner.LabSpawner"
    # an API stop (the admin page's Delete User, the culler) waits this long before answering "still stopping"; Delete
    # User then fails with 400 "in the process of stopping" (JupyterHub's default 10 s). LabSpawner.stop ends JupyterLab
    # (LocalProcessSpawner: SIGKILL after 10 + 5 s at most) then the broker cleanly (end_processes: SIGKILL after 10 s)
    c.JupyterHub.tornado_settings = {"slow_stop_timeout": 60}
    c.Spawner.cmd = [str(venv_bin / "python"), "-m", "labkit.hub.singleuser"]
    c.Spawner.default_url = "/lab"
    # an attendee who comes to their lab's URL while it is not running (culled while away, reset by the instructor, or
    # stopped as they signed in) has it started after this many seconds instead of meeting "Launch Server" (JupyterHub's
    # implicit spawn): each attendee has one server, so the server started is the one they asked for
    c.JupyterHub.implicit_spawn_seconds = IMPLICIT_SPAWN_S
    # ... and one who came while it was stopping, from the "not running" page that follows (templates/not_running.html)
    c.JupyterHub.template_vars = {"spawn_after_stop_seconds": IMPLICIT_SPAWN_S}
    c.Spawner.env_keep = ["LANG", "LC_ALL"]
    c.Spawner.environment = {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv_bin.parent)}
    liveview_port = free_port(ports=HUB_PORTS)
    liveview = f"http://{GATEWAY}:{liveview_port}"  # the instructor's live view, where attendees' kernels report
    c.Spawner.environment["LABKIT_LIVEVIEW_URL"] = f"{liveview}/services/liveview/"  # labkit.hub.report.URL_ENV
    c.Spawner.environment["LABKIT_BROKER_HEAP_MB"] = "256"  # embedded.HEAP_ENV: each attendee's brokers, bench/hub.py
    c.Spawner.start_timeout = 120  # a first sign-in on a loaded machine: copies, then JupyterLab's first start
    c.Spawner.poll_interval = 10  # LabSpawner.poll refreshes the attendee's memory notice (30 s is JupyterHub's default)
    c.Spawner.http_timeout = 420  # JupyterLab's first start on a machine busy with a room (twenty at once)
    c.LabSpawner.shared_cache = str(Path(s.prefix) / "cache")  # labkit.hub.install.cache_dir: jars, compiled Java
    c.LabSpawner.firewall_table = table_name(s.state)  # labkit.hub.firewall: the wall around the namespaces
    c.LabSpawner.private_tmp = str(private_root(state))  # labkit.hub.sandbox: each attendee's /tmp in it
    c.LabSpawner.memory_mib, c.LabSpawner.tasks, c.LabSpawner.tmp_mib = s.memory_mib, s.tasks, s.tmp_mib
    c.LabSpawner.room = s.room  # labkit.hub.rooms: the room's id in each Unix user's comment
    c.JupyterHub.default_url = landing  # the instructor to the live view, not to a lab of their own

    c.JupyterHub.services = [{"name": "idle-culler", "command": [
        str(venv_bin / "python"), "-m", "jupyterhub_idle_culler", f"--timeout={s.cull_idle_s}",
        f"--cull-every={max(10, min(300, s.cull_idle_s // 4))}"]}]
    c.JupyterHub.services.append({"name": "liveview", "url": liveview, "oauth_no_confirm": True,
                                  "command": [str(venv_bin / "python"), "-m", "labkit.hub.liveview"],
                                  "environment": {"LABKIT_HUB_STATE": str(state)}})  # liveview.STATE_ENV
    c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"],
                                "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
    c.JupyterHub.load_roles.append({"name": "liveview", "services": ["liveview"],
                                    "scopes": ["list:users", "read:users", "read:roles:users", "read:servers"]})
    c.JupyterHub.load_roles += [{"name": INSTRUCTOR_ROLE, "users": [s.admin], "scopes": INSTRUCTOR_SCOPES},
                                {"name": "user", "scopes": USER_SCOPES},
                                {"name": "admin", "users": [], "services": []}]
    for section, values in s.extra.items():  # tests: e.g. {"Spawner": {"start_timeout": 60}}
        for name, value in values.items():
            setattr(getattr(c, section), name, value)


def landing(handler) -> str:
    """Where JupyterHub sends a signed-in user who asked for no page (``JupyterHub.default_url``, called with the
    request's handler): the instructor (:data:`INSTRUCTOR_ROLE`) to the live view (``<base_url>services/liveview/``),
    anyone else nowhere in particular ("": JupyterHub's default, their own server, spawned if needed)."""
    user = handler.current_user
    instructor = user is not None and any(role.name == INSTRUCTOR_ROLE for role in user.roles)
    return f"{handler.base_url}services/liveview/" if instructor else ""


def is_instructor(model: dict) -> bool:
    """Whether a user model of the hub's REST API (read with ``read:roles:users``: its ``roles``) is the
    instructor's."""
    return INSTRUCTOR_ROLE in (model.get("roles") or ())


def write_config_file(settings: HubSettings) -> Path:
    """Write ``<state>/jupyterhub_config.py`` (mode 0600) calling :func:`configure` with ``settings`` and return it.

    Raises:
        OSError: the state folder cannot be written.
    """
    path = Path(settings.state) / "jupyterhub_config.py"
    path.write_text("import json\n\nfrom labkit.hub.config import configure\n\n"
                    f"configure(c, json.loads({json.dumps(asdict(settings))!r}))\n")
    path.chmod(0o600)
    return path
