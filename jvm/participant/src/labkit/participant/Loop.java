package labkit.participant;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringSerializer;
import sun.misc.Signal;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * What every Java role's loop shares, as labkit.crashlab.loop.Loop does for the Python ones: the spec, the history,
 * the named steps (a crash point is a real SIGKILL of this JVM), the stop flag (SIGTERM), the lab's deadline on each
 * blocking client call (a call past it is reported as a "stalled" event) and the producer's send / ack events.
 */
final class Loop {
    final JsonNode spec;
    final String name;
    final History history;
    /**
     * How a participant ends, from the spec (labkit.crashlab.java.ENDINGS puts them there, from labkit.crashlab.loop,
     * their one source for both clients): the errors that are fencings (FENCED_ERRORS, KafkaErrors.fencing) and the
     * exit codes of a fenced, a gave-up and a failed participant (EXIT_FENCED, EXIT_GAVE_UP, EXIT_FAILED).
     */
    final Set<String> fencedErrors = new HashSet<>();
    final int exitFenced;
    final int exitGaveUp;
    final int exitFailed;
    int iteration;
    int txn;
    volatile boolean stopping;
    private volatile Object[] call; // {name, deadline (System.nanoTime), deadline length (s)}
    private String topic;
    private final List<Object[]> sends = new ArrayList<>(); // {mono_ns, value id, partition}
    private final List<Object[]> acks = new ArrayList<>(); // {mono_ns, value id, partition, offset}
    private final List<Exception> sendErrors = new ArrayList<>();

