"""The exceptions labkit raises.

Each message says what went wrong and how to fix it."""


class LabkitError(Exception):
    """Base class of every labkit error."""


class JavaError(LabkitError):
    """No Java, or a Java older than 17, to run the Kafka broker with (Kafka 4.x needs Java 17+)."""


class JavaTooOldError(JavaError):
    """A ``java`` was found, older than 17 or of a version it does not say.

    Attributes:
        java: its path.
        major: its feature release (11 for "11.0.22", 8 for "1.8.0_x"; 0 if unknown).
    """

    def __init__(self, message: str, java: str, major: int) -> None:
        super().__init__(message)
        self.java, self.major = java, major


class MavenError(LabkitError):
    """The broker jars are not cached and Maven is missing or could not resolve them."""


class PortInUseError(LabkitError):
    """A port the broker should listen on is already taken on 127.0.0.1."""


class BrokerExitedError(LabkitError):
    """The broker JVM exited while labkit was starting it; the message holds the end of server.log."""


class BrokerNotReadyError(LabkitError):
    """The broker did not answer a metadata request and create a topic within the start timeout."""


class BrokerUnreachableError(LabkitError):
    """No Kafka broker answered at the given bootstrap address within the timeout."""


class BrokerStateError(LabkitError):
    """An action does not fit the broker's state (e.g. ``kill()`` on a broker that is not running)."""


class TopicNotFoundError(LabkitError):
    """The topic to read or measure does not exist on the broker (a misspelt name, or a topic of an earlier run:
    :func:`labkit.kafka.records.create_topic` names topics uniquely). Raised rather than an empty result, which a
    checker would take for an empty log."""
