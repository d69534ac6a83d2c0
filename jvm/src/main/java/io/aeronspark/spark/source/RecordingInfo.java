package io.aeronspark.spark.source;

import java.io.Serializable;

import io.aeron.archive.client.AeronArchive;

/** The descriptor fields the source needs of one recording. */
public final class RecordingInfo implements Serializable {
    private static final long serialVersionUID = 1L;

    public final long recordingId;
    public final long startPosition;
    /** AeronArchive.NULL_POSITION while the recording is active. */
    public final long stopPosition;
    public final int termBufferLength;
    public final int sessionId;
    public final int streamId;
    public final String strippedChannel;
    public final String originalChannel;

    public RecordingInfo(final long recordingId, final long startPosition, final long stopPosition,
                         final int termBufferLength, final int sessionId, final int streamId,
                         final String strippedChannel, final String originalChannel) {
        this.recordingId = recordingId;
        this.startPosition = startPosition;
        this.stopPosition = stopPosition;
        this.termBufferLength = termBufferLength;
        this.sessionId = sessionId;
        this.streamId = streamId;
        this.strippedChannel = strippedChannel;
        this.originalChannel = originalChannel;
    }

    public boolean isActive() {
        return stopPosition == AeronArchive.NULL_POSITION;
    }
}
