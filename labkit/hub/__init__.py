"""The lab for a room: one JupyterHub on one Linux server, run as root, every attendee a Unix user of their own
(issue 38): attendees' own Unix users, working copies and brokers, each lab alone in a sandbox (issue 49), the idle
culler, the instructor's live view.

One job per module:

* :mod:`labkit.hub.install`: the shared, world-readable install (``/opt/labkit``: a venv of Debian's Python, a copy
  of labkit and the notebooks) and the proxy (npm, into the project's ``.hub/``); idempotent.
* :mod:`labkit.hub.names`: which sign-in names are accepted, and each attendee's Unix name (``lab-<name>``).
* :mod:`labkit.hub.users`: making an attendee's Unix user (home 0700), and removing the lab's own users.
* :mod:`labkit.hub.auth`: each name's own password, set on its first sign-in with the workshop code; throttled.
* :mod:`labkit.hub.cache`: the shared read-only cache (jars, compiled Java, class-data archives) the set-up fills.
* :mod:`labkit.hub.sandbox`: each attendee's network namespace, cgroups and private temporary folders.
* :mod:`labkit.hub.firewall`: the nftables wall around the attendees' namespaces.
* :mod:`labkit.hub.memory_notice`: the kernel side of the memory limit: the learner told when their lab hit it.
* :mod:`labkit.hub.spawner`: JupyterHub's local-process spawner, as the attendee's Unix user; its stop ends every
  process of that user.
* :mod:`labkit.hub.singleuser`: run as the attendee: their copies and server settings, then ``jupyterhub-singleuser``.
* :mod:`labkit.hub.config`: the JupyterHub configuration.
* :mod:`labkit.hub.run`: ``make hub``: checks, set-up, JupyterHub started as its child and watched (the URL once it
  answers; a second Ctrl-C ends it at once).
* :mod:`labkit.hub.rooms`: a workshop is a room: ``make hub`` starts a new one or resumes one named, each in a state
  folder of its own; ``make hub-end`` writes its marks to a CSV and removes its users, accounts and marks.
* :mod:`labkit.hub.leftovers`: what a hub that ended without stopping left running, stopped by the next one.
* :mod:`labkit.hub.rootlock`: root-only file locks, with deadlines, for the hub's state.
* :mod:`labkit.hub.resets`: ``python -m labkit.hub reset-password NAME``: a one-time code for a forgotten password.
* :mod:`labkit.hub.liveview`: the instructor's live view, a hub service (the instructor only) and the endpoint kernels
  report to; :mod:`labkit.hub.verdicts` its store (SQLite) and what a report may say; :mod:`labkit.hub.page` its page
  and table (standard library only); :mod:`labkit.hub.observed` its probe of an attendee's broker;
  :mod:`labkit.hub.notebook_view` its read-only, script-free pages of an attendee's notebooks, read as them.
* :mod:`labkit.hub.report`: the kernel side (standard library only): the marks a kernel publishes
  (:mod:`labkit.learn.marks`: each exercise check's state, each claims cell's) reported with the attendee's own API
  token. ``import labkit`` installs it in a hub kernel (``LABKIT_LIVEVIEW_URL`` set); no lesson or exercise imports it,
  and :mod:`labkit.hub.memory_notice` is installed the same way; nothing else here is imported by ``import labkit``.

:mod:`~labkit.hub.auth`, :mod:`~labkit.hub.spawner`, :mod:`~labkit.hub.config` and :mod:`~labkit.hub.liveview` import
JupyterHub, which only the shared venv has.
"""
