package labkit.participant;

import org.apache.kafka.clients.producer.KafkaProducer;

import java.util.ArrayList;
import java.util.List;

/** The producer role (labkit/crashlab/roles/producer.py) on Kafka's Java client: plain, idempotent or transactional. */
final class ProducerRole {
    private ProducerRole() {
    }

    static void run(Loop loop) throws Exception {
        String mode = loop.text("mode");
        boolean transactional = mode.equals("transactional");
        List<Object> extra = new ArrayList<>(List.of("enable.idempotence", !mode.equals("plain")));
        if (loop.text("max_in_flight") != null) { // max.in.flight.requests.per.connection, else the client's default
            extra.addAll(List.of("max.in.flight.requests.per.connection", loop.integer("max_in_flight")));
        }
        if (loop.flag("single_record_batches")) { // a record larger than batch.size gets a batch of its own
            extra.addAll(List.of("batch.size", 1));
        }
        if (transactional) {
            extra.addAll(List.of("transactional.id", loop.text("transactional_id")));
        }
        String topic = loop.text("topic");
        try (KafkaProducer<String, String> producer = loop.producer(extra.toArray())) {
            producer.partitionsFor(topic); // metadata first, so the loop measures sending only
            if (transactional) {
                loop.initTransactions(producer);
            }
            int n = loop.integer("first") - 1;
            int batch = loop.integer("batch");
            for (loop.iteration = 1; loop.iteration <= loop.integer("iterations"); loop.iteration++) {
                if (loop.stopping) {
                    break;
                }
                if (transactional) {
                    loop.begin(producer);
                }
                loop.step("before_produce");
                List<String> vids = new ArrayList<>();
                for (int i = 1; i <= batch; i++) {
                    vids.add(loop.name + "-" + (n + i));
                }
                loop.send(producer, topic, loop.integer("partition"), vids, loop.text("key"));
                n += batch;
                loop.flush(producer);
                loop.step("after_produce");
                if (transactional) {
                    loop.commit(producer);
                }
                Thread.sleep(loop.integer("interval_ms"));
            }
            loop.flush(producer);
        }
    }
}