    Loop(JsonNode spec) {
        this.spec = spec;
        this.name = spec.get("name").asText();
        this.history = new History(spec.get("history").asText());
        this.txn = spec.path("last_txn").asInt(0);
        required(spec, "fenced_errors").forEach(error -> fencedErrors.add(error.asText()));
        this.exitFenced = required(spec, "exit_fenced").asInt();
        this.exitGaveUp = required(spec, "exit_gave_up").asInt();
        this.exitFailed = required(spec, "exit_failed").asInt();
        // SIGTERM: finish the iteration and close the clients (a graceful stop), as the Python loop does; the JVM's
        // own handler would run the shutdown hooks and exit at once with 143
        Signal.handle(new Signal("TERM"), signal -> stopping = true);
        Thread watchdog = new Thread(this::watch, "labkit-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    // -- the spec ---------------------------------------------------------------------------
    /** The spec's {@code key}; IllegalArgumentException if it has none (a spec labkit did not write). */
    private static JsonNode required(JsonNode spec, String key) {
        JsonNode v = spec.get(key);
        if (v == null || v.isNull()) {
            throw new IllegalArgumentException("the spec has no " + key + " (labkit.crashlab.java.ENDINGS)");
        }
        return v;
    }

    String text(String key) {
        JsonNode v = spec.get(key);
        return v == null || v.isNull() ? null : v.asText();
    }

    int integer(String key) {
        return spec.get(key).asInt();
    }

    boolean flag(String key) {
        return spec.get(key).asBoolean();
    }

    // -- history and steps ------------------------------------------------------------------
    void log(String kind, Object... fields) {
        history.append(kind, name, fields);
    }

    /** Pass step {@code step}: wait there sleep_at[step] ms if asked, and SIGKILL this process if it is the crash point. */
    void step(String step) throws InterruptedException {
        long holdMs = spec.path("sleep_at").path(step).asLong(0);
        if (holdMs > 0) {
            Thread.sleep(holdMs);
        }
        if (step.equals(text("crash_at")) && (spec.path("crash_iteration").isNull()
                || spec.path("crash_iteration").asInt() == iteration)) {
            log("crash", "step", step);
            kill();
        }
    }

    /** A real SIGKILL of this JVM (the JDK cannot signal its own process, so kill(1) does it); never returns. */
    private static void kill() throws InterruptedException {
        try {
            new ProcessBuilder("kill", "-KILL", String.valueOf(ProcessHandle.current().pid())).start().waitFor();
        } catch (IOException e) {
            Runtime.getRuntime().halt(137);
        }
        Thread.sleep(Long.MAX_VALUE);
    }

    // -- blocking calls under the lab's deadline ----------------------------------------------
    interface Call<T> {
        T run() throws Exception;
    }

    /**
     * Run blocking client call {@code fn} under the lab's deadline: the spec's call_deadline_ms, default
     * {@code timeoutS} + 5 s; past it a "stalled" event names the call, and the call is left to end by itself.
     */
    <T> T call(String callName, double timeoutS, Call<T> fn) throws Exception {
        double deadlineS = spec.path("call_deadline_ms").isNull() ? timeoutS + 5
                : spec.get("call_deadline_ms").asDouble() / 1000;
        call = new Object[] {callName, System.nanoTime() + (long) (deadlineS * 1e9), deadlineS};
        try {
            return fn.run();
        } finally {
            call = null;
        }
    }

    private void watch() {
        Object[] reported = null;
        while (true) {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                return;
            }
            Object[] current = call;
            if (current != null && current != reported && System.nanoTime() > (long) current[1]) {
                reported = current;
                log("stalled", "step", current[0], "error", String.format("%s still running past the lab's deadline "
                        + "of %s s", current[0], stripZeros((double) current[2])));
            }
        }
    }

    private static String stripZeros(double seconds) {
        return seconds == Math.rint(seconds) ? String.valueOf((long) seconds) : String.valueOf(seconds);
    }

    // -- clients ----------------------------------------------------------------------------
    /**
     * A client's configs: the broker, a reconnect backoff of at most 1 s (as the Python clients), {@code extra},
     * then the spec's config (which overrides).
     */
    Map<String, Object> clientConfig(Object... extra) {
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", text("bootstrap"));
        config.put("reconnect.backoff.max.ms", "1000");
        for (int i = 0; i < extra.length; i += 2) {
            config.put((String) extra[i], String.valueOf(extra[i + 1]));
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.path("config").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            config.put(e.getKey(), e.getValue().asText());
        }
        return config;
    }

    /**
     * A producer of string values with the client configs and {@code extra}, its blocking calls bounded at 30 s
     * (max.block.ms; librdkafka's calls get 30 s from the lab), and a close that waits at most 30 s (KafkaProducer's
     * own close() waits without limit for requests in flight, e.g. to a broker that is down).
     */
    KafkaProducer<String, String> producer(Object... extra) {
        Object[] all = Arrays.copyOf(new Object[] {"max.block.ms", 30000}, 2 + extra.length);
        System.arraycopy(extra, 0, all, 2, extra.length);
        return new KafkaProducer<>(clientConfig(all), new StringSerializer(), new StringSerializer()) {
            @Override
            public void close() {
                close(Duration.ofSeconds(30));
            }
        };
    }

    Admin admin() {
        return Admin.create(Map.of("bootstrap.servers", text("bootstrap"), "request.timeout.ms", 5000,
                "default.api.timeout.ms", 10000));
    }

    // -- producing --------------------------------------------------------------------------
    /** Produce values {@code vids} to topic/partition; their send events share one time and wait for flush(). */
    void send(KafkaProducer<String, String> producer, String toTopic, int partition, List<String> vids, String key) {
        if (!toTopic.equals(topic)) {
            writeEvents();
            topic = toTopic;
        }
        long now = System.nanoTime();
        for (String vid : vids) {
            sends.add(new Object[] {now, vid, partition});
            producer.send(new ProducerRecord<>(toTopic, partition, key, vid), (RecordMetadata md, Exception e) -> {
                synchronized (acks) {
                    if (e == null) {
                        acks.add(new Object[] {System.nanoTime(), vid, md.partition(), md.offset()});
                    } else {
                        sendErrors.add(e);
                        log("send_failed", "topic", toTopic, "partition", partition, "value_id", vid,
                                "txn", txnOrNull(), "error", KafkaErrors.name(e), "definite", !KafkaErrors.indefinite(e));
                    }
                }
            });
        }
    }

    /**
     * Wait for every delivery report; a fatal error among them (KafkaErrors.fatal) ends the loop: Fenced after a
     * fenced event if it is a fencing (a fenced producer), else Failed after a failed event (Fenced.endWith).
     */
    void flush(KafkaProducer<String, String> producer) throws Exception {
        call("flush", 30, () -> {
            producer.flush();
            return null;
        });
        writeEvents();
        Exception fatal;
        synchronized (acks) {
            fatal = sendErrors.stream().filter(KafkaErrors::fatal).findFirst().orElse(null);
            sendErrors.clear();
        }
        if (fatal != null) {
            throw Fenced.endWith(this, KafkaErrors.name(fatal), "txn", txnOrNull(), "step", "flush");
        }
    }

    /** Write the buffered send and ack events, one history line per kind. */
    void writeEvents() {
        synchronized (acks) {
            if (!sends.isEmpty()) {
                history.appendBatch("send", name, columns(sends, "mono_ns", "value_id", "partition"),
                        "topic", topic, "txn", txnOrNull());
            }
            if (!acks.isEmpty()) {
                history.appendBatch("ack", name, columns(acks, "mono_ns", "value_id", "partition", "offset"),
                        "topic", topic, "txn", txnOrNull(), "definite", true);
            }
            sends.clear();
            acks.clear();
        }
    }

    static Map<String, List<?>> columns(List<Object[]> rows, String... names) {
        Map<String, List<?>> out = new LinkedHashMap<>();
        for (int i = 0; i < names.length; i++) {
            List<Object> column = new ArrayList<>(rows.size());
            for (Object[] row : rows) {
                column.add(row[i]);
            }
            out.put(names[i], column);
        }
        return out;
    }

    Integer txnOrNull() {
        return txn == 0 ? null : txn;
    }

    // -- transactions -----------------------------------------------------------------------
    /** beginTransaction, with its txn_begin event. */
    void begin(KafkaProducer<String, String> producer) {
        producer.beginTransaction();
        txn += 1;
        log("txn_begin", "txn", txn, "transactional_id", text("transactional_id"));
    }

    /**
     * Commit the open transaction, recording its outcome. A fatal error (KafkaErrors.fatal) ends the loop: Fenced
     * if it is a fencing, else Failed (Fenced.endWith); any other is abortable (KIP-588): the transaction is aborted
     * and the loop goes on (an abort that fails ends it, see abort). Returns whether it committed.
     */
    boolean commit(KafkaProducer<String, String> producer) throws Exception {
        step("before_commit");
        log("txn_commit_start", "txn", txn);
        try {
            call("commit_transaction", 30, () -> {
                producer.commitTransaction();
                return null;
            });
        } catch (KafkaException e) {
            if (KafkaErrors.fatal(e)) {
                throw Fenced.endWith(this, KafkaErrors.name(e), "txn", txn, "step", "commit_transaction");
            }
            log("txn_end", "txn", txn, "error", KafkaErrors.name(e), "definite", false);
            abort(producer);
            return false;
        }
        log("txn_end", "txn", txn, "outcome", "committed", "definite", true);
        step("after_commit");
        return true;
    }

    /**
     * abortTransaction, with its txn_end event. An error there ends the loop: Fenced if it is a fencing (the zombie of
     * KIP-588: PRODUCER_FENCED; INVALID_TXN_STATE after the coordinator aborted the transaction), else Failed.
     */
    void abort(KafkaProducer<String, String> producer) throws Exception {
        try {
            call("abort_transaction", 30, () -> {
                producer.abortTransaction();
                return null;
            });
        } catch (KafkaException e) {
            throw Fenced.endWith(this, KafkaErrors.name(e), "txn", txn, "step", "abort_transaction");
        }
        log("txn_end", "txn", txn, "outcome", "aborted", "definite", true);
    }

    /**
     * initTransactions under the lab's deadline; on a restart (the spec has last_txn) also the txn_init event of
     * labkit.crashlab.loop.init_transactions: the coordinator's state before (Admin.describeTransactions, KIP-664),
     * the new producer id and epoch, and the end of the old instance's open transaction.
     */
    void initTransactions(KafkaProducer<String, String> producer) throws Exception {
        boolean restarted = !spec.path("last_txn").isNull();
        String tid = text("transactional_id");
        String before = null;
        if (restarted) {
            try (Admin admin = admin()) {
                before = describe(admin, tid).state().toString();
            } catch (Exception e) {
                before = e.getClass().getSimpleName();
            }
        }
        call("init_transactions", 30, () -> {
            producer.initTransactions();
            return null;
        });
        if (!restarted) {
            return;
        }
        TransactionDescription now;
        try (Admin admin = admin()) {
            now = describe(admin, tid);
        }
        int oldTxn = spec.get("last_txn").asInt();
        boolean ended = history.lines().stream().anyMatch(e -> "txn_end".equals(e.path("kind").asText())
                && !e.path("outcome").isMissingNode() && name.equals(e.path("participant").asText())
                && e.path("txn").asInt() == oldTxn);
        String outcome = ended ? null : switch (before) {
            case "Ongoing", "PrepareAbort" -> "aborted";
            case "PrepareCommit" -> "committed";
            default -> null;
        };
        log("txn_init", "transactional_id", tid, "producer_id", now.producerId(), "producer_epoch",
                now.producerEpoch(), "state", before, "txn", outcome == null ? null : oldTxn, "outcome", outcome);
        if (outcome != null) {
            log("txn_end", "txn", oldTxn, "outcome", outcome, "step", "init_transactions", "definite", true);
        }
    }

    private static TransactionDescription describe(Admin admin, String tid) throws Exception {
        return admin.describeTransactions(List.of(tid)).description(tid).get(10, TimeUnit.SECONDS);
    }

    static Duration ms(long millis) {
        return Duration.ofMillis(millis);
    }
}
