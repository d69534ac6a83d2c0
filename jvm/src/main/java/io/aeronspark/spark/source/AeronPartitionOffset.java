package io.aeronspark.spark.source;

import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/** Where a real-time partition (one recording) got to: the position after its last row. */
public final class AeronPartitionOffset implements PartitionOffset {
    private static final long serialVersionUID = 1L;

    public final long recordingId;
    public final long position;

    public AeronPartitionOffset(final long recordingId, final long position) {
        this.recordingId = recordingId;
        this.position = position;
    }

    @Override
    public String toString() {
        return "recording " + recordingId + " at " + position;
    }
}
