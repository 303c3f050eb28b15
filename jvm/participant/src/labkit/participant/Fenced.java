package labkit.participant;

/**
 * The broker fenced this participant: its producer epoch or its group membership is no longer current
 * (labkit.crashlab.loop.FENCED_ERRORS, in the spec: Loop.fencedErrors); carries the error's name, already written in
 * a fenced event. Main exits with the spec's exit code for it (Loop.exitFenced).
 */
final class Fenced extends Exception {
    Fenced(String error) {
        super(error);
    }

    /**
     * The exception that ends {@code loop} over the error named {@code error}, after its event: Fenced after a fenced
     * event if it is a fencing (KafkaErrors.fencing), else Failed after a failed event (labkit.crashlab.loop.end_with).
     * {@code fields} go into the event.
     */
    static Exception endWith(Loop loop, String error, Object... fields) {
        boolean fenced = KafkaErrors.fencing(error, loop.fencedErrors);
        Object[] all = new Object[fields.length + 2];
        System.arraycopy(fields, 0, all, 0, fields.length);
        all[fields.length] = "error";
        all[fields.length + 1] = error;
        loop.log(fenced ? "fenced" : "failed", all);
        return fenced ? new Fenced(error) : new Failed(error);
    }
}
