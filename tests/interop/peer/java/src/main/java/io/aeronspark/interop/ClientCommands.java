package io.aeronspark.interop;

import java.security.MessageDigest;

import io.aeron.ChannelUri;
import io.aeron.ExclusivePublication;
import io.aeron.FragmentAssembler;
import io.aeron.Image;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.codecs.SourceLocation;
import io.aeron.archive.status.RecordingPos;
import io.aeron.driver.status.SenderPos;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;

/**
 * The client subcommands ({@code record}, {@code list}, {@code replay}, {@code publish}), all using
 * the real 1.15.1 {@link AeronArchive} client (or a plain 1.15.1 publication for {@code publish}).
 */
final class ClientCommands
{
    private static final int LIST_ALL = 1_000_000;

    private ClientCommands()
    {
    }

    static int record(final Options options)
    {
        final String channel = options.requiredString("channel");
        final int streamId = options.requiredInt("stream-id");
        final int messages = nonNegative(options, "messages", options.requiredInt("messages"));
        final int size = nonNegative(options, "size", options.requiredInt("size"));
        final long firstIndex = options.longValue("first-index", 0);
        final boolean fragmented = options.flag("fragmented");
        final SourceLocation sourceLocation = sourceLocation(options, channel);
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        try (ArchiveConnection connection = ArchiveConnection.open(options, true);
            ExclusivePublication publication = connection.aeron.addExclusivePublication(channel, streamId))
        {
            final AeronArchive archive = connection.archive;
            checkFragmentation(fragmented, size, publication.maxPayloadLength());
            final String recordingChannel = ChannelUri.addSessionId(channel, publication.sessionId());
            final long subscriptionId = archive.startRecording(recordingChannel, streamId, sourceLocation);

            while (!publication.isConnected())
            {
                deadline.pause("the archive's recording subscription to connect to " + channel);
            }
            final long startNs = System.nanoTime();
            final String digest = offerMessages(publication, firstIndex, messages, size, deadline);
            final long publishedNs = System.nanoTime() - startNs;
            final long publicationPosition = publication.position();

            final RecordingProgress progress = RecordingProgress.find(connection, publication.sessionId(), streamId, deadline);
            while (progress.position() < publicationPosition)
            {
                deadline.pause("recording position to reach " + publicationPosition);
            }
            final long recordedNs = System.nanoTime() - startNs;

            archive.stopRecording(recordingChannel, streamId);
            final Descriptor descriptor = awaitStopped(archive, progress.recordingId, deadline);

            Json.event("recorded")
                .put("recordingId", progress.recordingId)
                .put("subscriptionId", subscriptionId)
                .put("sessionId", publication.sessionId())
                .put("streamId", streamId)
                .put("channel", channel)
                .put("recordingChannel", recordingChannel)
                .put("sourceLocation", sourceLocation.name())
                .put("startPosition", descriptor.startPosition)
                .put("stopPosition", descriptor.stopPosition)
                .put("publicationPosition", publicationPosition)
                .put("messages", messages)
                .put("firstIndex", firstIndex)
                .put("size", size)
                .put("fragmented", size > publication.maxPayloadLength())
                .put("maxPayloadLength", publication.maxPayloadLength())
                .put("termBufferLength", publication.termBufferLength())
                .put("initialTermId", publication.initialTermId())
                .put("digest", digest)
                .put("progressVia", progress.via())
                .put("publishMs", publishedNs / 1_000_000.0)
                .put("recordedMs", recordedNs / 1_000_000.0)
                .emit();
        }
        return InteropPeer.EXIT_OK;
    }

