package io.aeronspark.interop;

import java.util.ArrayList;
import java.util.List;

import io.aeron.archive.client.RecordingDescriptorConsumer;

/** One recording descriptor as the 1.15.1 client delivers it; JSON keys are Aeron's field names. */
final class Descriptor
{
    long controlSessionId;
    long correlationId;
    long recordingId;
    long startTimestamp;
    long stopTimestamp;
    long startPosition;
    long stopPosition;
    int initialTermId;
    int segmentFileLength;
    int termBufferLength;
    int mtuLength;
    int sessionId;
    int streamId;
    String strippedChannel;
    String originalChannel;
    String sourceIdentity;

    Json toJson(final String event)
    {
        return Json.event(event)
            .put("controlSessionId", controlSessionId)
            .put("correlationId", correlationId)
            .put("recordingId", recordingId)
            .put("startTimestamp", startTimestamp)
            .put("stopTimestamp", stopTimestamp)
            .put("startPosition", startPosition)
            .put("stopPosition", stopPosition)
            .put("initialTermId", initialTermId)
            .put("segmentFileLength", segmentFileLength)
            .put("termBufferLength", termBufferLength)
            .put("mtuLength", mtuLength)
            .put("sessionId", sessionId)
            .put("streamId", streamId)
            .put("strippedChannel", strippedChannel)
            .put("originalChannel", originalChannel)
            .put("sourceIdentity", sourceIdentity);
    }

    /** Collects every descriptor of one listing call. */
    static final class Collector implements RecordingDescriptorConsumer
    {
        final List<Descriptor> descriptors = new ArrayList<>();

        @Override
        public void onRecordingDescriptor(
            final long controlSessionId,
            final long correlationId,
            final long recordingId,
            final long startTimestamp,
            final long stopTimestamp,
            final long startPosition,
            final long stopPosition,
            final int initialTermId,
            final int segmentFileLength,
            final int termBufferLength,
            final int mtuLength,
            final int sessionId,
            final int streamId,
            final String strippedChannel,
            final String originalChannel,
            final String sourceIdentity)
        {
            final Descriptor d = new Descriptor();
            d.controlSessionId = controlSessionId;
            d.correlationId = correlationId;
            d.recordingId = recordingId;
            d.startTimestamp = startTimestamp;
            d.stopTimestamp = stopTimestamp;
            d.startPosition = startPosition;
            d.stopPosition = stopPosition;
            d.initialTermId = initialTermId;
            d.segmentFileLength = segmentFileLength;
            d.termBufferLength = termBufferLength;
            d.mtuLength = mtuLength;
            d.sessionId = sessionId;
            d.streamId = streamId;
            d.strippedChannel = strippedChannel;
            d.originalChannel = originalChannel;
            d.sourceIdentity = sourceIdentity;
            descriptors.add(d);
        }
    }
}
