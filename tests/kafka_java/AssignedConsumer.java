// Kafka's Java consumer (kafka-clients) with assigned partitions -- no group, no committed
// offsets -- reading every partition of a topic from its beginning to the end offset it has
// when the program starts, and printing each record as one JSON line
// {"p", "o", "key", "value", "ts", "headers": [[name, value], ...]} (keys, values and header
// values as UTF-8 text: the tests' records are ASCII). Run as a single-file source program:
//   java -cp <kafka classpath> AssignedConsumer.java BOOTSTRAP TOPIC PARTITIONS [TIMEOUT_MS]
// Exits 1 with a message if the end offsets are not reached within TIMEOUT_MS (default 60 s).
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class AssignedConsumer {
    static String quote(byte[] b) {
        if (b == null) {
            return "null";
        }
        String s = new String(b, StandardCharsets.UTF_8);
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    public static void main(String[] args) {
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        long timeoutMs = args.length > 3 ? Long.parseLong(args[3]) : 60_000;
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (consumer.position(tp) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("end offsets " + end + " not reached in " + timeoutMs + " ms");
                    System.exit(1);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    StringBuilder h = new StringBuilder("[");
                    for (Header x : r.headers()) {
                        if (h.length() > 1) {
                            h.append(", ");
                        }
                        h.append("[").append(quote(x.key().getBytes(StandardCharsets.UTF_8)))
                                .append(", ").append(quote(x.value())).append("]");
                    }
                    h.append("]");
                    System.out.println("{\"p\": " + r.partition() + ", \"o\": " + r.offset()
                            + ", \"key\": " + quote(r.key()) + ", \"value\": " + quote(r.value())
                            + ", \"ts\": " + r.timestamp() + ", \"headers\": " + h + "}");
                }
            }
        }
        System.out.flush();
    }
}
