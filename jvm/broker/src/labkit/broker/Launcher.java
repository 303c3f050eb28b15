package labkit.broker;

import java.util.Arrays;

/**
 * The lab broker's main class: formats the node's storage when asked, then runs {@code kafka.Kafka}, in one JVM.
 * What {@code kafka-storage.sh format} and {@code kafka-server-start.sh} do in two JVMs (a JVM start, about a second
 * of CPU, less per new broker). Both steps are Kafka's own: {@code kafka.tools.StorageTool.execute} and
 * {@code kafka.Kafka.main}.
 *
 * <p>Usage: {@code Launcher <server.properties> [format <StorageTool arguments>]}, e.g.
 * {@code Launcher server.properties format --standalone --cluster-id=<id> -c server.properties}.
 * Exit code {@value #FORMAT_FAILED}: the format failed (StorageTool's message on stderr); the broker did not start.
 */
public final class Launcher {
    /** The exit code of a failed format. */
    public static final int FORMAT_FAILED = 3;

    private Launcher() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 1) {
            if (!args[1].equals("format")) {
                System.err.println("usage: Launcher <server.properties> [format <StorageTool arguments>]");
                System.exit(2);
            }
            int code;
            try {
                code = kafka.tools.StorageTool.execute(Arrays.copyOfRange(args, 1, args.length), System.out);
            } catch (Exception e) {  // TerseFailure, FormatterException, a bad config: what StorageTool.main prints
                System.err.println(e.getMessage());
                code = FORMAT_FAILED;
            }
            System.out.flush();
            if (code != 0) {
                System.exit(FORMAT_FAILED);
            }
        }
        kafka.Kafka.main(new String[] {args[0]});
    }
}
