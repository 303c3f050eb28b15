"""labkit: a teaching lab for Kafka exactly-once semantics and share groups, on a real broker."""

from labkit.broker import EmbeddedBroker, kafka_version
from labkit.connect import connect, fault_proxy

__all__ = ["EmbeddedBroker", "connect", "fault_proxy", "kafka_version"]