    /** Starts a recording and returns at once: for streams another process publishes. */
    static int startRecording(final Options options)
    {
        final String channel = options.requiredString("channel");
        final int streamId = options.requiredInt("stream-id");
        final SourceLocation sourceLocation = sourceLocation(options, channel);
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final long subscriptionId = connection.archive.startRecording(channel, streamId, sourceLocation);
            Json.event("recording-started")
                .put("subscriptionId", subscriptionId)
                .put("channel", channel)
                .put("streamId", streamId)
                .put("sourceLocation", sourceLocation.name())
                .emit();
        }
        return InteropPeer.EXIT_OK;
    }

    /**
     * Stops a recording by channel and stream. With {@code --recording-id} and {@code --await-position}
     * it first waits until that recording reached the position (RecordingPositionRequest, so it also
     * works for an archive behind another driver), then until the catalog shows its stop position.
     */
    static int stopRecording(final Options options)
    {
        final String channel = options.requiredString("channel");
        final int streamId = options.requiredInt("stream-id");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            final boolean awaitRecording = options.has("recording-id");
            final long recordingId = options.longValue("recording-id", -1);
            if (options.has("await-position"))
            {
                final long target = options.requiredLong("await-position");
                if (!awaitRecording)
                {
                    throw new UsageException("stop-recording: --await-position needs --recording-id");
                }
                while (archive.getRecordingPosition(recordingId) < target)
                {
                    // Not active any more (e.g. the publisher went away): the catalog has the answer.
                    final Descriptor descriptor = describe(archive, recordingId);
                    if (descriptor != null && descriptor.stopPosition != AeronArchive.NULL_POSITION)
                    {
                        if (descriptor.stopPosition < target)
                        {
                            throw new IllegalStateException("recording " + recordingId + " stopped at " +
                                descriptor.stopPosition + " before reaching " + target);
                        }
                        break;
                    }
                    deadline.pause("recording " + recordingId + " to reach position " + target);
                }
            }
            archive.stopRecording(channel, streamId);
            final Json stopped = Json.event("recording-stopped").put("channel", channel).put("streamId", streamId);
            if (awaitRecording)
            {
                final Descriptor descriptor = awaitStopped(archive, recordingId, deadline);
                stopped.put("recordingId", recordingId)
                    .put("startPosition", descriptor.startPosition)
                    .put("stopPosition", descriptor.stopPosition);
            }
            stopped.emit();
        }
        return InteropPeer.EXIT_OK;
    }

    static int list(final Options options)
    {
        final long fromRecordingId = options.longValue("from-recording-id", 0);
        final int count = options.intValue("count", LIST_ALL);
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final Descriptor.Collector collector = new Descriptor.Collector();
            if (options.has("recording-id"))
            {
                connection.archive.listRecording(options.requiredLong("recording-id"), collector);
            }
            else
            {
                connection.archive.listRecordings(fromRecordingId, count, collector);
            }
            for (final Descriptor descriptor : collector.descriptors)
            {
                descriptor.toJson("descriptor").emit();
            }
            Json.event("listed").put("count", collector.descriptors.size()).emit();
        }
        return InteropPeer.EXIT_OK;
    }

    static int replay(final Options options)
    {
        final long recordingId = options.requiredLong("recording-id");
        final String replayChannel = options.requiredString("replay-channel");
        final int replayStreamId = options.requiredInt("replay-stream-id");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final Descriptor descriptor = describe(connection.archive, recordingId);
            if (descriptor == null)
            {
                throw new IllegalArgumentException("recording " + recordingId + " is not in the archive's catalog");
            }
            final long position = options.longValue("position", descriptor.startPosition);
            final long length;
            if (options.has("length"))
            {
                length = options.requiredLong("length");
            }
            else if (descriptor.stopPosition != AeronArchive.NULL_POSITION)
            {
                length = descriptor.stopPosition - position;
            }
            else
            {
                throw new UsageException("replay: recording " + recordingId + " is still active; give --length");
            }
            final long endPosition = position + length;

            final MessageDigest digest = Payloads.newDigest();
            final long[] stats = {0, -1, -1, 0}; // messages, first index, last index, payload bytes
            final FragmentAssembler assembler = new FragmentAssembler((buffer, offset, fragmentLength, header) ->
            {
                final byte[] bytes = new byte[fragmentLength];
                buffer.getBytes(offset, bytes);
                digest.update(bytes);
                final long index = Payloads.indexOf(buffer, offset, fragmentLength);
                if (stats[0] == 0)
                {
                    stats[1] = index;
                }
                stats[2] = index;
                stats[0]++;
                stats[3] += fragmentLength;
            });

            final long startNs = System.nanoTime();
            try (Subscription subscription = connection.archive.replay(
                recordingId, position, length, replayChannel, replayStreamId))
            {
                while (subscription.imageCount() == 0)
                {
                    deadline.pause("the replay image on " + replayChannel + " stream " + replayStreamId);
                }
                final Image image = subscription.imageAtIndex(0);
                final long joinPosition = image.joinPosition();
                while (image.position() < endPosition)
                {
                    if (image.poll(assembler, 256) == 0)
                    {
                        if (image.isClosed())
                        {
                            throw new IllegalStateException("replay image closed at position " + image.position() +
                                " before reaching " + endPosition + " after " + stats[0] + " messages");
                        }
                        deadline.pause("replay to reach position " + endPosition + " (at " + image.position() + ")");
                    }
                }
                Json.event("replayed")
                    .put("recordingId", recordingId)
                    .put("replaySessionId", image.sessionId())
                    .put("position", position)
                    .put("length", length)
                    .put("joinPosition", joinPosition)
                    .put("firstPosition", joinPosition)
                    .put("lastPosition", image.position())
                    .put("messages", stats[0])
                    .put("payloadBytes", stats[3])
                    .put("firstIndex", stats[1])
                    .put("lastIndex", stats[2])
                    .put("digest", Payloads.hex(digest.digest()))
                    .put("replayMs", (System.nanoTime() - startNs) / 1_000_000.0)
                    .emit();
            }
        }
        return InteropPeer.EXIT_OK;
    }

    static int publish(final Options options)
    {
        final String channel = options.requiredString("channel");
        final int streamId = options.requiredInt("stream-id");
        final int messages = nonNegative(options, "messages", options.requiredInt("messages"));
        final int size = nonNegative(options, "size", options.requiredInt("size"));
        final long firstIndex = options.longValue("first-index", 0);
        final long lingerMs = options.longValue("linger-ms", options.flag("embedded-driver") ? 500 : 0);
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        try (ArchiveConnection connection = ArchiveConnection.open(options, false);
            ExclusivePublication publication = connection.aeron.addExclusivePublication(channel, streamId))
        {
            checkFragmentation(options.flag("fragmented"), size, publication.maxPayloadLength());
            while (!publication.isConnected())
            {
                deadline.pause("a subscriber to connect to " + channel + " stream " + streamId);
            }
            final long startNs = System.nanoTime();
            final String digest = offerMessages(publication, firstIndex, messages, size, deadline);
            final long position = publication.position();
            awaitSent(connection.aeron.countersReader(), publication, position, deadline);
            Json.event("published")
                .put("sessionId", publication.sessionId())
                .put("streamId", streamId)
                .put("channel", channel)
                .put("initialTermId", publication.initialTermId())
                .put("termBufferLength", publication.termBufferLength())
                .put("messages", messages)
                .put("firstIndex", firstIndex)
                .put("size", size)
                .put("position", position)
                .put("digest", digest)
                .put("publishMs", (System.nanoTime() - startNs) / 1_000_000.0)
                .emit();
            sleep(lingerMs);
        }
        return InteropPeer.EXIT_OK;
    }

    /** Offers messages {@code firstIndex ..} in order, retrying on back pressure; returns the SHA-256 hex. */
    static String offerMessages(
        final Publication publication, final long firstIndex, final int messages, final int size, final Deadline deadline)
    {
        final MessageDigest digest = Payloads.newDigest();
        final byte[] payload = new byte[size];
        final UnsafeBuffer buffer = new UnsafeBuffer(payload);
        for (long i = firstIndex; i < firstIndex + messages; i++)
        {
            Payloads.fill(buffer, 0, i, size);
            digest.update(payload);
            while (true)
            {
                final long result = publication.offer(buffer, 0, size);
                if (result > 0)
                {
                    break;
                }
                if (result == Publication.CLOSED || result == Publication.MAX_POSITION_EXCEEDED)
                {
                    throw new IllegalStateException("offer of message " + i + " failed: " + offerResult(result));
                }
                deadline.check("offer of message " + i + " (last result " + offerResult(result) + ")");
                Thread.yield();
            }
        }
        return Payloads.hex(digest.digest());
    }

    /** For network publications, waits until the driver's sender has sent everything offered. */
    private static void awaitSent(
        final CountersReader counters, final Publication publication, final long position, final Deadline deadline)
    {
        final int[] senderPositionId = {CountersReader.NULL_COUNTER_ID};
        counters.forEach((counterId, typeId, keyBuffer, label) ->
        {
            if (typeId == SenderPos.SENDER_POSITION_TYPE_ID && keyBuffer.getLong(0) == publication.registrationId())
            {
                senderPositionId[0] = counterId;
            }
        });
        if (senderPositionId[0] == CountersReader.NULL_COUNTER_ID)
        {
            return; // IPC: nothing to send
        }
        while (counters.getCounterValue(senderPositionId[0]) < position)
        {
            deadline.pause("the sender to send up to position " + position);
        }
    }

    private static Descriptor awaitStopped(final AeronArchive archive, final long recordingId, final Deadline deadline)
    {
        while (true)
        {
            final Descriptor descriptor = describe(archive, recordingId);
            if (descriptor != null && descriptor.stopPosition != AeronArchive.NULL_POSITION)
            {
                return descriptor;
            }
            deadline.pause("recording " + recordingId + " to show a stop position in the catalog");
        }
    }

    static Descriptor describe(final AeronArchive archive, final long recordingId)
    {
        final Descriptor.Collector collector = new Descriptor.Collector();
        archive.listRecording(recordingId, collector);
        return collector.descriptors.isEmpty() ? null : collector.descriptors.get(0);
    }

    private static SourceLocation sourceLocation(final Options options, final String channel)
    {
        final String value = options.string("source-location", channel.startsWith("aeron:ipc") ? "local" : "remote");
        switch (value)
        {
            case "local": return SourceLocation.LOCAL;
            case "remote": return SourceLocation.REMOTE;
            default: throw new UsageException("--source-location must be 'local' or 'remote', got '" + value + "'");
        }
    }

    /** Without --fragmented every message must fit one frame (callers rely on that for position maths). */
    private static void checkFragmentation(final boolean fragmented, final int size, final int maxPayloadLength)
    {
        if (fragmented && size <= maxPayloadLength)
        {
            throw new UsageException("--fragmented needs --size above the publication's max payload length " +
                maxPayloadLength + ", got " + size);
        }
        if (!fragmented && size > maxPayloadLength)
        {
            throw new UsageException("--size " + size + " exceeds the max payload length " + maxPayloadLength +
                " of one frame; pass --fragmented to send fragmented messages");
        }
    }

    private static int nonNegative(final Options options, final String name, final int value)
    {
        if (value < 0)
        {
            throw new UsageException("--" + name + " must be >= 0, got " + value);
        }
        return value;
    }

    private static String offerResult(final long result)
    {
        if (result == Publication.NOT_CONNECTED) return "NOT_CONNECTED";
        if (result == Publication.BACK_PRESSURED) return "BACK_PRESSURED";
        if (result == Publication.ADMIN_ACTION) return "ADMIN_ACTION";
        if (result == Publication.CLOSED) return "CLOSED";
        if (result == Publication.MAX_POSITION_EXCEEDED) return "MAX_POSITION_EXCEEDED";
        return Long.toString(result);
    }

    private static void sleep(final long millis)
    {
        try
        {
            Thread.sleep(millis);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Where the recording's position comes from: the archive's rec-pos counter when the archive
     * shares this client's driver, else the archive protocol (listing + RecordingPositionRequest),
     * which also works for an archive behind another driver, e.g. our Python sidecar.
     */
    private static final class RecordingProgress
    {
        final long recordingId;
        private final CountersReader counters;
        private final int counterId;
        private final AeronArchive archive;

        private RecordingProgress(
            final long recordingId, final CountersReader counters, final int counterId, final AeronArchive archive)
        {
            this.recordingId = recordingId;
            this.counters = counters;
            this.counterId = counterId;
            this.archive = archive;
        }

        static RecordingProgress find(
            final ArchiveConnection connection, final int sessionId, final int streamId, final Deadline deadline)
        {
            final CountersReader counters = connection.aeron.countersReader();
            long lastListNs = 0;
            while (true)
            {
                final int counterId = RecordingPos.findCounterIdBySession(counters, sessionId);
                if (counterId != CountersReader.NULL_COUNTER_ID)
                {
                    return new RecordingProgress(RecordingPos.getRecordingId(counters, counterId), counters, counterId, null);
                }
                if (System.nanoTime() - lastListNs > 50_000_000L)
                {
                    lastListNs = System.nanoTime();
                    final long recordingId = findActiveRecording(connection.archive, sessionId, streamId);
                    if (recordingId != -1)
                    {
                        return new RecordingProgress(recordingId, null, CountersReader.NULL_COUNTER_ID, connection.archive);
                    }
                }
                deadline.pause("a recording of session " + sessionId + " stream " + streamId + " to start");
            }
        }

        long position()
        {
            if (archive == null)
            {
                return counters.getCounterValue(counterId);
            }
            return archive.getRecordingPosition(recordingId);
        }

        String via()
        {
            return archive == null ? "counter" : "protocol";
        }

        private static long findActiveRecording(final AeronArchive archive, final int sessionId, final int streamId)
        {
            final Descriptor.Collector collector = new Descriptor.Collector();
            archive.listRecordings(0, LIST_ALL, collector);
            long found = -1;
            for (final Descriptor d : collector.descriptors)
            {
                if (d.sessionId == sessionId && d.streamId == streamId && d.stopPosition == AeronArchive.NULL_POSITION)
                {
                    found = Math.max(found, d.recordingId);
                }
            }
            return found;
        }
    }
}
