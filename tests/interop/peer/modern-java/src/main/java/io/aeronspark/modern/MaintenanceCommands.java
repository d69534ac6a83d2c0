package io.aeronspark.modern;

import io.aeron.ChannelUri;
import io.aeron.ExclusivePublication;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.codecs.SourceLocation;

/**
 * The catalog and segment operations of {@link AeronArchive}: {@code truncate}, {@code purge},
 * {@code extend}, {@code positions} and the segment subcommands. Each prints what the call returned.
 */
final class MaintenanceCommands
{
    private MaintenanceCommands()
    {
    }

    static int truncate(final Options options)
    {
        final long recordingId = options.requiredLong("recording-id");
        final long position = options.requiredLong("position");
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final long deletedSegments = connection.archive.truncateRecording(recordingId, position);
            final Descriptor descriptor = Descriptor.find(connection.archive, recordingId);
            Json.event("truncated")
                .put("recordingId", recordingId)
                .put("position", position)
                .put("deletedSegments", deletedSegments)
                .put("stopPosition", descriptor == null ? null : descriptor.stopPosition())
                .emit();
        }
        return ModernPeer.EXIT_OK;
    }

    static int purge(final Options options)
    {
        final long recordingId = options.requiredLong("recording-id");
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final long deletedSegments = connection.archive.purgeRecording(recordingId);
            Json.event("purged")
                .put("recordingId", recordingId)
                .put("deletedSegments", deletedSegments)
                .put("stillListed", Descriptor.find(connection.archive, recordingId) != null)
                .emit();
        }
        return ModernPeer.EXIT_OK;
    }

    /**
     * Extends a stopped recording: a new publication with the recording's initial term id, term
     * length, MTU and a start position at its stop position, recorded with ExtendRecordingRequest.
     */
    static int extend(final Options options)
    {
        final long recordingId = options.requiredLong("recording-id");
        final String channel = options.requiredString("channel");
        final int streamId = options.requiredInt("stream-id");
        final int messages = options.nonNegativeInt("messages");
        final int size = options.nonNegativeInt("size");
        final long firstIndex = options.longValue("first-index", 0);
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));
        final SourceLocation sourceLocation = ClientCommands.sourceLocation(options, channel);
        // --auto-stop: ExtendRecordingRequest2, the archive stops the recording when the image goes.
        final boolean autoStop = options.flag("auto-stop");

        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            final Descriptor before = Descriptor.find(archive, recordingId);
            if (before == null)
            {
                throw new IllegalArgumentException("recording " + recordingId + " is not in the archive's catalog");
            }
            if (before.stopPosition() == AeronArchive.NULL_POSITION)
            {
                throw new IllegalStateException("recording " + recordingId + " is still active; stop it before extending");
            }
            final String publicationChannel = withInitialPosition(channel, before);
            final ExclusivePublication publication = connection.aeron.addExclusivePublication(publicationChannel, streamId);
            try
            {
                ClientCommands.checkFragmentation(options, false, size, publication.maxPayloadLength());
                final String recordingChannel = ChannelUri.addSessionId(channel, publication.sessionId());
                final long subscriptionId = autoStop ?
                    archive.extendRecording(recordingId, recordingChannel, streamId, sourceLocation, true) :
                    archive.extendRecording(recordingId, recordingChannel, streamId, sourceLocation);
                while (!publication.isConnected())
                {
                    deadline.pause("the archive's extend subscription to connect to " + channel);
                }
                final String digest = ClientCommands.offerMessages(publication, firstIndex, messages, size, deadline);
                final long publicationPosition = publication.position();
                ClientCommands.awaitRecordingPosition(archive, recordingId, publicationPosition, deadline);
                if (autoStop)
                {
                    publication.close();  // the image goes: the archive stops the recording itself
                }
                else
                {
                    archive.stopRecording(recordingChannel, streamId);
                }
                final Descriptor after = ClientCommands.awaitStopped(archive, recordingId, deadline);
                Json.event("extended")
                    .put("recordingId", recordingId)
                    .put("subscriptionId", subscriptionId)
                    .put("sessionId", publication.sessionId())
                    .put("publicationChannel", publicationChannel)
                    .put("previousStopPosition", before.stopPosition())
                    .put("startPosition", after.startPosition())
                    .put("stopPosition", after.stopPosition())
                    .put("publicationPosition", publicationPosition)
                    .put("messages", messages)
                    .put("firstIndex", firstIndex)
                    .put("size", size)
                    .put("digest", digest)
                    .put("autoStop", autoStop)
                    .emit();
            }
            finally
            {
                publication.close();
            }
        }
        return ModernPeer.EXIT_OK;
    }

    /** The channel with {@code init-term-id}, {@code term-id}, {@code term-offset}, term length and MTU of the recording's end. */
    static String withInitialPosition(final String channel, final Descriptor descriptor)
    {
        final ChannelUri uri = ChannelUri.parse(channel);
        uri.initialPosition(descriptor.stopPosition(), descriptor.initialTermId(), descriptor.termBufferLength());
        uri.put("mtu", Integer.toString(descriptor.mtuLength()));
        return uri.toString();
    }

    static int positions(final Options options)
    {
        final long recordingId = options.requiredLong("recording-id");
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            final long recordingPosition = archive.getRecordingPosition(recordingId);
            Json.event("positions")
                .put("recordingId", recordingId)
                .put("startPosition", archive.getStartPosition(recordingId))
                .put("stopPosition", archive.getStopPosition(recordingId))
                .put("recordingPosition", recordingPosition)
                .put("maxRecordedPosition", archive.getMaxRecordedPosition(recordingId))
                // RecordingPositionRequest answers NULL_POSITION for a recording that is not active.
                .put("active", recordingPosition != AeronArchive.NULL_POSITION)
                .emit();
        }
        return ModernPeer.EXIT_OK;
    }

    /** {@code segments --op detach|delete-detached|purge|attach|migrate}: one AeronArchive segment call. */
    static int segments(final Options options)
    {
        final String op = options.requiredString("op");
        final long recordingId = options.requiredLong("recording-id");
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            final Json result = Json.event("segments").put("op", op).put("recordingId", recordingId);
            switch (op)
            {
                case "detach" ->
                {
                    final long position = options.requiredLong("new-start-position");
                    archive.detachSegments(recordingId, position);
                    result.put("newStartPosition", position);
                }
                case "delete-detached" -> result.put("count", archive.deleteDetachedSegments(recordingId));
                case "purge" ->
                {
                    final long position = options.requiredLong("new-start-position");
                    result.put("newStartPosition", position).put("count", archive.purgeSegments(recordingId, position));
                }
                case "attach" -> result.put("count", archive.attachSegments(recordingId));
                case "migrate" ->
                {
                    final long destination = options.requiredLong("dst-recording-id");
                    result.put("dstRecordingId", destination)
                        .put("count", archive.migrateSegments(recordingId, destination));
                }
                default -> throw new UsageException(
                    "segments: --op must be detach, delete-detached, purge, attach or migrate, got '" + op + "'");
            }
            result.put("startPosition", archive.getStartPosition(recordingId))
                .put("stopPosition", archive.getStopPosition(recordingId))
                .emit();
        }
        return ModernPeer.EXIT_OK;
    }
}
