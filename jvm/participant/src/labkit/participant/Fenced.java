package labkit.participant;

/** The broker fenced this participant (or its client met a fatal error); carries the error's name. */
final class Fenced extends Exception {
    Fenced(String error) {
        super(error);
    }
}
