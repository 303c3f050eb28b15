"""A share group's own configs (KIP-932 group configs, set with IncrementalAlterConfigs on a GROUP resource): what the
lab's share groups start with, and whether the running release has share-group dead-letter queues (KIP-1191)."""

from __future__ import annotations

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from labkit.broker.probe import admin
from labkit.broker.settings import kafka_at_least, kafka_version
from labkit.core.errors import LabkitError


def configure_group(bootstrap: str, group_id: str, *, delivery_limit: int | None = None,
                    dlq_topic: str | None = None, lock_ms: int | None = None, renew: bool | None = None,
                    timeout_s: float = 10.0) -> None:
    """Set a share group's configs (IncrementalAlterConfigs on a GROUP resource, KIP-932 / KIP-1191):
    ``share.auto.offset.reset=earliest`` (so members that join late still get the first records),
    ``share.delivery.count.limit``, ``share.record.lock.duration.ms`` (``lock_ms``: this group's acquisition lock,
    ms, instead of the broker's ``group.share.record.lock.duration.ms``, :data:`labkit.broker.settings.SHARE_LOCK_MS`),
    ``share.renew.acknowledge.enable`` (``renew``; Kafka 4.3+, ``GroupConfig.SHARE_RENEW_ACKNOWLEDGE_ENABLE_DEFAULT``
    true, KAFKA-20161: with false the broker refuses a RENEW acknowledgement, KIP-1222, with INVALID_RECORD_STATE,
    ``SharePartition.acknowledgeCompleteBatch`` / ``acknowledgePerOffsetBatchRecords``) and, on Kafka 4.4,
    ``errors.deadletterqueue.topic.name``.

    Raises:
        LabkitError: ``dlq_topic`` on a Kafka release without share-group DLQs (before 4.4).
        confluent_kafka.KafkaException: the broker refused a value (e.g. a limit below 2, or a lock outside the
            broker's ``group.share.min.record.lock.duration.ms``..``group.share.max.record.lock.duration.ms``: on the
            lab broker 1 s to 60 s).
    """
    entries = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
    if lock_ms is not None:
        entries.append(ConfigEntry("share.record.lock.duration.ms", str(lock_ms),
                                   incremental_operation=AlterConfigOpType.SET))
    if renew is not None:
        entries.append(ConfigEntry("share.renew.acknowledge.enable", str(renew).lower(),
                                   incremental_operation=AlterConfigOpType.SET))
    if delivery_limit is not None:
        entries.append(ConfigEntry("share.delivery.count.limit", str(delivery_limit),
                                   incremental_operation=AlterConfigOpType.SET))
    if dlq_topic is not None:
        if not dlq_supported():
            raise LabkitError(f"Kafka {kafka_version()} has no share-group dead-letter queue (KIP-1191 is in 4.4): "
                              "leave dlq_topic out, or run with LABKIT_KAFKA_VERSION=4.4.0.")
        entries.append(ConfigEntry("errors.deadletterqueue.topic.name", dlq_topic,
                                   incremental_operation=AlterConfigOpType.SET))
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=entries)
    client = admin(bootstrap)  # keep a reference: the futures fail if the client is collected
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout_s)


def dlq_supported() -> bool:
    """Whether the Kafka release the lab runs has share-group dead-letter queues (KIP-1191, 4.4+)."""
    return kafka_at_least("4.4")
