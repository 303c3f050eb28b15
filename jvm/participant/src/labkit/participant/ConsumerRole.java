package labkit.participant;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.util.List;

/** The consumer role (labkit/crashlab/roles/consumer.py) on Kafka's Java client: poll, record, commitSync. */
final class ConsumerRole {
    private ConsumerRole() {
    }

    /**
     * A group consumer of the spec's group_id, group_protocol and isolation_level, committing by hand. A spec without
     * isolation_level leaves isolation.level unset: the client's own default (ConsumerConfig: read_uncommitted).
     */
    static KafkaConsumer<String, String> groupConsumer(Loop loop, Object... extra) {
        Object[] base = {"group.id", loop.text("group_id"), "group.protocol", loop.text("group_protocol"),
            "enable.auto.commit", false, "auto.offset.reset", "earliest", "max.poll.records", loop.integer("batch")};
        Object[] level = loop.text("isolation_level") == null ? new Object[0]
            : new Object[] {"isolation.level", loop.text("isolation_level")};
        Object[] all = new Object[base.length + level.length + extra.length];
        System.arraycopy(base, 0, all, 0, base.length);
        System.arraycopy(level, 0, all, base.length, level.length);
        System.arraycopy(extra, 0, all, base.length + level.length, extra.length);
        return new KafkaConsumer<>(loop.clientConfig(all), new StringDeserializer(), new StringDeserializer());
    }

    /** A consume event per record of {@code records}; returns them. */
    static List<ConsumerRecord<String, String>> logConsumed(Loop loop, ConsumerRecords<String, String> records) {
        List<ConsumerRecord<String, String>> out = new java.util.ArrayList<>();
        for (ConsumerRecord<String, String> r : records) {
            loop.log("consume", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                    "value_id", r.value(), "isolation_level", loop.text("isolation_level"));
            out.add(r);
        }
        return out;
    }

    static void run(Loop loop) throws Exception {
        try (KafkaConsumer<String, String> consumer = groupConsumer(loop)) {
            consumer.subscribe(List.of(loop.text("topic")));
            IdleClock idle = new IdleClock(loop, consumer);
            while (!idle.done()) {
                if (logConsumed(loop, consumer.poll(Loop.ms(500))).isEmpty()) {
                    continue;
                }
                loop.iteration += 1;
                idle.reset();
                loop.step("after_poll");
                loop.call("commit", 30, () -> {
                    consumer.commitSync();
                    return null;
                });
                loop.log("offsets_committed", "topic", loop.text("topic"));
                loop.step("after_commit");
                idle.reset();
            }
        }
    }
}
