"""Whether the servers the lab downloads from answer: Maven Central (the jars) and the package index (the venv's
wheels). Asked only for what is not cached yet, all at once, each within a short deadline."""

from __future__ import annotations

import concurrent.futures
import os
import urllib.error
import urllib.request
from typing import Mapping

from labkit.doctor import needs
from labkit.doctor.checks import FAIL, OK, Check, external_broker, jar_caches, venv_installed

MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2/"
PYPI = "https://pypi.org/simple/"
#: Each probe's deadline, s.
DEADLINE_S = 3.0


def answers(url: str, timeout_s: float = DEADLINE_S) -> str:
    """``""`` if the server at ``url`` answers HTTP within ``timeout_s`` seconds (any status: a 404 is an answer; the
    environment's proxy settings apply), else why not."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return ""
    except (OSError, ValueError) as exc:
        return str(getattr(exc, "reason", exc)) or type(exc).__name__
    return ""


def check_network(env: Mapping[str, str] | None = None, timeout_s: float = DEADLINE_S) -> Check:
    """Whether Maven Central answers (while a jar cache is missing) and the package index does (while the venv is
    not installed, ``$PIP_INDEX_URL`` or pypi.org), both asked at once; "cached" without asking when nothing is
    missing.

    Args:
        timeout_s: each probe's deadline, s.
    """
    env = os.environ if env is None else env
    missing_jars = [key for key, folder in jar_caches(env).items() if folder is None]
    wanted = {}
    if missing_jars:
        wanted["Maven Central"] = (MAVEN_CENTRAL, missing_jars)
    if not venv_installed():
        wanted["the package index"] = (env.get("PIP_INDEX_URL") or PYPI, [needs.LAB])
    if not wanted:
        return Check("network", OK, "not needed: everything is cached (jars, Python packages)")
    with concurrent.futures.ThreadPoolExecutor(len(wanted)) as pool:
        why = dict(zip(wanted, pool.map(lambda url: answers(url, timeout_s), [url for url, _ in wanted.values()])))
    down = {name: reason for name, reason in why.items() if reason}
    detail = "; ".join(f"{name} ({wanted[name][0]}) {'does not answer: ' + down[name] if name in down else 'answers'}"
                       for name in wanted)
    if not down:
        return Check("network", OK, detail)
    blocked = sorted({n for name in down for key in wanted[name][1] for n in needs.users(key, external_broker(env))})
    return Check("network", FAIL, detail, "connect to a network that reaches it (a venue's Wi-Fi may block it; set "
                 "HTTPS_PROXY if you need a proxy), or fill the caches elsewhere first (`make jars`, `make setup`)",
                 tuple(blocked))
