package io.aeronspark.spark.source;

import org.apache.spark.sql.connector.read.InputPartition;

/** One recording's range: [start, end) in a micro-batch, [start, ...) following it live in real-time mode. */
public final class AeronInputPartition implements InputPartition {
    private static final long serialVersionUID = 1L;
    /** The end of a real-time partition: none, it follows the recording. */
    public static final long OPEN_END = -1;

    final RecordingInfo recording;
    final long start;
    final long end;
    final SourceOptions options;

    AeronInputPartition(final RecordingInfo recording, final long start, final long end, final SourceOptions options) {
        this.recording = recording;
        this.start = start;
        this.end = end;
        this.options = options;
    }

    /** A real-time partition that reads nothing and waits out the batch (no recording to follow yet). */
    static AeronInputPartition idle(final SourceOptions options) {
        return new AeronInputPartition(null, 0, OPEN_END, options);
    }

    boolean idle() {
        return recording == null;
    }

    boolean openEnded() {
        return end == OPEN_END;
    }

    @Override
    public String toString() {
        if (idle()) {
            return "no recording yet (idle)";
        }
        return "recording " + recording.recordingId + " [" + start + ", " + (openEnded() ? "live" : String.valueOf(end)) + ")";
    }
}
