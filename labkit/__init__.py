"""labkit: a teaching lab for Kafka exactly-once semantics and share groups, on a real broker."""

from labkit.broker import KAFKA_VERSION, EmbeddedBroker
from labkit.connect import connect, fault_proxy

__all__ = ["EmbeddedBroker", "KAFKA_VERSION", "connect", "fault_proxy"]
