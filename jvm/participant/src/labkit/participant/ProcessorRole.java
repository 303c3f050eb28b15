package labkit.participant;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TimeoutException;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The processor role (labkit/crashlab/roles/processor.py) on Kafka's Java client: consume-transform-produce, each
 * input v giving output "v>stage" on the same partition of output_topic; transactional (KIP-447: outputs and input
 * offsets in one transaction, sendOffsetsToTransaction with the consumer's groupMetadata()) or at-least-once.
 */
final class ProcessorRole {
    /**
     * A rebalance listener that does nothing, and so makes a fenced member wait for this loop: with a listener, the
     * Java consumer's reconciliation waits until the application thread has run onPartitionsLost (in its next poll)
     * before it rejoins (ConsumerMembershipManager.invokeOnPartitionsLostCallback, enqueueConsumerRebalanceListener
     * Callback); without one, a member fenced while paused rejoins from its background thread at once, and the
     * batch it was processing is committed by sendOffsetsToTransaction with the new member epoch, on partitions
     * that now belong to another member (the broker does not check the assignment: KAFKA-20191, KIP-1287).
     */
    private static final ConsumerRebalanceListener AWAIT_THE_LOOP = new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        }
    };

    private ProcessorRole() {
    }

    static void run(Loop loop) throws Exception {
        boolean transactional = loop.flag("transactional");
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        try (KafkaConsumer<String, String> consumer = ConsumerRole.groupConsumer(loop);
             KafkaProducer<String, String> producer = transactional
                     ? loop.producer("transactional.id", loop.text("transactional_id")) : loop.producer();
             Admin admin = loop.admin()) {
            if (loop.flag("rebalance_listener")) {
                consumer.subscribe(List.of(loop.text("topic")), AWAIT_THE_LOOP);
            } else {
                consumer.subscribe(List.of(loop.text("topic")));
            }
            if (transactional) {
                loop.initTransactions(producer);
            }
            IdleClock idle = new IdleClock(loop, consumer);
            Map<Integer, Long> returned = new HashMap<>(); // partition -> the offset after the last record returned
            while (!idle.done()) {
                List<ConsumerRecord<String, String>> records = ConsumerRole.logConsumed(loop, consumer.poll(Loop.ms(500)));
                records.forEach(r -> returned.put(r.partition(), r.offset() + 1));
                if (!records.isEmpty()) {
                    process(loop, consumer, producer, records, transactional, pending);
                    idle.reset(); // idle from the end of the last batch
                } else if (!pending.isEmpty()) {
                    commit(loop, consumer, pending);
                } else if (loop.flag("stop_when_caught_up") && caughtUp(loop, admin, positions(consumer), returned)) {
                    break;
                }
            }
        }
    }

    private static void process(Loop loop, KafkaConsumer<String, String> consumer, KafkaProducer<String, String> producer,
                                List<ConsumerRecord<String, String>> records, boolean transactional,
                                Map<TopicPartition, OffsetAndMetadata> pending) throws Exception {
        loop.iteration += 1;
        if (transactional) {
            loop.begin(producer);
        }
        loop.step("after_poll");
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
            Thread.sleep(loop.integer("per_record_ms")); // "processing" the record
            loop.send(producer, loop.text("output_topic"), r.partition(), List.of(r.value() + ">" + loop.text("stage")), null);
            offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        loop.flush(producer);
        loop.step("after_produce");
        if (transactional) {
            sendOffsets(loop, producer, consumer, offsets);
            loop.commit(producer);
            return;
        }
        pending.putAll(offsets);
        if (commit(loop, consumer, pending)) {
            loop.step("after_commit");
        }
    }

    /**
     * sendOffsetsToTransaction; the group coordinator rejects a zombie's (KIP-447). On an error the loop ends, after
     * the error's event and an abort (unless the producer's error is fatal): Fenced if it is a fencing
     * (CommitFailedException(ILLEGAL_GENERATION) ... once the group moved on), else Failed (a timeout, an
     * unavailable coordinator: not a fencing).
     */
    private static void sendOffsets(Loop loop, KafkaProducer<String, String> producer, KafkaConsumer<String, String> consumer,
                                    Map<TopicPartition, OffsetAndMetadata> offsets) throws Exception {
        try {
            loop.call("send_offsets_to_transaction", 30, () -> {
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                return null;
            });
        } catch (KafkaException e) {
            Exception end = Fenced.endWith(loop, KafkaErrors.name(e), "txn", loop.txn, "step",
                    "send_offsets_to_transaction");
            if (!KafkaErrors.fatal(e)) {
                loop.abort(producer);
            }
            throw end;
        }
        loop.log("offsets_sent", "topic", loop.text("topic"), "txn", loop.txn);
        loop.step("after_send_offsets");
    }

    /**
     * At-least-once: commitSync of {@code pending} under the lab's deadline, as an offsets_committed event (with the
     * error if it failed). The Java consumer retries retriable errors itself until default.api.timeout.ms; a
     * retriable one that still came back keeps the offsets for the next try. Returns whether it succeeded.
     */
    private static boolean commit(Loop loop, KafkaConsumer<String, String> consumer,
                                  Map<TopicPartition, OffsetAndMetadata> pending) throws Exception {
        try {
            loop.call("commit", 30, () -> {
                consumer.commitSync(pending);
                return null;
            });
        } catch (KafkaException e) {
            loop.log("offsets_committed", "topic", loop.text("topic"), "error", KafkaErrors.name(e), "definite", true);
            if (!(e instanceof RetriableException) && !(e.getCause() instanceof RetriableException)) {
                pending.clear();
            }
            return false;
        }
        pending.clear();
        loop.log("offsets_committed", "topic", loop.text("topic"), "definite", true);
        return true;
    }

    /**
     * The consumer's positions on its partitions, {partition: offset}: local (a partition without a position yet is
     * left out), past the control records it skipped (a transaction's COMMIT marker: Fetcher's nextFetchOffset).
     */
    private static Map<Integer, Long> positions(KafkaConsumer<String, String> consumer) {
        Map<Integer, Long> out = new HashMap<>();
        for (TopicPartition tp : consumer.assignment()) {
            try {
                out.put(tp.partition(), consumer.position(tp, Duration.ZERO));
            } catch (TimeoutException | IllegalStateException e) {
                // no position yet (its committed offset is still being fetched), or revoked meanwhile
            }
        }
        return out;
    }

    /**
     * Whether the group has consumed and committed every partition of the input (labkit.kafka.records.caught_up):
     * Admin.listConsumerGroupOffsets with requireStable (an offset of an open transaction is not yet committed) against
     * listOffsets(latest), through the loop's one Admin client; false while the broker is down or the coordinator
     * loading. A partition is done when its committed offset is at the high watermark (an empty one counts as done),
     * or when this consumer's position there ({@code positions}) is at the high watermark and the committed offset at
     * least {@code returned}'s (the offset after the last record it returned): the rest were control records (the
     * COMMIT marker a transactional input ends with) or aborted ones, and the committed offset stops below them. A
     * partition another member holds counts once committed up to its high watermark (its position is that member's).
     */
    private static boolean caughtUp(Loop loop, Admin admin, Map<Integer, Long> positions, Map<Integer, Long> returned)
            throws Exception {
        return loop.call("caught_up", 1, () -> {
            String topic = loop.text("topic");
            try {
                Map<TopicPartition, OffsetAndMetadata> done = admin.listConsumerGroupOffsets(
                        Map.of(loop.text("group_id"), new ListConsumerGroupOffsetsSpec()),
                        new ListConsumerGroupOffsetsOptions().requireStable(true))
                        .partitionsToOffsetAndMetadata().get(1, TimeUnit.SECONDS);
                List<TopicPartition> partitions = new ArrayList<>();
                admin.describeTopics(List.of(topic)).allTopicNames().get(1, TimeUnit.SECONDS).get(topic).partitions()
                        .forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                partitions.forEach(tp -> latest.put(tp, OffsetSpec.latest()));
                var ends = admin.listOffsets(latest).all().get(1, TimeUnit.SECONDS);
                for (TopicPartition tp : partitions) {
                    long end = ends.get(tp).offset();
                    OffsetAndMetadata offset = done.get(tp);
                    long committed = offset == null ? -1 : offset.offset();
                    boolean skippedToEnd = positions.getOrDefault(tp.partition(), -1L) >= end
                            && committed >= returned.getOrDefault(tp.partition(), committed);
                    if (end > 0 && committed < end && !skippedToEnd) {
                        return false;
                    }
                }
                return true;
            } catch (Exception e) {
                return false;
            }
        });
    }
}
