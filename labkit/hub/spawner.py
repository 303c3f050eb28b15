"""How an attendee's JupyterLab starts: JupyterHub's ``LocalProcessSpawner`` as the attendee's own Unix user, made on
their first sign-in.

:class:`LabSpawner` maps hub user ``alice`` to the Unix user ``lab-alice`` (:func:`labkit.hub.names.unix_name`) where
``LocalProcessSpawner`` uses the hub name itself (its ``make_preexec_fn``: setuid/setgid and ``chdir`` to the home;
its ``user_env``: ``USER``, ``HOME``, ``SHELL``), creates that user if needed (:func:`labkit.hub.users.create`, home
0700) before the process starts, and gives it ``LABKIT_HOME=<home>/labkit``: the attendee's copies
(``~/labkit/work``), experiments and, in a later phase, their own broker's data and state, all inside the 0700 home.
The command it runs is :mod:`labkit.hub.singleuser` (``Spawner.cmd``, set by :mod:`labkit.hub.config`).
"""

from __future__ import annotations

import asyncio
import pwd

from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid

from labkit.hub import users
from labkit.hub.names import unix_name

#: The attendee's ``LABKIT_HOME``, relative to their home.
LABKIT_HOME = "labkit"


class LabSpawner(LocalProcessSpawner):
    """``LocalProcessSpawner`` running hub user ``<name>`` as Unix user ``lab-<name>``, made on first spawn."""

    @property
    def unix_user(self) -> str:
        """This attendee's Unix user name (``lab-<hub name>``)."""
        return unix_name(self.user.name)

    def make_preexec_fn(self, name):
        """JupyterHub's setuid/setgid/chdir step for the attendee's Unix user instead of ``name`` (the hub name)."""
        return set_user_setuid(unix_name(name))

    def user_env(self, env):
        """``USER``, ``HOME``, ``SHELL`` of the attendee's Unix user, and ``LABKIT_HOME`` (``<home>/labkit``)."""
        entry = pwd.getpwnam(self.unix_user)
        env.update(USER=self.unix_user, LOGNAME=self.unix_user, HOME=entry.pw_dir, SHELL=entry.pw_shell,
                   LABKIT_HOME=f"{entry.pw_dir}/{LABKIT_HOME}")
        return env

    async def start(self):
        """Make the attendee's Unix user if needed (``useradd`` in a thread), then start as ``LocalProcessSpawner``.

        Raises:
            labkit.errors.LabkitError: the name is refused or ``useradd`` failed (JupyterHub shows the spawn failed).
        """
        await asyncio.to_thread(users.create, self.user.name)
        return await super().start()
