package io.aeronspark.spark.sink;

import org.apache.spark.sql.connector.write.WriterCommitMessage;

/** What a task published and had recorded, reported to the driver's commit (logged there). */
final class AeronCommitMessage implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;

    final int partitionId;
    final long epochId;
    final int sessionId;
    final long messages;
    final long bytes;
    final long lastPosition;
    final long backPressureNs;

    AeronCommitMessage(final int partitionId, final long epochId, final int sessionId, final long messages,
                       final long bytes, final long lastPosition, final long backPressureNs) {
        this.partitionId = partitionId;
        this.epochId = epochId;
        this.sessionId = sessionId;
        this.messages = messages;
        this.bytes = bytes;
        this.lastPosition = lastPosition;
        this.backPressureNs = backPressureNs;
    }

    @Override
    public String toString() {
        return "partition " + partitionId + ": " + messages + " rows (" + bytes + " bytes) in session " + sessionId
            + " up to position " + lastPosition + (backPressureNs > 0 ? ", " + backPressureNs / 1_000_000 + " ms back pressured" : "");
    }
}
