// Reads a replica's partition.metadata with Apache Kafka's own reader (PartitionMetadataFile,
// the class a Kafka broker uses at load) and prints "version <n> topic_id <id>". Run as a
// single-file source program on the Kafka classpath (tests/kafka_jars.py, read_partition_metadata):
// Kafka 4.3's DumpLogSegments does not read this file, so this is the real check of its format.
import java.io.File;

import org.apache.kafka.storage.internals.checkpoint.PartitionMetadata;
import org.apache.kafka.storage.internals.checkpoint.PartitionMetadataFile;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

public class ReadPartitionMetadata {
    public static void main(String[] args) {
        File file = PartitionMetadataFile.newFile(new File(args[0]));
        PartitionMetadata read = new PartitionMetadataFile(file, new LogDirFailureChannel(1)).read();
        System.out.println("version " + read.version() + " topic_id " + read.topicId());
    }
}
