package io.aeronspark.modern;

import java.util.ArrayList;
import java.util.List;

import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.RecordingDescriptorConsumer;

/** One recording descriptor as the client delivers it; the JSON keys are Aeron's parameter names. */
record Descriptor(
    long controlSessionId,
    long correlationId,
    long recordingId,
    long startTimestamp,
    long stopTimestamp,
    long startPosition,
    long stopPosition,
    int initialTermId,
    int segmentFileLength,
    int termBufferLength,
    int mtuLength,
    int sessionId,
    int streamId,
    String strippedChannel,
    String originalChannel,
    String sourceIdentity)
{
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

    /** The descriptor of one recording, or null when the catalog has no such recording. */
    static Descriptor find(final AeronArchive archive, final long recordingId)
    {
        final List<Descriptor> found = new ArrayList<>(1);
        archive.listRecording(recordingId, collector(found));
        return found.isEmpty() ? null : found.get(0);
    }

    static RecordingDescriptorConsumer collector(final List<Descriptor> into)
    {
        return (controlSessionId, correlationId, recordingId, startTimestamp, stopTimestamp, startPosition,
            stopPosition, initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId, streamId,
            strippedChannel, originalChannel, sourceIdentity) -> into.add(new Descriptor(
            controlSessionId, correlationId, recordingId, startTimestamp, stopTimestamp, startPosition,
            stopPosition, initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId, streamId,
            strippedChannel, originalChannel, sourceIdentity));
    }
}
