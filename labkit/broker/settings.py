"""The lab broker's Kafka settings, in one place, and the files rendered from them.

Everything here is read by both :class:`labkit.broker.EmbeddedBroker` and ``docker-compose.yml``
(a test checks the compose file carries the same values), so the two never drift.
"""

from __future__ import annotations

import os
from pathlib import Path

from labkit.core.errors import LabkitError

#: The Apache Kafka release the lab runs unless ``LABKIT_KAFKA_VERSION`` says otherwise (share groups
#: are GA since 4.2; 4.4 adds the share-group dead-letter queue of KIP-1191). ``jvm/pom.xml`` and
#: ``docker-compose.yml`` pin the same version; a test checks it.
DEFAULT_KAFKA_VERSION = "4.4.0"

#: The folder under a broker's data_dir that is its ``log.dirs`` (topic partitions, KRaft metadata, meta.properties).
LOG_DIRS = "kraft-logs"

#: Feature levels passed to ``kafka-storage format --feature``, per supported release: each is the
#: release's own default (``kafka.tools.StorageTool version-mapping``; a test checks them against the
#: jars). ``share.version=2`` (4.4) adds the share-group DLQ and the ARCHIVING record state.
#: Storage formatted by 4.4 is not readable by 4.3, so data folders and jar caches are per version.
FEATURES_BY_VERSION: dict[str, dict[str, str]] = {
    "4.4.0": {"share.version": "2"},
    "4.3.2": {"share.version": "1"},
}


