"""Ask a broker whether it is there and ready, with the confluent-kafka AdminClient."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from labkit.core.errors import BrokerUnreachableError

#: Topic the readiness probe creates (one partition) and checks for a leader.
READY_TOPIC = "_labkit_ready"
#: Where librdkafka's own log lines go (instead of stderr): silent unless the notebook configures
#: logging, e.g. ``logging.basicConfig(level=logging.INFO)``.
KAFKA_LOG = logging.getLogger("labkit.kafka")
KAFKA_LOG.addHandler(logging.NullHandler())


def admin(bootstrap: str, timeout_s: float | None = None) -> AdminClient:
    """An AdminClient for ``bootstrap`` ("host:port[,host:port]") whose librdkafka logs go to the
    ``labkit.kafka`` logger instead of stderr; ``timeout_s`` caps each TCP connection set-up."""
    config = {"bootstrap.servers": bootstrap, "logger": KAFKA_LOG}
    if timeout_s is not None:  # librdkafka's floor is 1000 ms
        config["socket.connection.setup.timeout.ms"] = max(1000, int(timeout_s * 1000))
    return AdminClient(config)


def check_reachable(bootstrap: str, timeout_s: float = 5.0) -> None:
    """Return once a broker at ``bootstrap`` answers a metadata request.

    Args:
        bootstrap: "host:port[,host:port]".
        timeout_s: how long to try, in seconds.
    Raises:
        BrokerUnreachableError: no answer within ``timeout_s``; the message names the address.
    """
    try:
        admin(bootstrap, timeout_s).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerUnreachableError(
            f"No Kafka broker answered at {bootstrap} within {timeout_s:g} s ({exc.args[0].str()}). "
            "Start the lab broker with `make lab`, or fix LABKIT_BOOTSTRAP, or unset it so labkit "
            "starts a broker for this kernel."
        ) from exc


def lists_broker(bootstrap: str, node_id: int, timeout_s: float = 2.0) -> bool:
    """Whether the broker at ``bootstrap`` answers a metadata request listing broker ``node_id`` (KRaft lists only
    unfenced brokers: ``KRaftMetadataCache``). ``False`` if there is no answer within ``timeout_s`` seconds."""
    try:
        return node_id in admin(bootstrap, timeout_s).list_topics(timeout=timeout_s).brokers
    except KafkaException:
        return False


def is_ready(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """One readiness probe: a metadata request is answered, topic :data:`READY_TOPIC` exists or can
    be created, and its partition has a leader. ``False`` if any step fails within ``timeout_s``."""
    client = admin(bootstrap, timeout_s)
    try:
        topics = client.list_topics(timeout=timeout_s).topics
        if READY_TOPIC not in topics:
            future = client.create_topics([NewTopic(READY_TOPIC, 1, 1)], request_timeout=timeout_s)[READY_TOPIC]
            try:
                future.result(timeout=timeout_s)
            except TimeoutError:  # not created within timeout_s (a busy machine): not ready yet
                return False
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    return False
            return False  # look again for the leader on the next probe
        meta = topics[READY_TOPIC]
        return meta.error is None and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
    except KafkaException:
        return False
