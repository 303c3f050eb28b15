"""Who may sign in to the workshop hub: the shared-password authenticator, refusing at sign-in every name that could
not become an attendee's own Unix user.

:class:`LabAuthenticator` is JupyterHub's ``SharedPasswordAuthenticator`` (``jupyterhub.authenticators.shared``,
JupyterHub 5.3+): attendees type a name of their choice and the workshop's password (``user_password``, at least 8
characters), the instructor their admin name (``admin_users``) and their own password (``admin_password``, at least 32,
not the attendees'). After the password matched, a name :func:`labkit.hub.names.why_refused` refuses (``root``, an
existing account, a name ``useradd`` would reject, a ``lab-`` user the lab did not make) gets a 403 whose message
JupyterHub's login form shows in place of "Invalid username or password" (``LoginHandler.render_template``: an
``HTTPError`` raised by ``authenticate`` is rendered on the form), so the attendee learns why before any spawn.
"""

from __future__ import annotations

from jupyterhub.authenticators.shared import SharedPasswordAuthenticator
from tornado import web

from labkit.hub.names import why_refused


class LabAuthenticator(SharedPasswordAuthenticator):
    """``SharedPasswordAuthenticator`` that refuses names no attendee's Unix user can be made for."""

    async def authenticate(self, handler, data):
        """The parent's answer (``{"name", "admin", "groups"}`` or ``None`` for a wrong password), after checking the
        normalised name with :func:`labkit.hub.names.why_refused`.

        Raises:
            tornado.web.HTTPError: 403 with the reason when the password matched but the name is refused.
        """
        authenticated = await super().authenticate(handler, data)
        if authenticated and (why := why_refused(authenticated["name"])):
            self.log.warning("Refused sign-in as %r: %s", authenticated["name"], why)
            raise web.HTTPError(403, why)
        return authenticated
