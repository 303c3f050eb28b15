"""How an attendee's JupyterLab starts and stops: JupyterHub's ``LocalProcessSpawner`` as the attendee's own Unix user,
made on their first sign-in, and every process of their lab ended with it.

:class:`LabSpawner` maps hub user ``alice`` to the Unix user ``lab-alice`` (:func:`labkit.hub.names.unix_name`) where
``LocalProcessSpawner`` uses the hub name itself (its ``make_preexec_fn``: setuid/setgid and ``chdir`` to the home;
its ``user_env``: ``USER``, ``HOME``, ``SHELL``), creates that user if needed (:func:`labkit.hub.users.create`, home
0700) before the process starts, and gives it:

* ``LABKIT_HOME=<home>/labkit``: the attendee's copies (``~/labkit/work``), experiments, their broker's data and
  state, all inside the 0700 home;
* ``LABKIT_SHARED_CACHE`` (:attr:`LabSpawner.shared_cache`): the jars, compiled Java code and class-data archives the
  set-up installed once, read-only (:mod:`labkit.hub.cache`);
* ``LABKIT_PORT_RANGE``: the attendee's block of ports (:func:`labkit.hub.firewall.port_block`), which the hub's
  firewall table keeps to them (:func:`labkit.hub.firewall.guard_attendee`, added before their server starts).

The command it runs is :mod:`labkit.hub.singleuser` (``Spawner.cmd``, set by :mod:`labkit.hub.config`), which
starts the attendee's one broker before their JupyterLab.

Stopping (the idle culler, the admin page, the hub's own stop): after ``LocalProcessSpawner.stop`` (SIGINT, SIGTERM,
SIGKILL to JupyterLab), :meth:`LabSpawner.stop` ends every process of the attendee's uid
(:func:`labkit.hub.users.end_processes`: the broker, which runs in a session of its own, kernels, participants),
SIGTERM then SIGKILL after :attr:`LabSpawner.end_grace_s`, and logs what it ended.
"""

from __future__ import annotations

import asyncio
import pwd

from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid
from traitlets import Float, Unicode

from labkit.broker.ports import RANGE_ENV
from labkit.broker.runtime import SHARED_CACHE_ENV
from labkit.hub import firewall, users
from labkit.hub.names import unix_name

#: The attendee's ``LABKIT_HOME``, relative to their home.
LABKIT_HOME = "labkit"


class LabSpawner(LocalProcessSpawner):
    """``LocalProcessSpawner`` running hub user ``<name>`` as Unix user ``lab-<name>``, made on first spawn, its lab
    confined to its port block and ended whole on stop."""

    shared_cache = Unicode("", config=True, help="The read-only shared cache (LABKIT_SHARED_CACHE); '' for none.")
    firewall_table = Unicode("", config=True, help="The hub's nftables table (labkit.hub.firewall); '' for none.")
    end_grace_s = Float(10.0, config=True, help="Seconds between SIGTERM and SIGKILL to the attendee's processes.")

    @property
    def unix_user(self) -> str:
        """This attendee's Unix user name (``lab-<hub name>``)."""
        return unix_name(self.user.name)

    def make_preexec_fn(self, name):
        """JupyterHub's setuid/setgid/chdir step for the attendee's Unix user instead of ``name`` (the hub name)."""
        return set_user_setuid(unix_name(name))

    def user_env(self, env):
        """``USER``, ``HOME``, ``SHELL`` of the attendee's Unix user, ``LABKIT_HOME`` (``<home>/labkit``), their port
        block (``LABKIT_PORT_RANGE``) and the shared cache (``LABKIT_SHARED_CACHE``)."""
        entry = pwd.getpwnam(self.unix_user)
        env.update(USER=self.unix_user, LOGNAME=self.unix_user, HOME=entry.pw_dir, SHELL=entry.pw_shell,
                   LABKIT_HOME=f"{entry.pw_dir}/{LABKIT_HOME}")
        env[RANGE_ENV] = firewall.range_spec(firewall.port_block(entry.pw_uid))
        if self.shared_cache:
            env[SHARED_CACHE_ENV] = self.shared_cache
        return env

    async def start(self):
        """Make the attendee's Unix user if needed (``useradd`` in a thread), guard their port block, then start as
        ``LocalProcessSpawner``.

        Raises:
            labkit.errors.LabkitError: the name is refused, ``useradd`` or ``nft`` failed, or the uid has no port
                block (JupyterHub shows the spawn failed, with the message).
        """
        entry = await asyncio.to_thread(users.create, self.user.name)
        if self.firewall_table:
            await asyncio.to_thread(firewall.guard_attendee, self.firewall_table, entry.pw_uid)
        return await super().start()

    async def stop(self, now=False):
        """Stop as ``LocalProcessSpawner`` (JupyterLab), then end every other process of the attendee's uid
        (:func:`labkit.hub.users.end_processes`) and log them.

        Raises:
            labkit.errors.LabkitError: a process of the attendee survived SIGKILL (logged by JupyterHub).
        """
        await super().stop(now=now)
        try:
            uid = pwd.getpwnam(self.unix_user).pw_uid
        except KeyError:
            return
        ended = await asyncio.to_thread(users.end_processes, uid, self.end_grace_s)
        self.log.info("Ended %s's lab: %s", self.unix_user, ", ".join(ended) if ended else "no process left")
