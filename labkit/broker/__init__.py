"""The embedded Apache Kafka broker: settings, runtime (Java, jars), ports, readiness, lifecycle."""

from labkit.broker.embedded import EmbeddedBroker
from labkit.broker.settings import KAFKA_VERSION, LAB_SETTINGS

__all__ = ["EmbeddedBroker", "KAFKA_VERSION", "LAB_SETTINGS"]
