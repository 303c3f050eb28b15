package labkit.participant;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.common.KafkaException;

/**
 * A Java participant's process: {@code java labkit.participant.Main <spec as JSON>} runs the role the spec names
 * (labkit.crashlab.run for the Python ones). Exit 0 when finished or stopped, 3 when fenced
 * (labkit.crashlab.loop.EXIT_FENCED), 4 when it gave up waiting for its first assignment or record (EXIT_GAVE_UP),
 * 1 on any other error (its stack trace on stderr).
 */
public final class Main {
    static final int EXIT_FENCED = 3;
    static final int EXIT_GAVE_UP = 4;

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
        } catch (KafkaException e) {
            String error = KafkaErrors.name(e);
            if (KafkaErrors.fatal(e) || KafkaErrors.FENCED.contains(error)) {
                loop.log("fenced", "txn", loop.txnOrNull(), "error", error);
                System.exit(EXIT_FENCED);
            }
            throw e;
        }
        loop.log(loop.stopping ? "stop" : "finished");
        System.exit(0);
    }
}
