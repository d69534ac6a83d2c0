package io.aeronspark.modern;

import io.aeron.ChannelUri;
import io.aeron.ExclusivePublication;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ArchiveException;

import java.util.ArrayList;
import java.util.List;

/**
 * {@code update-channel}: {@link AeronArchive#updateChannel(long, String)} (UpdateChannelRequest,
 * Aeron 1.49+). Prints one {@code "update-channel"} line: {@code ok}, or the error (exception class,
 * {@code ArchiveException.errorCode()}, message; a client timeout has no code), then every
 * descriptor the archive lists afterwards.
 *
 * <p>With {@code --active-channel} (and {@code --stream-id}, {@code --messages}, {@code --size}) the
 * recording updated is an active one: the command records a publication of its own on that channel,
 * updates the recording's channel while it is recorded ({@code --recording-id} is ignored), then
 * stops it; the line also has the descriptor {@code during} and {@code after} the stop.
 */
final class UpdateChannelCommand
{
    private UpdateChannelCommand()
    {
    }

    static int run(final Options options)
    {
        final String channel = options.requiredString("channel");
        final String activeChannel = options.string("active-channel", null);
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            if (activeChannel == null)
            {
                final long recordingId = options.requiredLong("recording-id");
                update(archive, recordingId, channel).put("recordings", listAll(archive)).emit();
            }
            else
            {
                updateActive(connection, options, activeChannel, channel);
            }
        }
        return ModernPeer.EXIT_OK;
    }

    private static void updateActive(
        final ArchiveConnection connection, final Options options, final String activeChannel, final String channel)
    {
        final AeronArchive archive = connection.archive;
        final int streamId = options.requiredInt("stream-id");
        final int messages = options.nonNegativeInt("messages");
        final int size = options.nonNegativeInt("size");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(activeChannel, streamId))
        {
            final String recordingChannel = ChannelUri.addSessionId(activeChannel, publication.sessionId());
            archive.startRecording(
                recordingChannel, streamId, ClientCommands.sourceLocation(options, activeChannel));
            while (!publication.isConnected())
            {
                deadline.pause("the archive's recording subscription to connect to " + activeChannel);
            }
            ClientCommands.offerMessages(publication, 0, messages, size, deadline);
            final long publicationPosition = publication.position();
            final ClientCommands.RecordingProgress progress = ClientCommands.RecordingProgress.find(
                connection, archive, publication.sessionId(), streamId, deadline);
            while (progress.position() < publicationPosition)
            {
                deadline.pause("the recording position to reach " + publicationPosition);
            }
            final Json result = update(archive, progress.recordingId, channel);
            final Descriptor during = Descriptor.find(archive, progress.recordingId);
            archive.stopRecording(recordingChannel, streamId);
            final Descriptor after = ClientCommands.awaitStopped(archive, progress.recordingId, deadline);
            result
                .put("publicationPosition", publicationPosition)
                .put("during", during == null ? null : during.toJson("descriptor"))
                .put("after", after.toJson("descriptor"))
                .emit();
        }
    }

    private static Json update(final AeronArchive archive, final long recordingId, final String channel)
    {
        final Json result = Json.event("update-channel").put("recordingId", recordingId).put("channel", channel);
        try
        {
            archive.updateChannel(recordingId, channel);
            return result.put("ok", true).put("error", null);
        }
        catch (final ArchiveException ex)
        {
            return result.put("ok", false).put("error", Json.object()
                .put("exception", ex.getClass().getName())
                .put("code", ex.errorCode())
                .put("codeName", ArchiveException.errorCodeAsString(ex.errorCode()))
                .put("message", String.valueOf(ex.getMessage())));
        }
        catch (final RuntimeException ex)
        {
            return result.put("ok", false).put("error", Json.object()
                .put("exception", ex.getClass().getName())
                .put("code", null)
                .put("codeName", null)
                .put("message", String.valueOf(ex.getMessage())));
        }
    }

    private static List<Json> listAll(final AeronArchive archive)
    {
        final List<Descriptor> found = new ArrayList<>();
        archive.listRecordings(0, Integer.MAX_VALUE, Descriptor.collector(found));
        final List<Json> descriptors = new ArrayList<>();
        for (final Descriptor descriptor : found)
        {
            descriptors.add(descriptor.toJson("descriptor"));
        }
        return descriptors;
    }
}
