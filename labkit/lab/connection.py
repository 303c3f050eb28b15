"""Find the broker a notebook talks to, and open the fault proxy in front of it."""

from __future__ import annotations

import os

from labkit.broker import EmbeddedBroker
from labkit.broker.probe import check_reachable
from labkit.core.errors import BrokerUnreachableError, LabkitError
from labkit.crashlab.proxy import FaultProxy
from labkit.lab import server as lab

#: Set by JupyterHub in every single-user server's environment it spawns (``Spawner.get_env``: the hub user's name),
#: which that server's kernels inherit: a kernel of an attendee's lab on the workshop hub (:mod:`labkit.hub.spawner`).
HUB_USER_ENV = "JUPYTERHUB_USER"
#: What :func:`connect` says of the lab broker it found: ``make lab``'s, or on the workshop hub the attendee's own,
#: whose daemon their server started (:mod:`labkit.hub.singleuser`) and which started when their first kernel asked.
LAB_BROKER, HUB_BROKER = ("the lab broker, make lab",
                          "your own lab broker, started by the workshop hub when your first kernel asked for it")

_kernel_broker: EmbeddedBroker | None = None
_proxy: FaultProxy | None = None
_proxied: tuple[int, int] | None = None  # (broker's PROXIED listener port, port it advertises) of the broker in use


def connect(timeout_s: float = 5.0, *, quiet: bool = False) -> str:
    """A bootstrap address ("host:port") of a Kafka broker that answers, found in this order:

    1. ``LABKIT_BOOTSTRAP`` if set: an external cluster (``docker compose up -d``, or any Kafka >= 4.2);
       ``LABKIT_PROXIED="<listener port>:<proxy port>"`` names its PROXIED listener, if it has one;
    2. the lab broker that ``make lab`` started (found through its state file in ``$LABKIT_HOME/lab/``), waited for
       (at most :data:`labkit.lab.server.BROKER_READY_S` seconds, saying so) while it starts, and asked for
       (:func:`labkit.lab.server.want_broker`) if its daemon waits for a first request (the workshop hub's; said as
       the attendee's own, :data:`HUB_BROKER`, when JupyterHub started this kernel's server: :data:`HUB_USER_ENV`);
    3. else an :class:`~labkit.broker.EmbeddedBroker` of :func:`~labkit.kafka_version` started for this
       Python process (kernel), which stops when the process exits. Later calls return the same one.

    Args:
        timeout_s: how long to wait for an answer from cases 1 and 2, in seconds.
        quiet: do not print which broker is used.
    Raises:
        BrokerUnreachableError: ``LABKIT_BOOTSTRAP`` is set but nothing answers there.
        JavaError, MavenError, BrokerExitedError, BrokerNotReadyError: case 3 could not start a broker.
    """
    global _kernel_broker, _proxied
    address, origin, version = os.environ.get("LABKIT_BOOTSTRAP"), "LABKIT_BOOTSTRAP", None
    if address:
        check_reachable(address, timeout_s)
        spec = os.environ.get("LABKIT_PROXIED")
        _proxied = tuple(int(p) for p in spec.split(":")) if spec else None
    else:
        waited = lab.starting_broker() is not None
        if waited:
            lab.want_broker()  # the workshop hub's daemon starts the broker on this first request
            if not quiet:
                print(f"The lab broker is starting: waiting for it (at most {lab.BROKER_READY_S:.0f} s)")
        state = lab.running_broker_state(wait_s=lab.BROKER_READY_S)
        origin = HUB_BROKER if os.environ.get(HUB_USER_ENV) else LAB_BROKER
        address, version = (state["bootstrap"], state.get("version")) if state else (None, None)
        if address:
            try:
                check_reachable(address, timeout_s)
                _proxied = tuple(state["proxied"]) if state.get("proxied") else None
            except BrokerUnreachableError:
                address = None
        if not address:
            if _kernel_broker is None or not _kernel_broker.is_running:
                _kernel_broker = EmbeddedBroker(proxy_listener=True).start()
            address, version = _kernel_broker.bootstrap_servers, _kernel_broker.version
            origin = "a broker started for this kernel"
            _proxied = (_kernel_broker.proxied_listener_port, _kernel_broker.proxy_port)
    if not quiet:
        print(f"Kafka{f' {version}' if version else ''} at {address} ({origin})")
    return address


def proxied_ports() -> tuple[int, int]:
    """Return the PROXIED listener's ports of the broker :func:`connect` finds (connecting quietly first).

    Returns:
        ``(listener port, advertised port)``: the port the broker's PROXIED listener listens on (a proxy's
        ``target_port``) and the one it advertises to clients (where a proxy must listen: its ``listen_port``).
    Raises:
        LabkitError: that broker has no PROXIED listener (an external cluster without ``LABKIT_PROXIED``): use the
            lab broker, or docker-compose.yml, which has one.
        what :func:`connect` raises.
    """
    connect(quiet=True)
    if _proxied is None:
        raise LabkitError("This broker has no PROXIED listener for a fault proxy. Unset LABKIT_BOOTSTRAP to use "
                          "the lab broker, or use docker-compose.yml and set LABKIT_PROXIED=9095:9094.")
    return _proxied


def close_fault_proxy() -> None:
    """Close the kernel's fault proxy (:func:`fault_proxy`) if one is open, freeing the advertised port for another
    proxy; :func:`fault_proxy` opens it again."""
    if _proxy is not None and not _proxy.closed:
        _proxy.close()


def fault_proxy() -> FaultProxy:
    """The kernel's :class:`~labkit.crashlab.proxy.FaultProxy` in front of the broker that
    :func:`connect` found (started on first use, healed and reused afterwards).

    Raises:
        LabkitError: see :func:`proxied_ports`.
    """
    global _proxy
    ports = proxied_ports()
    if _proxy is None or _proxy.closed or (_proxy.target_port, _proxy.listen_port) != ports:
        close_fault_proxy()
        _proxy = FaultProxy(listen_port=ports[1], target_port=ports[0])
    _proxy.heal()
    return _proxy
