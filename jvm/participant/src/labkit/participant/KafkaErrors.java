package labkit.participant;

import org.apache.kafka.common.KafkaException;
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
    private KafkaErrors() {
    }

    /**
     * Kafka's name of the error behind {@code e} (org.apache.kafka.common.protocol.Errors), looking through its
     * causes; an exception the client made of one (CommitFailedException names the error in its message) is named
     * "CommitFailedException(ILLEGAL_GENERATION)", a plain KafkaException by the error alone (the Java client's
     * TransactionManager wraps e.g. INVALID_TRANSACTION_TIMEOUT from InitProducerId in one); anything else by its
     * class.
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
                return e.getClass() == KafkaException.class ? error.name()
                        : e.getClass().getSimpleName() + "(" + error.name() + ")";
            }
        }
        return e.getClass().getSimpleName();
    }

    /**
     * Whether the error named {@code error} ({@link #name}: "CommitFailedException(ILLEGAL_GENERATION)" counts as
     * ILLEGAL_GENERATION) is one of {@code fenced}, the errors that end a participant as fenced: its producer epoch or
     * group membership is no longer current (labkit.crashlab.loop.is_fencing; the set is its FENCED_ERRORS, which
     * says why each, handed to this JVM in the spec: Loop.fencedErrors).
     */
    static boolean fencing(String error, Set<String> fenced) {
        if (error == null) {
            return false;
        }
        int open = error.indexOf('(');
        String inner = open >= 0 && error.endsWith(")") ? error.substring(open + 1, error.length() - 1) : error;
        return fenced.contains(inner);
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
