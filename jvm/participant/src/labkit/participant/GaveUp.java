package labkit.participant;

/**
 * The loop ended before it had anything to do: no partition was assigned to its consumer (a share consumer: no record
 * came) within its deadline; carries why (labkit.crashlab.loop.GaveUp). Throw it with {@link #giveUp}.
 */
final class GaveUp extends Exception {
    private GaveUp(String reason) {
        super(reason);
    }

    /** A gave_up event with {@code reason} as its error, then GaveUp (Main exits with Loop.exitGaveUp). */
    static GaveUp giveUp(Loop loop, String reason) {
        loop.log("gave_up", "error", reason);
        return new GaveUp(reason);
    }
}
