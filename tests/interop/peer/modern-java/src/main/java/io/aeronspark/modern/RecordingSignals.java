package io.aeronspark.modern;

import java.util.ArrayList;
import java.util.List;

import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.RecordingSignalConsumer;
import io.aeron.archive.codecs.RecordingSignal;

/**
 * Collects the RecordingSignalEvents the archive sends on the control session ({@code --signals}):
 * the client hands them over while it waits for responses or in {@code pollForRecordingSignals}.
 */
final class RecordingSignals implements RecordingSignalConsumer
{
    static final RecordingSignals INSTANCE = new RecordingSignals();

    private record Seen(
        long controlSessionId, long correlationId, long recordingId, long subscriptionId, long position,
        RecordingSignal signal)
    {
    }

    private final List<Seen> seen = new ArrayList<>();

    private RecordingSignals()
    {
    }

    @Override
    public void onSignal(
        final long controlSessionId,
        final long correlationId,
        final long recordingId,
        final long subscriptionId,
        final long position,
        final RecordingSignal signal)
    {
        seen.add(new Seen(controlSessionId, correlationId, recordingId, subscriptionId, position, signal));
    }

    /** Polls the control session until {@code signal} arrived for the recording. */
    void awaitSignal(
        final AeronArchive archive, final long recordingId, final RecordingSignal signal, final Deadline deadline)
    {
        while (seen.stream().noneMatch(s -> s.recordingId() == recordingId && s.signal() == signal))
        {
            if (archive.pollForRecordingSignals() == 0)
            {
                deadline.pause("recording signal " + signal + " for recording " + recordingId);
            }
        }
    }

    /** One "signal" line per signal, in arrival order. */
    void emit()
    {
        for (final Seen s : seen)
        {
            Json.event("signal")
                .put("controlSessionId", s.controlSessionId())
                .put("correlationId", s.correlationId())
                .put("recordingId", s.recordingId())
                .put("subscriptionId", s.subscriptionId())
                .put("position", s.position())
                .put("signal", s.signal().name())
                .emit();
        }
    }
}
