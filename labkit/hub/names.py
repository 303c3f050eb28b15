"""Which names an attendee may sign in with, and the Unix user each gets.

An attendee named ``alice`` on the hub runs as the Unix user ``lab-alice`` (:data:`PREFIX`): the lab's users are told
apart from every other account by their name and by their comment field (:data:`COMMENT`, what
:func:`labkit.hub.users.create` writes), so the hub never runs anyone as an account it did not make. A name is refused
at sign-in (:func:`why_refused`), before any spawn, when:

* its Unix name could not be a Debian user name (``useradd``'s default ``NAME_REGEX``: lowercase letters, digits,
  ``-`` and ``_``, at most 32 characters in all, so at most :data:`MAX_NAME` after the prefix); JupyterHub lowercases
  names before this check (``Authenticator.normalize_username``);
* the name itself is an existing account (``root``, a system user, the instructor's own login): signing in as
  ``root`` must not even look like it worked;
* ``lab-<name>`` exists but is not one of the lab's users (made by someone else, by hand).
"""

from __future__ import annotations

import pwd
import re

#: What every attendee's Unix name starts with.
PREFIX = "lab-"
#: The comment (GECOS) field of every user the lab makes: how the lab recognises its own users.
COMMENT = "labkit hub attendee"
#: Longest hub name: Debian's user names are at most 32 characters, ``lab-`` included.
MAX_NAME = 32 - len(PREFIX)
#: A hub name whose Unix name useradd accepts with its default NAME_REGEX (``^[a-z][-a-z0-9_]*$``, after the prefix).
NAME = re.compile(rf"^[a-z0-9][a-z0-9_-]{{0,{MAX_NAME - 1}}}$")


def shown(name: str) -> str:
    """``name`` as a message or a log line may quote it: ``repr``, cut after :data:`MAX_NAME` characters with its
    length said (a sign-in form's name is anyone's input, a megabyte long if they like: issue 63)."""
    return repr(name) if len(name) <= MAX_NAME else f"{name[:MAX_NAME]!r}... ({len(name)} characters)"


def unix_name(name: str) -> str:
    """The Unix user name of hub user ``name`` (``lab-<name>``)."""
    return PREFIX + name


def hub_name(unix_user: str) -> str:
    """The hub user name of Unix user ``unix_user`` (``lab-<name>`` -> ``<name>``): :func:`unix_name`'s inverse."""
    return unix_user.removeprefix(PREFIX)


def is_lab_user(entry: pwd.struct_passwd) -> bool:
    """Whether the password entry ``entry`` is one of the lab's users (its name and comment, :data:`COMMENT`)."""
    return entry.pw_name.startswith(PREFIX) and entry.pw_gecos.startswith(COMMENT)


def why_refused(name: str) -> str | None:
    """Why ``name`` (as JupyterHub normalised it: lowercase) cannot sign in, a sentence naming what to do; ``None`` if
    it can (a new name, or one of the lab's users signing in again). A refused name is quoted as :func:`shown` shows
    it."""
    if not NAME.match(name):
        return (f"{shown(name)} cannot be an attendee's name: use lowercase letters, digits, '-' or '_' (at most "
                f"{MAX_NAME} characters, starting with a letter or digit), e.g. 'ada' or 'team-3'.")
    try:
        pwd.getpwnam(name)
        return (f"{name!r} is an account of this machine, not an attendee's name: choose another name "
                "(the instructor signs in under the admin name).")
    except KeyError:
        pass
    try:
        entry = pwd.getpwnam(unix_name(name))
    except KeyError:
        return None
    if not is_lab_user(entry):
        return (f"{name!r} is taken: the Unix user {unix_name(name)} exists and was not made by the lab. "
                "Choose another name.")
    return None
