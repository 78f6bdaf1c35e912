// Kafka's Java producer (kafka-clients, on the Kafka classpath: tests/kafka_jars.py) sending at a
// fixed rate and recording every record's latency, for benchmarks that ask what a move does to
// the producers beside it (issue 22: producer p99 and max while a reassignment runs).
//   java -cp <kafka classpath> RateProducer.java BOOTSTRAP TOPIC RATE RECORD_BYTES OUT_PATH
//        [key=value producer settings...]
// Open loop: record i is due at start + i / RATE seconds and its latency is counted from that
// due time, not from when send() returned, so a producer held up by a slow broker (a full
// buffer, a blocked send) is charged for the wait instead of silently sending less (the
// "coordinated omission" a closed loop hides). Runs until standard input ends or gets a line.
// OUT_PATH gets one line per record in the order acknowledgements arrive:
//   "<due time, epoch microseconds> <latency microseconds>"          acknowledged
//   "E <due time, epoch microseconds> <error>"                        failed
// Standard output gets {"ready": true} at the first acknowledgement and, at the end,
// {"done": true, "sent": S, "acked": A, "errors": E}.
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class RateProducer {
    static volatile boolean stop = false;

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        double rate = Double.parseDouble(args[2]);
        int recordBytes = Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                in.readLine();
            } catch (IOException e) {
                // standard input gone: stop as at its end
            }
            stop = true;
        });
        watcher.setDaemon(true);
        watcher.start();

        byte[] value = new byte[recordBytes];
        for (int i = 0; i < value.length; i++) {
            value[i] = (byte) ('a' + i % 26);
        }
        AtomicBoolean ready = new AtomicBoolean(false);
        AtomicLong acked = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        long sent = 0;
        long intervalNs = (long) (1e9 / rate);
        try (BufferedWriter out = new BufferedWriter(new FileWriter(args[4]), 1 << 16);
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            long startNs = System.nanoTime();
            long startEpochUs = System.currentTimeMillis() * 1000;
            while (!stop) {
                long dueNs = startNs + sent * intervalNs;
                long wait = dueNs - System.nanoTime();
                if (wait > 0) {
                    LockSupport.parkNanos(wait);
                    continue;
                }
                long dueEpochUs = startEpochUs + (dueNs - startNs) / 1000;
                producer.send(new ProducerRecord<>(topic, value), (md, e) -> {
                    long latencyUs = (System.nanoTime() - dueNs) / 1000;
                    String line = e != null
                            ? "E " + dueEpochUs + " " + e.toString().replace('\n', ' ') + "\n"
                            : dueEpochUs + " " + latencyUs + "\n";
                    synchronized (out) {
                        try {
                            out.write(line);
                        } catch (IOException io) {
                            throw new UncheckedIOException(io);
                        }
                    }
                    if (e != null) {
                        errors.incrementAndGet();
                    } else if (acked.incrementAndGet() == 1 && ready.compareAndSet(false, true)) {
                        synchronized (System.out) {
                            System.out.println("{\"ready\": true}");
                            System.out.flush();
                        }
                    }
                });
                sent++;
            }
            producer.flush();
        }
        System.out.println("{\"done\": true, \"sent\": " + sent + ", \"acked\": " + acked.get()
                + ", \"errors\": " + errors.get() + "}");
    }
}
