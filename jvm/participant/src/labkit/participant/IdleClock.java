package labkit.participant;

import org.apache.kafka.clients.consumer.Consumer;

/**
 * When a group consumer's loop ends for want of records (labkit.crashlab.loop.IdleClock): idle_ms without a record
 * batch, counted from the consumer's first assignment (a non-empty assignment()), not from the start. Joining takes a
 * few heartbeats (about 4 s for this client, KIP-848), and a partition another member holds moves only once that member
 * leaves or its session times out. Until then assignment_timeout_ms from the start bounds the wait.
 */
final class IdleClock {
    private final Loop loop;
    private final Consumer<?, ?> consumer;
    private final long started = System.nanoTime();
    private long since; // the first assignment or the end of the last batch (System.nanoTime); 0 before
    private boolean assigned;

    IdleClock(Loop loop, Consumer<?, ?> consumer) {
        this.loop = loop;
        this.consumer = consumer;
    }

    /** A record batch was handled: the idle time starts again. */
    void reset() {
        since = System.nanoTime();
        assigned = true;
    }

    /**
     * Whether the loop should end: asked to stop, or no batch came for idle_ms since the first assignment or the last
     * reset(). Throws GaveUp (after its gave_up event) if no partition was assigned within assignment_timeout_ms.
     */
    boolean done() throws GaveUp {
        if (loop.stopping) {
            return true;
        }
        long now = System.nanoTime();
        if (!assigned) {
            if (consumer.assignment().isEmpty()) {
                long timeoutMs = loop.integer("assignment_timeout_ms");
                if (now - started > timeoutMs * 1_000_000L) {
                    throw GaveUp.giveUp(loop, String.format("no partition of %s was assigned within "
                            + "assignment_timeout_ms (%d ms)", loop.text("topic"), timeoutMs));
                }
                return false;
            }
            reset();
        }
        return now - since > loop.integer("idle_ms") * 1_000_000L;
    }
}
