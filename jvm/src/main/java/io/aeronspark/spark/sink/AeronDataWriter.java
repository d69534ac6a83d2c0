package io.aeronspark.spark.sink;

import io.aeronspark.spark.BoundaryTimings;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * One task's writer: each row's value is offered on the JVM's shared publication as it arrives
 * (in real-time mode rows reach Aeron while the batch is still running). commit() returns once
 * the archive recorded everything this writer offered, so a committed batch is in the recording;
 * abort() cannot take back what was published (at-least-once, docs/exactly-once.md).
 */
final class AeronDataWriter implements DataWriter<InternalRow> {
    private final SinkOptions options;
    private final int partitionId;
    private final long epochId;
    private final RowPublisher publisher;

    AeronDataWriter(final SinkOptions options, final int partitionId, final long epochId) {
        this.options = options;
        this.partitionId = partitionId;
        this.epochId = epochId;
        this.publisher = new RowPublisher(options, SinkPublications.publication(options));
    }

    @Override
    public void write(final InternalRow row) {
        if (row.isNullAt(options.valueOrdinal)) {
            throw new IllegalArgumentException("format(\"aeron-archive-jvm\") sink: a row of partition " + partitionId
                + " has a null " + SinkOptions.VALUE_COLUMN + "; the sink publishes each value's bytes and has no null "
                + "message (filter the nulls out, or use coalesce(value, ''))");
        }
        if (publisher.messages() == 0) {
            BoundaryTimings.note("sink.firstRow", "partition " + partitionId + " epoch " + epochId);
        }
        final byte[] value = options.valueIsString
            ? row.getUTF8String(options.valueOrdinal).getBytes()
            : row.getBinary(options.valueOrdinal);
        publisher.publish(value);
    }

    @Override
    public WriterCommitMessage commit() {
        BoundaryTimings.note("sink.commit.start", "partition " + partitionId + " epoch " + epochId + " rows "
            + publisher.messages());
        if (publisher.messages() > 0) {
            RecordedPosition.await(options, publisher.publication(), publisher.lastPosition());
        }
        BoundaryTimings.note("sink.commit.end", "partition " + partitionId + " epoch " + epochId + " back_pressured_ms "
            + publisher.backPressureNs() / 1_000_000 + " position " + publisher.lastPosition());
        return new AeronCommitMessage(partitionId, epochId, publisher.publication().sessionId(), publisher.messages(),
            publisher.bytes(), publisher.lastPosition(), publisher.backPressureNs());
    }

    @Override
    public void abort() {
        // Nothing to undo: what was offered is published (and recorded); the batch runs again.
    }

    @Override
    public void close() {
        // The publication is shared by the JVM's writers and outlives the task.
    }
}
