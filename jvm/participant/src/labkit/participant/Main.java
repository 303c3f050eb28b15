package labkit.participant;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.common.KafkaException;

import java.nio.charset.StandardCharsets;

/**
 * A Java participant's process: {@code java labkit.participant.Main <spec as JSON>} runs the role the spec names
 * (labkit.crashlab.run for the Python ones). Exit 0 when finished or stopped; else the spec's exit code for how it
 * ended (Loop.exitFenced, exitGaveUp, exitFailed: labkit.crashlab.loop's EXIT_FENCED, EXIT_GAVE_UP, EXIT_FAILED):
 * fenced, after a fenced event (KafkaErrors.fencing); gave up waiting for its first assignment or record; failed over
 * any other error, after a failed event naming it (Kafka's name, KafkaErrors.name, or for an exception that is not
 * Kafka's "Class: message"; its stack trace on stderr). An error before the loop exists (a bad spec) exits 1, the
 * JVM's own code.
 * <p>
 * {@code java labkit.participant.Main lines <history>} prints the lines of a history file as this participant reads
 * them (History.lines), one JSON object a line in UTF-8: what tests/test_java.py compares with labkit.core.history.
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("lines")) {
            for (JsonNode line : new History(args[1]).lines()) {
                System.out.write((History.JSON.writeValueAsString(line) + "\n").getBytes(StandardCharsets.UTF_8));
            }
            System.out.flush();
            return;
        }
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
            System.exit(loop.exitFenced);
        } catch (GaveUp e) {
            System.exit(loop.exitGaveUp);
        } catch (Failed e) {
            System.exit(loop.exitFailed);
        } catch (KafkaException e) {
            e.printStackTrace();
            System.exit(Fenced.endWith(loop, KafkaErrors.name(e), "txn", loop.txnOrNull()) instanceof Fenced
                    ? loop.exitFenced : loop.exitFailed);
        } catch (Exception e) {
            e.printStackTrace();
            String message = e.getMessage() == null ? "" : ": " + e.getMessage();
            loop.log("failed", "txn", loop.txnOrNull(), "error", e.getClass().getSimpleName() + message);
            System.exit(loop.exitFailed);
        }
        loop.log(loop.stopping ? "stop" : "finished");
        System.exit(0);
    }
}
