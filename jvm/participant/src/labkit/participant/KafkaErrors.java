package labkit.participant;

import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.protocol.Errors;

import java.util.Set;

/** How the Java participant names and classifies the Java client's exceptions, for the history's error field. */
final class KafkaErrors {
    /** The errors that end a participant as fenced (labkit.crashlab.loop.FENCED_ERRORS). */
    static final Set<String> FENCED = Set.of("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "FENCED_INSTANCE_ID",
            "STALE_MEMBER_EPOCH", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID");

    private KafkaErrors() {
    }

    /**
     * Kafka's name of the error behind {@code e} (org.apache.kafka.common.protocol.Errors), looking through its
     * causes; an exception the client made of one (CommitFailedException names the error in its message) is named
     * "CommitFailedException(ILLEGAL_GENERATION)"; anything else by its class.
     */
    static String name(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            Errors error = Errors.forException(t);
            if (error != Errors.UNKNOWN_SERVER_ERROR) {
                return error.name();
            }
        }
        String message = String.valueOf(e.getMessage());
        for (Errors error : Errors.values()) {
            if (error != Errors.NONE && error.message() != null && message.contains(error.message())) {
                return e.getClass().getSimpleName() + "(" + error.name() + ")";
            }
        }
        return e.getClass().getSimpleName();
    }

    /**
     * Whether the Java producer cannot go on after {@code e}: KafkaProducer's javadoc lists ProducerFencedException,
     * OutOfOrderSequenceException and AuthorizationException as the errors to close the producer on (every other
     * KafkaException: abort the transaction and go on, KIP-588); a fenced group instance (KIP-345) ends a consumer.
     */
    static boolean fatal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof OutOfOrderSequenceException
                    || t instanceof AuthorizationException || t instanceof UnsupportedVersionException
                    || t instanceof FencedInstanceIdException) {
                return true;
            }
        }
        return false;
    }

    /** Whether the outcome of the call that threw {@code e} is unknown (a timeout: it may have happened). */
    static boolean indefinite(Throwable e) {
        return e instanceof TimeoutException || e.getCause() instanceof TimeoutException;
    }
}
