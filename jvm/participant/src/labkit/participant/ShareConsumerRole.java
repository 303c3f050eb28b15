package labkit.participant;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

/**
 * The share consumer role (labkit/share/roles/share_consumer.py, KIP-932) on Kafka's Java client, a
 * KafkaShareConsumer. Decisions as in the Python role (accept, release, reject, hold); with renew_ms, a "hold"
 * record's processing renews its acquisition lock every renew_ms (AcknowledgeType.RENEW, KIP-1222): the
 * acknowledgement is sent by commitSync, the record stays acquired by this consumer with the same delivery count,
 * and the client hands it back on a later poll, when processing goes on until it is accepted. With max_polls, the
 * consumer is closed right after the work of that many polls with records, without polling again.
 */
final class ShareConsumerRole {
    private ShareConsumerRole() {
    }

    static void run(Loop loop) throws Exception {
        boolean explicit = loop.text("ack_mode").equals("explicit");
        String topic = loop.text("topic");
        Map<String, Long> processedMs = new HashMap<>(); // a held record's processing so far (renewals)
        // value id -> delivery count of a record renewed: handed back with that count it is no new delivery (with
        // another, the renewal was refused, e.g. share.renew.acknowledge.enable=false, and its lock ran out)
        Map<String, Integer> renewed = new HashMap<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(loop.clientConfig(
                "group.id", loop.text("group_id"), "client.id", loop.name,
                "share.acknowledgement.mode", explicit ? "explicit" : "implicit"),
                new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long idleSince = System.nanoTime();
            long patienceNs = loop.integer("first_ms") * 1_000_000L;
            boolean delivered = false;
            while (!loop.stopping && System.nanoTime() - idleSince <= patienceNs) {
                List<ConsumerRecord<String, String>> records = new ArrayList<>();
                consumer.poll(Loop.ms(500)).forEach(records::add);
                if (records.isEmpty()) {
                    continue;
                }
                patienceNs = loop.integer("idle_ms") * 1_000_000L;
                delivered = true;
                loop.iteration += 1;
                List<ConsumerRecord<String, String>> fresh = records.stream()
                        .filter(r -> !Integer.valueOf(count(r)).equals(renewed.remove(r.value()))).toList();
                fresh.forEach(r -> processedMs.remove(r.value())); // a new delivery is processed from its start
                long now = System.nanoTime();
                loop.history.appendBatch("delivered", loop.name, columns(fresh, col("mono_ns", r -> now),
                        col("partition", ConsumerRecord::partition), col("offset", ConsumerRecord::offset),
                        col("value_id", ConsumerRecord::value),
                        col("delivery_count", r -> (int) r.deliveryCount().orElse((short) 1))), "topic", topic);
                loop.step("after_poll");
                Map<ConsumerRecord<String, String>, String> decided = new LinkedHashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    String d = decision(loop.spec, r.value(), r.deliveryCount().orElse((short) 1));
                    long done = processedMs.getOrDefault(r.value(), 0L);
                    // per_record_ms once per delivery, as in the Python role: not again on each renewal
                    long ms = done == 0 ? loop.integer("per_record_ms") : 0;
                    if (d.equals("hold")) {
                        long left = loop.integer("hold_ms") - done;
                        int renewMs = loop.spec.path("renew_ms").asInt(0);
                        if (renewMs > 0 && left > renewMs) {
                            ms += renewMs;
                            processedMs.put(r.value(), done + renewMs);
                            renewed.put(r.value(), count(r));
                            d = "renew";
                        } else {
                            ms += left;
                            processedMs.remove(r.value());
                        }
                    }
                    Thread.sleep(ms);
                    decided.put(r, d);
                }
                if (explicit) {
                    acknowledge(loop, consumer, decided);
                }
                idleSince = System.nanoTime(); // idle from the end of the last poll's work
                int maxPolls = loop.spec.path("max_polls").asInt(0);
                if (maxPolls > 0 && loop.iteration >= maxPolls) {
                    break; // close right after this poll's work: no further poll (implicit mode accepts nothing more)
                }
            }
            if (!delivered && !loop.stopping) { // KafkaShareConsumer tells no assignment: first_ms is from the start
                throw GaveUp.giveUp(loop, String.format("no record of %s was delivered within first_ms (%d ms) of the "
                        + "start", topic, loop.integer("first_ms")));
            }
        }
    }

    private static int count(ConsumerRecord<String, String> r) {
        return r.deliveryCount().orElse((short) 1);
    }

    /** What the consumer does with value id {@code vid} on its {@code count}-th delivery (share_consumer.decision). */
    static String decision(JsonNode spec, String vid, int count) {
        JsonNode d = spec.path("decisions").has(vid) ? spec.path("decisions").get(vid) : spec.get("default");
        return d.isTextual() ? d.asText() : d.get(Math.min(count, d.size()) - 1).asText();
    }

    private static AcknowledgeType type(String decision) {
        return switch (decision) {
            case "release" -> AcknowledgeType.RELEASE;
            case "reject" -> AcknowledgeType.REJECT;
            case "renew" -> AcknowledgeType.RENEW;
            default -> AcknowledgeType.ACCEPT;
        };
    }

    /** Acknowledge each record as decided, commitSync, and log each record's result (share_consumer._acknowledge). */
    private static void acknowledge(Loop loop, KafkaShareConsumer<String, String> consumer,
                                    Map<ConsumerRecord<String, String>, String> decided) throws Exception {
        String topic = loop.text("topic");
        List<ConsumerRecord<String, String>> records = new ArrayList<>(decided.keySet());
        decided.forEach((r, d) -> consumer.acknowledge(r, type(d)));
        long acked = System.nanoTime();
        loop.history.appendBatch("acknowledged", loop.name, columns(records, col("mono_ns", r -> acked),
                col("partition", ConsumerRecord::partition), col("offset", ConsumerRecord::offset),
                col("value_id", ConsumerRecord::value), col("ack_type", r -> type(decided.get(r)).name())), "topic", topic);
        loop.step("after_acknowledge");
        loop.step("before_commit");
        Map<Integer, String> results = new HashMap<>();
        try {
            Map<TopicIdPartition, Optional<KafkaException>> committed = loop.call("commit_sync", 30, consumer::commitSync);
            committed.forEach((tp, e) -> results.put(tp.partition(), e.map(KafkaErrors::name).orElse(null)));
        } catch (KafkaException e) {
            records.forEach(r -> results.put(r.partition(), KafkaErrors.name(e)));
        }
        long done = System.nanoTime();
        loop.history.appendBatch("ack_committed", loop.name, columns(records, col("mono_ns", r -> done),
                col("partition", ConsumerRecord::partition), col("offset", ConsumerRecord::offset),
                col("value_id", ConsumerRecord::value), col("ack_type", r -> type(decided.get(r)).name()),
                col("error", r -> results.containsKey(r.partition()) ? results.get(r.partition()) : "NO_RESULT")),
                "topic", topic, "definite", true);
        loop.step("after_commit");
    }

    private static Map.Entry<String, Function<ConsumerRecord<String, String>, Object>> col(
            String name, Function<ConsumerRecord<String, String>, Object> fn) {
        return Map.entry(name, fn);
    }

    /** History batch columns, one per (field name, value of a record) pair. */
    @SafeVarargs
    private static Map<String, List<?>> columns(List<ConsumerRecord<String, String>> records,
                                                Map.Entry<String, Function<ConsumerRecord<String, String>, Object>>... cols) {
        Map<String, List<?>> out = new LinkedHashMap<>();
        for (var c : cols) {
            List<Object> column = new ArrayList<>(records.size());
            records.forEach(r -> column.add(c.getValue().apply(r)));
            out.put(c.getKey(), column);
        }
        return out;
    }
}
