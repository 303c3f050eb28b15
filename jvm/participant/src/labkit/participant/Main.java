package labkit.participant;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.common.KafkaException;

/**
 * A Java participant's process: {@code java labkit.participant.Main <spec as JSON>} runs the role the spec names
 * (labkit.crashlab.run for the Python ones). Exit 0 when finished or stopped; EXIT_FENCED (3,
 * labkit.crashlab.loop.EXIT_FENCED) when fenced, after a fenced event (KafkaErrors.fencing); EXIT_GAVE_UP (4) when it
 * gave up waiting for its first assignment or record; EXIT_FAILED (5) on any other error, after a failed event naming
 * it (Kafka's name, KafkaErrors.name, or for an exception that is not Kafka's "Class: message"; its stack trace on
 * stderr). An error before the loop exists (a bad spec) exits 1, the JVM's own code.
 */
public final class Main {
    static final int EXIT_FENCED = 3;
    static final int EXIT_GAVE_UP = 4;
    static final int EXIT_FAILED = 5;

    private Main() {
    }

    public static void main(String[] args) throws Exception {
        JsonNode spec = History.JSON.readTree(args[0]);
        Loop loop = new Loop(spec);
        try {
            switch (spec.get("role").asText()) {
                case "producer" -> ProducerRole.run(loop);
                case "consumer" -> ConsumerRole.run(loop);
                case "processor" -> ProcessorRole.run(loop);
                case "share_consumer" -> ShareConsumerRole.run(loop);
                default -> throw new IllegalArgumentException("no Java role " + spec.get("role").asText());
            }
        } catch (Fenced e) {
            System.exit(EXIT_FENCED);
        } catch (GaveUp e) {
            System.exit(EXIT_GAVE_UP);
        } catch (Failed e) {
            System.exit(EXIT_FAILED);
        } catch (KafkaException e) {
            e.printStackTrace();
            System.exit(Fenced.endWith(loop, KafkaErrors.name(e), "txn", loop.txnOrNull()) instanceof Fenced
                    ? EXIT_FENCED : EXIT_FAILED);
        } catch (Exception e) {
            e.printStackTrace();
            String message = e.getMessage() == null ? "" : ": " + e.getMessage();
            loop.log("failed", "txn", loop.txnOrNull(), "error", e.getClass().getSimpleName() + message);
            System.exit(EXIT_FAILED);
        }
        loop.log(loop.stopping ? "stop" : "finished");
        System.exit(0);
    }
}
