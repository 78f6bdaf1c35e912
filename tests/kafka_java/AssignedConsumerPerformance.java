// ConsumerPerformance with assigned partitions: Kafka's own consumer (kafka-clients), with the
// settings org.apache.kafka.tools.ConsumerPerformance gives it, reading every partition of a
// topic from the beginning until it has N records. ConsumerPerformance itself subscribes
// through a consumer group, and our brokers have no group coordinator yet (the issue after
// 18), so bench/kafka_protocol.py runs this one against both brokers: same client, same
// settings. Prints ConsumerPerformance's summary (its header and one CSV line; rebalance time
// 0, the clock started after the assignment), so one parser reads both. Run as a single-file source program on the Kafka classpath:
//   java -cp <kafka libs> AssignedConsumerPerformance.java BOOTSTRAP TOPIC RECORDS TIMEOUT_MS
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class AssignedConsumerPerformance {
    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        long want = Long.parseLong(args[2]);
        long timeoutMs = Long.parseLong(args[3]);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // ConsumerPerformance's defaults (--socket-buffer-size, --fetch-size), no group.
        props.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, "2097152");
        props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1048576");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.CHECK_CRCS_CONFIG, "false");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long records = 0;
        long bytes = 0;
        long start;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs))) {
                tps.add(new TopicPartition(topic, p.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            // From here on, as ConsumerPerformance's fetch.time.ms (its clock without the join).
            start = System.currentTimeMillis();
            long deadline = start + timeoutMs;
            while (records < want && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : polled) {
                    records++;
                    if (r.key() != null) bytes += r.key().length;
                    if (r.value() != null) bytes += r.value().length;
                }
            }
        }
        long end = System.currentTimeMillis();
        double secs = (end - start) / 1000.0;
        double mb = bytes / (1024.0 * 1024.0);
        System.out.println("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec");
        System.out.printf("%d, %d, %.4f, %.4f, %d, %.4f, 0, %d, %.4f, %.4f%n",
            start, end, mb, mb / secs, records, records / secs, end - start, mb / secs, records / secs);
        if (records < want) {
            System.err.println("consumed " + records + " of " + want + " records in " + timeoutMs + " ms");
            System.exit(1);
        }
    }
}