def kafka_version(version: str | None = None, env: dict[str, str] | None = None) -> str:
    """The Kafka release to run: ``version`` if given, else ``$LABKIT_KAFKA_VERSION``, else
    :data:`DEFAULT_KAFKA_VERSION`.

    Raises:
        LabkitError: not a release labkit supports (the message lists them and names the variable).
    """
    env = os.environ if env is None else env
    version = version or env.get("LABKIT_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    if version not in FEATURES_BY_VERSION:
        raise LabkitError(f"Kafka {version} is not a release labkit runs: set LABKIT_KAFKA_VERSION (or version=) to "
                          f"one of {', '.join(FEATURES_BY_VERSION)}, or unset it for {DEFAULT_KAFKA_VERSION}.")
    return version


def kafka_at_least(release: str, version: str | None = None) -> bool:
    """Whether the Kafka release the lab runs (:func:`kafka_version`, or ``version``) is ``release`` (``"4.4"``,
    ``"4.3.2"``) or later, compared number by number (``"4.10"`` is later than ``"4.4"``).

    Raises:
        LabkitError: the release is not one labkit runs (:func:`kafka_version`).
    """
    return tuple(map(int, kafka_version(version).split("."))) >= tuple(map(int, release.split(".")))


#: Broker settings for a one-node KRaft lab cluster. Keys are Kafka broker configs
#: (``kafka.server.KafkaConfig`` and the group/share/transaction coordinator configs).
LAB_SETTINGS: dict[str, str] = {
    # One node: every internal topic has one replica.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    # KRaft: after a crash (kill) the controller fences the old broker incarnation once its session
    # times out (default 9 s); shorter, so a restarted lab broker is back within seconds.
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "4000",
    # The active controller appends a no-op record to the metadata log whenever it has had nothing to write for this
    # long (KIP-835; Kafka's default 500 ms). Every 5 s halves an idle lab broker's CPU (3.1% -> 1.7% of a core);
    # nothing the lab shows reads the metadata log, and brokers are fenced by their heartbeats, not by these records.
    "metadata.max.idle.interval.ms": "5000",
    # Lab-friendly timings, so a crash or pause shows its effect within seconds.
    # Share groups (KIP-932): acquisition lock of a delivered record.
    "group.share.record.lock.duration.ms": "5000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.heartbeat.interval.ms": "2000",
    "group.share.min.heartbeat.interval.ms": "1000",
    # Consumer groups (KIP-848 protocol): a dead member leaves after the session timeout. A new member of Kafka's
    # Java consumer reads its first records about four heartbeat intervals after it starts (measured: 8-10 s at
    # 2 s, 4 s at 1 s; librdkafka's well under 1 s either way), so heartbeats come every second.
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    # Transactions: a client's transaction.timeout.ms may be at most 60 s here, and the
    # coordinator looks for timed-out transactions to abort every second (default 10 s).
    "transaction.max.timeout.ms": "60000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}

#: The lab broker's acquisition lock of a record delivered to a share-group consumer, ms
#: (``group.share.record.lock.duration.ms``, KIP-932): a record not acknowledged within it is available again.
SHARE_LOCK_MS = int(LAB_SETTINGS["group.share.record.lock.duration.ms"])
#: The lab broker's session timeout of a consumer-group member, ms (``group.consumer.session.timeout.ms``,
#: KIP-848 protocol): a member that stops heartbeating (crashed, paused) leaves the group after it.
CONSUMER_SESSION_TIMEOUT_MS = int(LAB_SETTINGS["group.consumer.session.timeout.ms"])

def config_key(name: str) -> str:
    """Turn a Python keyword (``transaction_max_timeout_ms``) into a Kafka config name
    (``transaction.max.timeout.ms``). Names that already hold a dot are kept as they are."""
    return name if "." in name else name.replace("_", ".")


def lab_settings(overrides: dict[str, object] | None = None) -> dict[str, str]:
    """The lab settings with ``overrides`` applied.

    Args:
        overrides: Kafka broker config names (dotted, or with underscores for dots) to values.
            ``None`` values remove a lab setting, so the Kafka default applies.
    Returns:
        A new dict of config name to string value.
    """
    settings = dict(LAB_SETTINGS)
    for name, value in (overrides or {}).items():
        key = config_key(name)
        if value is None:
            settings.pop(key, None)
        else:
            settings[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return settings


def render_server_properties(
    *, data_dir: Path, port: int, controller_port: int, settings: dict[str, str],
    proxied: tuple[int, int] | None = None, node_id: int = 1, roles: str = "broker,controller",
    quorum: str | None = None,
) -> str:
    """``server.properties`` for a KRaft node listening on 127.0.0.1 only: by default the lab's single
    combined-mode node (``process.roles=broker,controller``, ``node.id=1``).

    Args:
        data_dir: directory holding ``log.dirs`` (the topic data and the KRaft metadata log).
        port: client listener port (PLAINTEXT; unused by a controller-only node).
        controller_port: KRaft controller listener port (unused by a broker-only node).
        settings: further broker configs, e.g. from :func:`lab_settings`.
        node_id: ``node.id``.
        roles: ``process.roles``: "broker,controller", "controller" or "broker" (KRaft isolated mode).
        quorum: ``controller.quorum.bootstrap.servers`` ("host:port") of a broker-only node's controller.
        proxied: ``(listener_port, advertised_port)``: an extra listener PROXIED on
            ``listener_port`` that tells clients to connect to ``advertised_port``, where a fault
            proxy (:class:`labkit.crashlab.proxy.FaultProxy`) forwards to it. Clients that bootstrap
            from the proxy stay behind it.
    """
    listeners = {"broker,controller": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
                 "controller": f"CONTROLLER://127.0.0.1:{controller_port}",
                 "broker": f"PLAINTEXT://127.0.0.1:{port}"}[roles]
    base = {
        "process.roles": roles,
        "node.id": str(node_id),
        "controller.quorum.bootstrap.servers": quorum or f"127.0.0.1:{controller_port}",
        "listeners": listeners,
        "advertised.listeners": listeners if roles == "controller" else f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir / LOG_DIRS),
    }
    if roles != "controller":
        base["inter.broker.listener.name"] = "PLAINTEXT"
    if proxied:
        base["listeners"] += f",PROXIED://127.0.0.1:{proxied[0]}"
        base["advertised.listeners"] += f",PROXIED://127.0.0.1:{proxied[1]}"
        base["listener.security.protocol.map"] += ",PROXIED:PLAINTEXT"
    base.update(settings)
    return "".join(f"{k}={v}\n" for k, v in base.items())


def render_log4j2(log_file: Path) -> str:
    """A log4j2 ``.properties`` config that writes the broker's log to ``log_file``."""
    return (
        "status = warn\n"
        "appender.file.type = File\n"
        "appender.file.name = FILE\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.file.ref = FILE\n"
        "logger.kafka.name = kafka\n"
        "logger.kafka.level = INFO\n"
        "logger.state.name = state.change.logger\n"
        "logger.state.level = WARN\n"
    )
