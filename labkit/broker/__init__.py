"""The embedded Apache Kafka broker: settings, runtime (Java, jars), ports, readiness, lifecycle."""

from labkit.broker.embedded import EmbeddedBroker
from labkit.broker.settings import DEFAULT_KAFKA_VERSION, LAB_SETTINGS, kafka_at_least, kafka_version

__all__ = ["DEFAULT_KAFKA_VERSION", "EmbeddedBroker", "LAB_SETTINGS", "kafka_at_least", "kafka_version"]
