import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.clients.producer.ProducerRecord;

import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * bench/participants.py's baseline for the Java participant: the same idempotent produce/flush loop on Kafka's Java
 * client with no history. Args: bootstrap topic records batch. Prints "first-send-ns records-per-second".
 */
public final class BareProducer {
    public static void main(String[] args) {
        int records = Integer.parseInt(args[2]);
        int batch = Integer.parseInt(args[3]);
        AtomicLong acked = new AtomicLong();
        try (KafkaProducer<String, String> p = new KafkaProducer<>(Map.of("bootstrap.servers", args[0],
                "enable.idempotence", "true"), new StringSerializer(), new StringSerializer())) {
            p.partitionsFor(args[1]);
            long start = System.nanoTime();
            for (int i = 0; i < records; i += batch) {
                for (int j = 0; j < batch; j++) {
                    p.send(new ProducerRecord<>(args[1], 0, null, "bare-" + (i + j + 1)), (md, e) -> {
                        if (e == null) {
                            acked.incrementAndGet();
                        }
                    });
                }
                p.flush();
            }
            System.out.println(start + " " + acked.get() / ((System.nanoTime() - start) / 1e9));
        }
    }
}
