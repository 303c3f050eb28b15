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
* a lab of its own (:mod:`labkit.hub.sandbox`): its network namespace, where the attendee's JupyterLab listens on
  the namespace's address (``Spawner.ip``, which the hub's proxy connects to); cgroups with the hub's limits
  (:attr:`LabSpawner.memory_mib`, :attr:`LabSpawner.tasks`, equal CPU shares); its own IPC, ``/proc`` and tmpfs
  ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run/lock`` (:attr:`LabSpawner.tmp_mib`), its info folder under
  :attr:`LabSpawner.private_tmp`. ``LocalProcessSpawner``'s own step (setuid in ``preexec_fn``) is
  replaced by joining the cgroups there, as root, and :func:`labkit.hub.sandbox.enter_command` in front of the
  command, which drops to the attendee's uid once inside. On systemd with cgroup v2 (:func:`labkit.hub.unit.chosen`)
  the command runs instead as the attendee's lab unit, ``systemd-run --wait --pipe`` in front of it
  (:func:`labkit.hub.unit.run_command`, the unit's properties :func:`labkit.hub.unit.lab_properties`): the process
  JupyterHub watches is systemd-run, which lives as long as the unit, and the environment reaches the unit by name
  (``--setenv=NAME``), its values never on a command line.

The command it runs is :mod:`labkit.hub.singleuser` (``Spawner.cmd``, set by :mod:`labkit.hub.config`), which
starts the attendee's one broker before their JupyterLab.

Stopping (the idle culler, the admin page, the hub's own stop): after ``LocalProcessSpawner.stop`` (SIGINT, SIGTERM,
SIGKILL to JupyterLab), :meth:`LabSpawner.stop` ends every process of the attendee's uid
(:func:`labkit.hub.users.end_processes`: the broker, which runs in a session of its own, kernels, participants),
SIGTERM then SIGKILL after :attr:`LabSpawner.end_grace_s`, logs what it ended and how many processes the OOM killer
ended in the attendee's memory group, and removes their namespace and cgroups (:func:`labkit.hub.sandbox.release`).
On systemd the unit is stopped first (:func:`labkit.hub.unit.stop`: ``systemctl stop``, SIGTERM to each of its
processes, SIGKILL after :attr:`LabSpawner.end_grace_s`), its OOM count read before, as its group goes with it.
A lab whose JupyterLab ended by itself (the OOM killer, a kill from the attendee's terminal) is ended the same way
once the hub's poll sees it gone (:meth:`LabSpawner.run_post_stop_hook`: JupyterHub skips ``stop`` then).
"""

from __future__ import annotations

import asyncio
import pwd
from concurrent.futures import ThreadPoolExecutor

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import maybe_future
from traitlets import Float, Integer, Unicode

from labkit.broker.runtime import SHARED_CACHE_ENV
from labkit.hub import firewall, sandbox, unit, users
from labkit.hub.names import unix_name

#: The attendee's ``LABKIT_HOME``, relative to their home.
LABKIT_HOME = "labkit"
#: The threads that make attendees' Unix users (:func:`labkit.hub.users.create`, which may wait for the accounts lock
#: up to :data:`labkit.hub.users.ACCOUNTS_WAIT_S`): an executor of their own, so that sign-ins waiting there never
#: fill asyncio's default one (``min(32, CPUs + 4)`` threads: 6 on two cores), which every poll and stop of every
#: attendee's server uses (issue 63: with six sign-ins waiting on a held lock, the instructor's stop waited 134 s).
ACCOUNTS_EXECUTOR = ThreadPoolExecutor(max_workers=4, thread_name_prefix="labkit-accounts")


class LabSpawner(LocalProcessSpawner):
    """``LocalProcessSpawner`` running hub user ``<name>`` as Unix user ``lab-<name>``, made on first spawn, its lab
    alone in its sandbox (:mod:`labkit.hub.sandbox`) and ended whole on stop."""

    shared_cache = Unicode("", config=True, help="The read-only shared cache (LABKIT_SHARED_CACHE); '' for none.")
    firewall_table = Unicode("", config=True, help="The hub's nftables table (labkit.hub.firewall); '' for none.")
    private_tmp = Unicode(config=True, help="The folder of the attendees' private temporary folders (root's).")
    room = Unicode("", config=True, help="The room's id (labkit.hub.rooms), written in each Unix user's comment.")
    memory_mib = Integer(2048, config=True, help="Each attendee's memory limit (MiB, their cgroup's).")
    tasks = Integer(4096, config=True, help="Each attendee's limit of processes and threads (pids.max).")
    tmp_mib = Integer(sandbox.TMP_MIB, config=True, help="The size of each attendee's /tmp and /dev/shm (MiB, tmpfs "
                      "charged to their memory limit).")
    end_grace_s = Float(10.0, config=True, help="Seconds between SIGTERM and SIGKILL to the attendee's processes.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lab_cmd = list(self.cmd)  # the lab's command; start() puts the sandbox's entry in front of it
        self._adopted = False  # a running lab found after the hub's restart, logged as adopted

    @property
    def unix_user(self) -> str:
        """This attendee's Unix user name (``lab-<hub name>``)."""
        return unix_name(self.user.name)

    def make_preexec_fn(self, name):
        """In place of JupyterHub's setuid step (the sandbox's entry drops to the attendee's uid): join the
        attendee's cgroups, as root, before the command runs; None on systemd (the unit is made with its limits and
        runs as the attendee)."""
        if unit.chosen() == unit.SYSTEMD:
            return None
        uid = pwd.getpwnam(unix_name(name)).pw_uid
        return lambda: sandbox.join_cgroups(uid)

    def user_env(self, env):
        """``USER``, ``HOME``, ``SHELL`` of the attendee's Unix user, ``LABKIT_HOME`` (``<home>/labkit``) and the shared
        cache (``LABKIT_SHARED_CACHE``)."""
        entry = pwd.getpwnam(self.unix_user)
        env.update(USER=self.unix_user, LOGNAME=self.unix_user, HOME=entry.pw_dir, SHELL=entry.pw_shell,
                   LABKIT_HOME=f"{entry.pw_dir}/{LABKIT_HOME}")
        if self.shared_cache:
            env[SHARED_CACHE_ENV] = self.shared_cache
        return env

    async def start(self):
        """Make the attendee's Unix user if needed (``useradd`` in a thread of :data:`ACCOUNTS_EXECUTOR`, tagged with
        :attr:`room`), the hub's
        wall (once), the attendee's sandbox (:func:`labkit.hub.sandbox.prepare`), then start as
        ``LocalProcessSpawner`` inside it, listening on the namespace's address.

        Raises:
            labkit.core.errors.LabkitError: the name is refused, its Unix user is another room's (not ended), or
                ``useradd``, ``nft`` or ``ip`` failed (JupyterHub shows the spawn failed, with the message).
        """
        entry = await asyncio.get_running_loop().run_in_executor(ACCOUNTS_EXECUTOR, users.create, self.user.name,
                                                                  self.room)
        await self._wall()
        limits = sandbox.Limits(memory_mib=self.memory_mib, tasks=self.tasks, tmp_mib=self.tmp_mib)
        self.ip = await asyncio.to_thread(sandbox.prepare, entry.pw_uid, limits, self.private_tmp)
        if unit.chosen() == unit.SYSTEMD:
            info = str(sandbox.info_folder(self.private_tmp, entry.pw_uid))
            properties = unit.lab_properties(entry.pw_uid, entry.pw_dir, sandbox.netns(entry.pw_uid), info,
                                             limits.memory_mib, limits.tasks, limits.tmp_mib, self.end_grace_s)
            entry_cmd = unit.run_command(entry.pw_uid, entry.pw_gid, properties, sorted(self.get_env()), entry.pw_dir)
        else:
            entry_cmd = sandbox.enter_command(entry.pw_uid, entry.pw_gid, self.private_tmp, limits.tmp_mib)
        self.cmd = [*entry_cmd, *self.lab_cmd]
        return await super().start()

    async def _wall(self) -> None:
        """The hub's wall (:func:`labkit.hub.firewall.keep_wall`: made by the first spawn, checked at every poll and
        made again with a warning in the hub's log if it went)."""
        if self.firewall_table:
            await asyncio.to_thread(firewall.keep_wall, self.firewall_table, sandbox.GATEWAY, self.log.warning)

    async def poll(self):
        """As ``LocalProcessSpawner.poll`` (None while the server's process lives), after making sure of the hub's
        wall: a hub restarted after SIGKILL polls the servers it finds in its database first, and adopts those still
        running, each still in its namespace (logged: "Adopted lab-<name>'s lab ..."), so the wall must be there before
        any spawn. While the server runs, it also refreshes what the attendee's notebook reads of their memory group
        (:func:`labkit.hub.sandbox.write_info`)."""
        await self._wall()
        adopted = self.proc is None and self.pid and not self._adopted  # found in the database, not started here
        status = await super().poll()
        if status is None:  # running: what the hub observes of its memory group, for the attendee's notebook
            try:
                uid = pwd.getpwnam(self.unix_user).pw_uid
            except KeyError:
                return status
            if adopted:
                self._adopted = True
                self.log.info("Adopted %s's lab, still running (pid %s) in its namespace %s: %s", self.unix_user,
                              self.pid, sandbox.netns(uid), "there" if sandbox.exists(uid) else "GONE")
            try:
                await asyncio.to_thread(sandbox.write_info, uid, self.private_tmp)
            except OSError as exc:  # the notice comes at the next poll; a poll never fails for it
                self.log.warning("Could not write %s's memory notice: %s", self.unix_user, exc)
        return status

    async def stop(self, now=False):
        """Stop the lab's unit on systemd (:func:`labkit.hub.unit.stop`), stop as ``LocalProcessSpawner``
        (JupyterLab), then end every other process of the attendee's uid
        (:func:`labkit.hub.users.end_processes`), log them and the OOM killer's count, and release the sandbox.

        Raises:
            labkit.core.errors.LabkitError: a process of the attendee survived SIGKILL (logged by JupyterHub).
        """
        try:
            uid = pwd.getpwnam(self.unix_user).pw_uid
        except KeyError:
            uid = None
        kills = None
        if uid is not None and unit.chosen() == unit.SYSTEMD:  # the unit's group, with its OOM count, goes with it
            kills = sandbox.oom_kills(uid)
            await asyncio.to_thread(unit.stop, uid, self.end_grace_s)
        await super().stop(now=now)
        if uid is not None:
            await self._end_lab(uid, kills)

    async def _end_lab(self, uid: int, kills: int | None) -> None:
        """End every process of ``uid`` (:func:`labkit.hub.users.end_processes`), log them and the OOM killer's count
        (``kills`` if read before, else now), and release the sandbox."""
        ended = await asyncio.to_thread(users.end_processes, uid, self.end_grace_s)
        self.log.info("Ended %s's lab: %s; processes the OOM killer ended in it: %d", self.unix_user,
                      ", ".join(ended) if ended else "no process left",
                      sandbox.oom_kills(uid) if kills is None else kills)
        await asyncio.to_thread(sandbox.release, uid)

    async def run_post_stop_hook(self):
        """Run after every stop of the server (JupyterHub's ``User.stop``, which logs what this raises): what is left
        of the lab is ended as :meth:`stop` ends it. ``User.stop`` calls :meth:`stop` only while the server's process
        lives (its ``poll`` None): a lab whose JupyterLab ended by itself (the OOM killer in its group, a kill from its
        own terminal) kept its other processes (a CPU burn, one that left its session), its groups and namespace (the
        room rehearsal, bench/room.py). Nothing to do when :meth:`stop` ran."""
        try:
            uid = pwd.getpwnam(self.unix_user).pw_uid
        except KeyError:
            uid = None
        if uid is not None and (await asyncio.to_thread(users.processes_of, uid) or sandbox.exists(uid)):
            kills = None
            if unit.chosen() == unit.SYSTEMD:
                kills = sandbox.oom_kills(uid)
                await asyncio.to_thread(unit.stop, uid, self.end_grace_s)
            await self._end_lab(uid, kills)
        await maybe_future(super().run_post_stop_hook())
