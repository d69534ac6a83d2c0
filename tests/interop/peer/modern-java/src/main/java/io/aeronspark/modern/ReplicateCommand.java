package io.aeronspark.modern;

import java.util.ArrayList;
import java.util.List;

import io.aeron.Aeron;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.RecordingSignalConsumer;
import io.aeron.archive.client.ReplicationParams;
import io.aeron.archive.codecs.RecordingSignal;

/**
 * {@code replicate}: asks the DESTINATION archive (the one this client is connected to) to
 * replicate recording {@code --src-recording-id} from the source archive at
 * {@code --src-control-channel}/{@code --src-control-stream-id}, with
 * {@link AeronArchive#replicate(long, int, String, ReplicationParams)}.
 *
 * <p>Every recording signal the destination sends on this control session is printed at once as a
 * {@code signal} line (so a caller can act on EXTEND, e.g. publish more to a live source), then one
 * {@code replicated} line: replicationId, dstRecordingId, the signals seen in order, and the
 * position of the signal that ended the wait. {@code --await replicate-end} (default) waits for
 * REPLICATE_END; {@code --await sync} for SYNC (the replica caught up with the source).
 */
final class ReplicateCommand
{
    private ReplicateCommand()
    {
    }

    static int run(final Options options)
    {
        final long srcRecordingId = options.requiredLong("src-recording-id");
        final String srcControlChannel = options.requiredString("src-control-channel");
        final int srcControlStreamId = options.intValue(
            "src-control-stream-id", AeronArchive.Configuration.CONTROL_STREAM_ID_DEFAULT);
        final String await = options.string("await", "replicate-end");
        final RecordingSignal awaited = switch (await)
        {
            case "replicate-end" -> RecordingSignal.REPLICATE_END;
            case "sync" -> RecordingSignal.SYNC;
            default -> throw new UsageException("replicate: --await must be replicate-end or sync, got " + await);
        };
        final ReplicationParams params = new ReplicationParams()
            .dstRecordingId(options.longValue("dst-recording-id", Aeron.NULL_VALUE))
            .stopPosition(options.longValue("stop-position", AeronArchive.NULL_POSITION));
        if (options.has("replication-channel"))
        {
            params.replicationChannel(options.requiredString("replication-channel"));
        }
        if (options.has("src-response-channel"))
        {
            params.srcResponseChannel(options.requiredString("src-response-channel"));
        }
        if (options.has("replication-session-id"))
        {
            params.replicationSessionId(options.requiredInt("replication-session-id"));
        }
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        final Printed printed = new Printed();
        try (ArchiveConnection connection = ArchiveConnection.open(options, false);
            AeronArchive archive = AeronArchive.connect(
                ArchiveConnection.archiveContext(options, connection.aeron).recordingSignalConsumer(printed)))
        {
            final long startNs = System.nanoTime();
            final long replicationId = archive.replicate(srcRecordingId, srcControlStreamId, srcControlChannel, params);
            Json.event("replication-started").put("replicationId", replicationId).emit();
            while (printed.find(awaited) == null)
            {
                if (archive.pollForRecordingSignals() == 0)
                {
                    deadline.pause("recording signal " + awaited + " of replication " + replicationId +
                        " (seen " + printed.names + ")");
                }
            }
            final Printed.Seen end = printed.find(awaited);
            Json.event("replicated")
                .put("replicationId", replicationId)
                .put("srcRecordingId", srcRecordingId)
                .put("dstRecordingId", printed.dstRecordingId)
                .put("signals", printed.names)
                .put("awaited", awaited.name())
                .put("awaitedPosition", end.position)
                .put("replicateMs", (System.nanoTime() - startNs) / 1_000_000.0)
                .emit();
        }
        return ModernPeer.EXIT_OK;
    }

    /** Prints each signal as it arrives and remembers it. */
    private static final class Printed implements RecordingSignalConsumer
    {
        private record Seen(RecordingSignal signal, long recordingId, long position)
        {
        }

        final List<Seen> seen = new ArrayList<>();
        final List<String> names = new ArrayList<>();
        long dstRecordingId = Aeron.NULL_VALUE;

        @Override
        public void onSignal(
            final long controlSessionId,
            final long correlationId,
            final long recordingId,
            final long subscriptionId,
            final long position,
            final RecordingSignal signal)
        {
            seen.add(new Seen(signal, recordingId, position));
            names.add(signal.name());
            if (signal == RecordingSignal.REPLICATE)
            {
                dstRecordingId = recordingId;
            }
            Json.event("signal")
                .put("correlationId", correlationId)
                .put("recordingId", recordingId)
                .put("subscriptionId", subscriptionId)
                .put("position", position)
                .put("signal", signal.name())
                .emit();
        }

        Seen find(final RecordingSignal signal)
        {
            for (final Seen s : seen)
            {
                if (s.signal() == signal)
                {
                    return s;
                }
            }
            return null;
        }
    }
}
