"""The lab for a room: one JupyterHub on one Linux server, run as root, every attendee a Unix user of their own
(issue 38, phase 1: hub, users, working copies, idle culler; the per-attendee broker and the instructor's view come
later).

One job per module:

* :mod:`labkit.hub.install`: the shared, world-readable install (``/opt/labkit``: a venv of Debian's Python, a copy
  of labkit and the notebooks) and the proxy (npm, into the project's ``.hub/``); idempotent.
* :mod:`labkit.hub.names`: which sign-in names are accepted, and each attendee's Unix name (``lab-<name>``).
* :mod:`labkit.hub.users`: making an attendee's Unix user (home 0700), and removing the lab's own users.
* :mod:`labkit.hub.auth`: the shared-password authenticator refusing bad names at sign-in.
* :mod:`labkit.hub.spawner`: JupyterHub's local-process spawner, as the attendee's Unix user.
* :mod:`labkit.hub.singleuser`: run as the attendee: their copies and server settings, then ``jupyterhub-singleuser``.
* :mod:`labkit.hub.config`: the JupyterHub configuration.
* :mod:`labkit.hub.run`: ``make hub``: checks, set-up, start.

Nothing here is imported by ``import labkit``; :mod:`~labkit.hub.auth`, :mod:`~labkit.hub.spawner` and
:mod:`~labkit.hub.config` import JupyterHub, which only the shared venv has.
"""
