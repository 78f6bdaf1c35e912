// Kafka's Java producer (kafka-clients, on the Kafka classpath: tests/kafka_jars.py) with its
// defaults -- idempotence on, acks=all, retries until delivery.timeout.ms -- sending numbered
// records, and printing each acknowledgement as one JSON line {"n", "p", "o"} the moment it
// arrives (the tests read them as they come, to act mid-stream). Run as a single-file source
// program:
//   java -cp <kafka classpath> CountingProducer.java BOOTSTRAP TOPIC PARTITIONS COUNT CODECS
//        [PACE_MS] [key=value producer settings...]
// CODECS is a comma-separated list of compression.type values: one producer per codec in turn,
// each sending COUNT records, numbered on across them. Record n goes to partition
// n % PARTITIONS with key "k<n>", value "v<n>-" repeated 1 + n % 7 times, headers ("n", n) and
// ("codec", its codec), and timestamp TS0 + n (TS0 below); PACE_MS
// spaces the sends so that a test can kill or move a leader while records are in flight. A
// failed record prints {"n", "error"}; the exit status is 0 even then (the test judges).
import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class CountingProducer {
    static final long TS0 = 1_700_000_000_000L;

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int count = Integer.parseInt(args[3]);
        String[] codecs = args[4].split(",");
        long paceMs = args.length > 5 ? Long.parseLong(args[5]) : 0;
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (int i = 6; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        int first = 0;
        for (String codec : codecs) {
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            send(props, topic, partitions, first, count, codec, paceMs);
            first += count;
        }
        System.out.println("{\"done\": true}");
    }

    static void send(Properties props, String topic, int partitions, int first, int count, String codec,
            long paceMs) throws InterruptedException {
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int n = first; n < first + count; n++) {
                final int num = n;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(
                        topic, n % partitions, TS0 + n, utf8("k" + n), utf8(("v" + n + "-").repeat(1 + n % 7)));
                rec.headers().add("n", utf8(Integer.toString(n)));
                rec.headers().add("codec", utf8(codec));
                producer.send(rec, (md, e) -> {
                    String line = e != null
                            ? "{\"n\": " + num + ", \"error\": " + quote(e.toString()) + "}"
                            : "{\"n\": " + num + ", \"p\": " + md.partition() + ", \"o\": " + md.offset() + "}";
                    synchronized (System.out) {
                        System.out.println(line);
                        System.out.flush();
                    }
                });
                if (paceMs > 0) {
                    Thread.sleep(paceMs);
                }
            }
            producer.flush();
        }
    }
}
