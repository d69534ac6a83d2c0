package io.aeronspark.spark.sink;

import io.aeronspark.spark.BoundaryTimings;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The streaming write of format("aeron-archive-jvm"), for micro-batches and real-time batches
 * alike: tasks publish as rows arrive; the driver's commit only reports (each task's commit
 * already waited for the archive to record its rows), so no commit coordinator is needed.
 */
final class AeronStreamingWrite implements StreamingWrite {
    private static final Logger LOG = LoggerFactory.getLogger(AeronStreamingWrite.class);

    private final SinkOptions options;

    AeronStreamingWrite(final SinkOptions options) {
        this.options = options;
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(final PhysicalWriteInfo info) {
        return new WriterFactory(options);
    }

    @Override
    public boolean useCommitCoordinator() {
        return false;
    }

    @Override
    public void commit(final long epochId, final WriterCommitMessage[] messages) {
        BoundaryTimings.note("sink.driverCommit", "epoch " + epochId);
        if (LOG.isInfoEnabled()) {
            long rows = 0;
            for (WriterCommitMessage message : messages) {
                rows += message instanceof AeronCommitMessage ? ((AeronCommitMessage) message).messages : 0;
            }
            LOG.info("batch {} committed: {} rows published on {} and recorded", epochId, rows, options.describeStream());
        }
    }

    @Override
    public void abort(final long epochId, final WriterCommitMessage[] messages) {
        LOG.warn("batch {} aborted: rows its tasks published on {} stay in the recording and are written again when "
            + "the batch reruns (at-least-once; see docs/exactly-once.md)", epochId, options.describeStream());
    }

    private static final class WriterFactory implements StreamingDataWriterFactory {
        private static final long serialVersionUID = 1L;

        private final SinkOptions options;

        WriterFactory(final SinkOptions options) {
            this.options = options;
        }

        @Override
        public DataWriter<InternalRow> createWriter(final int partitionId, final long taskId, final long epochId) {
            BoundaryTimings.note("sink.createWriter", "partition " + partitionId + " epoch " + epochId);
            return new AeronDataWriter(options, partitionId, epochId);
        }
    }
}
