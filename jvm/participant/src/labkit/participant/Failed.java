package labkit.participant;

/**
 * The participant met an error it cannot go on after that is not a fencing (KafkaErrors.fencing): a fatal error of
 * the client (an authorization, an out-of-order sequence, INVALID_TRANSACTION_TIMEOUT), a transactional call that
 * failed (a timeout), a bad config, an exception of the role's own code; carries the error's name, already written
 * in a failed event (labkit.crashlab.loop.Failed). Main exits with Loop.exitFailed.
 */
final class Failed extends Exception {
    Failed(String error) {
        super(error);
    }
}
