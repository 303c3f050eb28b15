// Notebook 05's non-member commit on Kafka's own Java client (labkit.lessons.nonmember_commit.java_outsider_commit).
//
// A transactional KafkaProducer that belongs to no consumer group commits offsets for a group in a transaction of
// its own: initTransactions, beginTransaction, sendOffsetsToTransaction(offsets, metadata), commitTransaction, with
// the group metadata from one of two places (METADATA):
//   constructor        new ConsumerGroupMetadata(groupId): ConsumerGroupMetadata(String) sets generation -1, member
//                      id "" and no group instance id (deprecated since 4.2 for removal in 5.0, KIP-1136);
//   consumer:PROTOCOL  KafkaConsumer#groupMetadata() (what KIP-1136 says to use instead) of a KafkaConsumer with the
//                      group's group.id and group.protocol=PROTOCOL ("classic" or "consumer") that never subscribes.
//
// Run with the JDK's single-file source launcher on the release's classpath:
//   java -cp <kafka jars> NonMemberCommit.java BOOTSTRAP GROUP TOPIC PARTITION:OFFSET[,...] TXN_ID DEADLINE_MS METADATA
// It prints one JSON line on stdout: {"client", "metadata_from", "answer" ("NONE" or the Errors name), "exception",
// "message", "generation", "member_id", "group_instance_id"} (what the commit carried); the client's own log goes
// to stderr. Every blocking call has DEADLINE_MS (max.block.ms, default.api.timeout.ms, and the closes).
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class NonMemberCommit {
    public static void main(String[] args) {
        String bootstrap = args[0], groupId = args[1], topic = args[2], txnId = args[4];
        long deadlineMs = Long.parseLong(args[5]);
        String metadataFrom = args[6];
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (String pair : args[3].split(",")) {
            String[] po = pair.split(":");
            offsets.put(new TopicPartition(topic, Integer.parseInt(po[0])),
                        new OffsetAndMetadata(Long.parseLong(po[1])));
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Long.toString(deadlineMs));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = null;
        ConsumerGroupMetadata metadata;
        if (metadataFrom.equals("constructor")) {
            metadata = fromConstructor(groupId);
        } else if (metadataFrom.startsWith("consumer:")) {
            Properties config = new Properties();
            config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            config.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
            config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, metadataFrom.substring("consumer:".length()));
            config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            config.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Long.toString(deadlineMs));
            config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            consumer = new KafkaConsumer<>(config);  // never subscribes: not a member of the group
            metadata = consumer.groupMetadata();
        } else {
            throw new IllegalArgumentException("METADATA: constructor or consumer:PROTOCOL, not " + metadataFrom);
        }
        String answer = "NONE", exception = null, message = null;
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        try {
            producer.initTransactions();
            producer.beginTransaction();
            try {
                producer.sendOffsetsToTransaction(offsets, metadata);
                producer.commitTransaction();
            } catch (RuntimeException e) {
                answer = errorName(e);
                exception = e.getClass().getName();
                message = e.getMessage();
                try {
                    producer.abortTransaction();
                } catch (RuntimeException ignored) {
                    // a fatal error (e.g. fenced) leaves nothing to abort; the answer above is what counts
                }
            }
        } catch (RuntimeException e) {  // initTransactions or beginTransaction
            answer = errorName(e);
            exception = e.getClass().getName();
            message = e.getMessage();
        } finally {
            producer.close(Duration.ofMillis(deadlineMs));
            if (consumer != null) {
                consumer.close(Duration.ofMillis(deadlineMs));
            }
        }
        System.out.println("{\"client\": " + json("kafka-clients " + clientVersion())
                + ", \"metadata_from\": " + json(metadataFrom) + ", \"answer\": " + json(answer)
                + ", \"exception\": " + json(exception)
                + ", \"message\": " + json(message) + ", \"generation\": " + metadata.generationId()
                + ", \"member_id\": " + json(metadata.memberId())
                + ", \"group_instance_id\": " + json(metadata.groupInstanceId().orElse(null)) + "}");
    }

    /** ConsumerGroupMetadata(String): deprecated since 4.2, for removal in 5.0 (KIP-1136); public in 4.3 and 4.4. */
    @SuppressWarnings("removal")
    static ConsumerGroupMetadata fromConstructor(String groupId) {
        return new ConsumerGroupMetadata(groupId);
    }

    /** kafka-clients' version, from its jar's kafka/kafka-version.properties (what AppInfoParser reads). */
    static String clientVersion() {
        try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties props = new Properties();
            if (in != null) {
                props.load(in);
            }
            return props.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }

    /** The Errors name of e (or of its first cause Kafka maps to one), else the exception's simple class name. */
    static String errorName(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            Errors error = Errors.forException(t);
            if (error != Errors.UNKNOWN_SERVER_ERROR) {
                return error.name();
            }
        }
        return e.getClass().getSimpleName();
    }

    static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
