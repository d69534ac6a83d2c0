package io.aeronspark.modern;

import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;

import io.aeron.ChannelUri;
import io.aeron.Counter;
import io.aeron.ExclusivePublication;
import io.aeron.FragmentAssembler;
import io.aeron.Image;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ReplayParams;
import io.aeron.archive.codecs.SourceLocation;
import io.aeron.archive.status.RecordingPos;
import io.aeron.driver.status.SenderPos;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.SemanticVersion;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;

/**
 * The client subcommands that record, list, replay and publish: {@code connect}, {@code record},
 * {@code start-recording}, {@code stop-recording}, {@code list}, {@code replay} and {@code publish}.
 * All go through the real {@link AeronArchive} (or, for publish, a plain publication).
 */
final class ClientCommands
{
    static final int LIST_ALL = 1_000_000;

    private ClientCommands()
    {
    }

    /** Login (ConnectRequest + ArchiveIdRequest, with credentials if given) and nothing else. */
    static int connect(final Options options)
    {
        final long startNs = System.nanoTime();
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            // Every ControlResponse carries the archive's protocol version; the last one polled
            // while connecting answered the ArchiveIdRequest.
            final int archiveVersion = archive.controlResponsePoller().version();
            Json.event("connected")
                .put("archiveId", archive.archiveId())
                .put("controlSessionId", archive.controlSessionId())
                .put("archiveProtocolVersion", archiveVersion == 0 ? null : SemanticVersion.toString(archiveVersion))
                .put("archiveProtocolSemanticVersion", archiveVersion)
                .put("clientProtocolVersion", Versions.ARCHIVE_PROTOCOL)
                .put("aeronVersion", Versions.AERON)
                .put("controlResponseChannel", archive.context().controlResponseChannel())
                .put("connectMs", (System.nanoTime() - startNs) / 1_000_000.0)
                .emit();
        }
        return ModernPeer.EXIT_OK;
    }

    static int record(final Options options)
    {
        final String channel = options.requiredString("channel");
        final int streamId = options.requiredInt("stream-id");
        final int messages = options.nonNegativeInt("messages");
        final int size = options.nonNegativeInt("size");
        final long firstIndex = options.longValue("first-index", 0);
        final boolean fragmented = options.flag("fragmented");
        final SourceLocation sourceLocation = sourceLocation(options, channel);
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        try (ArchiveConnection connection = ArchiveConnection.open(options, true);
            ExclusivePublication publication = connection.aeron.addExclusivePublication(channel, streamId))
        {
            final AeronArchive archive = connection.archive;
            checkFragmentation(options, fragmented, size, publication.maxPayloadLength());
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

            final RecordingProgress progress = RecordingProgress.find(
                connection, archive, publication.sessionId(), streamId, deadline);
            while (progress.position() < publicationPosition)
            {
                deadline.pause("the recording position to reach " + publicationPosition);
            }
            final long recordedNs = System.nanoTime() - startNs;
            // By channel and stream (StopRecordingRequest), as the 1.15.1 peer does: every archive knows it.
            archive.stopRecording(recordingChannel, streamId);
            final Descriptor descriptor = awaitStopped(archive, progress.recordingId, deadline);
            if (options.flag("signals"))
            {
                RecordingSignals.INSTANCE.awaitSignal(
                    archive, progress.recordingId, io.aeron.archive.codecs.RecordingSignal.STOP, deadline);
                RecordingSignals.INSTANCE.emit();
            }

            Json.event("recorded")
                .put("recordingId", progress.recordingId)
                .put("subscriptionId", subscriptionId)
                .put("sessionId", publication.sessionId())
                .put("streamId", streamId)
                .put("channel", channel)
                .put("recordingChannel", recordingChannel)
                .put("sourceLocation", sourceLocation.name())
                .put("startPosition", descriptor.startPosition())
                .put("stopPosition", descriptor.stopPosition())
                .put("publicationPosition", publicationPosition)
                .put("messages", messages)
                .put("firstIndex", firstIndex)
                .put("size", size)
                .put("fragmented", size > publication.maxPayloadLength())
                .put("maxPayloadLength", publication.maxPayloadLength())
                .put("termBufferLength", publication.termBufferLength())
                .put("initialTermId", publication.initialTermId())
                .put("archiveId", archive.archiveId())
                .put("digest", digest)
                .put("progressVia", progress.via())
                .put("publishMs", publishedNs / 1_000_000.0)
                .put("recordedMs", recordedNs / 1_000_000.0)
                .emit();
        }
        return ModernPeer.EXIT_OK;
    }

    /** Starts recording a stream someone else publishes and returns at once. */
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
        return ModernPeer.EXIT_OK;
    }

    /**
     * Stops a recording by channel and stream (or by {@code --subscription-id}). With
     * {@code --recording-id} and {@code --await-position} it first waits for the recording to reach
     * the position, then for the catalog to show the stop position.
     */
    static int stopRecording(final Options options)
    {
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));
        final boolean bySubscription = options.has("subscription-id");
        final String channel = bySubscription ? options.string("channel", null) : options.requiredString("channel");
        final int streamId = bySubscription ? options.intValue("stream-id", 0) : options.requiredInt("stream-id");
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            final boolean knowsRecording = options.has("recording-id");
            final long recordingId = options.longValue("recording-id", -1);
            if (options.has("await-position"))
            {
                if (!knowsRecording)
                {
                    throw new UsageException("stop-recording: --await-position needs --recording-id");
                }
                awaitRecordingPosition(archive, recordingId, options.requiredLong("await-position"), deadline);
            }
            if (bySubscription)
            {
                archive.stopRecording(options.requiredLong("subscription-id"));
            }
            else
            {
                archive.stopRecording(channel, streamId);
            }
            final Json stopped = Json.event("recording-stopped").put("channel", channel).put("streamId", streamId);
            if (knowsRecording)
            {
                final Descriptor descriptor = awaitStopped(archive, recordingId, deadline);
                stopped.put("recordingId", recordingId)
                    .put("startPosition", descriptor.startPosition())
                    .put("stopPosition", descriptor.stopPosition());
            }
            stopped.emit();
        }
        return ModernPeer.EXIT_OK;
    }

    static int list(final Options options)
    {
        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final List<Descriptor> descriptors = new ArrayList<>();
            if (options.has("recording-id"))
            {
                connection.archive.listRecording(options.requiredLong("recording-id"), Descriptor.collector(descriptors));
            }
            else
            {
                connection.archive.listRecordings(
                    options.longValue("from-recording-id", 0),
                    options.intValue("count", LIST_ALL),
                    Descriptor.collector(descriptors));
            }
            for (final Descriptor descriptor : descriptors)
            {
                descriptor.toJson("descriptor").emit();
            }
            Json.event("listed").put("count", descriptors.size()).emit();
        }
        return ModernPeer.EXIT_OK;
    }

    /**
     * Replays {@code [position, position + length)} and reads it to the end. Without {@code --length}
     * the end is the recording's stop position. {@code --limit-counter-id} (or {@code --limit-position},
     * for which the peer allocates a counter) makes it a bounded replay that ends at the limit.
     */
    static int replay(final Options options)
    {
        final long recordingId = options.requiredLong("recording-id");
        final String replayChannel = options.requiredString("replay-channel");
        final int replayStreamId = options.requiredInt("replay-stream-id");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        try (ArchiveConnection connection = ArchiveConnection.open(options, true))
        {
            final AeronArchive archive = connection.archive;
            final Descriptor descriptor = Descriptor.find(archive, recordingId);
            if (descriptor == null)
            {
                throw new IllegalArgumentException("recording " + recordingId + " is not in the archive's catalog");
            }
            final long position = options.longValue("position", descriptor.startPosition());
            final long length;
            if (options.has("length"))
            {
                length = options.requiredLong("length");
            }
            else if (descriptor.stopPosition() != AeronArchive.NULL_POSITION)
            {
                length = descriptor.stopPosition() - position;
            }
            else
            {
                throw new UsageException("replay: recording " + recordingId + " is still active; give --length");
            }

            Counter ownLimitCounter = null;
            try
            {
                final ReplayParams params = new ReplayParams().position(position).length(length);
                long endPosition = position + length;
                if (options.has("limit-position"))
                {
                    final long limit = options.requiredLong("limit-position");
                    ownLimitCounter = connection.aeron.addCounter(1001, "modern-peer replay limit");
                    ownLimitCounter.setOrdered(limit);
                    params.boundingLimitCounterId(ownLimitCounter.id());
                    endPosition = Math.min(endPosition, limit);
                }
                else if (options.has("limit-counter-id"))
                {
                    final int counterId = options.requiredInt("limit-counter-id");
                    params.boundingLimitCounterId(counterId);
                    endPosition = Math.min(endPosition, connection.aeron.countersReader().getCounterValue(counterId));
                }
                final ReplayRead read = new ReplayRead();
                final long startNs = System.nanoTime();
                try (Subscription subscription = archive.replay(recordingId, replayChannel, replayStreamId, params))
                {
                    final Image image = awaitImage(subscription, deadline, "the replay image on " + replayChannel);
                    final long joinPosition = image.joinPosition();
                    read.readUntil(image, endPosition, deadline);
                    read.toJson("replayed")
                        .put("recordingId", recordingId)
                        .put("replaySessionId", image.sessionId())
                        .put("position", position)
                        .put("length", length)
                        .put("bounded", params.isBounded())
                        .put("limitCounterId", params.isBounded() ? params.boundingLimitCounterId() : null)
                        .put("joinPosition", joinPosition)
                        .put("firstPosition", joinPosition)
                        .put("lastPosition", image.position())
                        .put("replayMs", (System.nanoTime() - startNs) / 1_000_000.0)
                        .emit();
                }
            }
            finally
            {
                if (ownLimitCounter != null)
                {
                    ownLimitCounter.close();
                }
            }
        }
        return ModernPeer.EXIT_OK;
    }

    static int publish(final Options options)
    {
        final String channel = options.requiredString("channel");
        final int streamId = options.requiredInt("stream-id");
        final int messages = options.nonNegativeInt("messages");
        final int size = options.nonNegativeInt("size");
        final long firstIndex = options.longValue("first-index", 0);
        final long lingerMs = options.longValue("linger-ms", options.flag("embedded-driver") ? 500 : 0);
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        try (ArchiveConnection connection = ArchiveConnection.open(options, false);
            ExclusivePublication publication = connection.aeron.addExclusivePublication(channel, streamId))
        {
            checkFragmentation(options, options.flag("fragmented"), size, publication.maxPayloadLength());
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
        return ModernPeer.EXIT_OK;
    }

    // -----------------------------------------------------------------------------------------
    // Shared by the commands

    /** Offers messages {@code firstIndex ..} in order, retrying on back pressure; returns their SHA-256 hex. */
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
            offer(publication, buffer, size, i, deadline);
        }
        return Payloads.hex(digest.digest());
    }

    static void offer(
        final Publication publication, final UnsafeBuffer buffer, final int size, final long index, final Deadline deadline)
    {
        while (true)
        {
            final long result = publication.offer(buffer, 0, size);
            if (result > 0)
            {
                return;
            }
            if (result == Publication.CLOSED || result == Publication.MAX_POSITION_EXCEEDED)
            {
                throw new IllegalStateException("offer of message " + index + " failed: " + offerResult(result));
            }
            deadline.check("offer of message " + index + " (last result " + offerResult(result) + ")");
            Thread.yield();
        }
    }

    static Image awaitImage(final Subscription subscription, final Deadline deadline, final String what)
    {
        while (subscription.imageCount() == 0)
        {
            deadline.pause(what);
        }
        return subscription.imageAtIndex(0);
    }

    /** For a network publication, waits until the driver's sender has sent everything offered. */
    static void awaitSent(
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

    /** Waits for an active recording to reach {@code target}; a recording that stopped short fails. */
    static void awaitRecordingPosition(
        final AeronArchive archive, final long recordingId, final long target, final Deadline deadline)
    {
        while (archive.getRecordingPosition(recordingId) < target)
        {
            final Descriptor descriptor = Descriptor.find(archive, recordingId);
            if (descriptor != null && descriptor.stopPosition() != AeronArchive.NULL_POSITION)
            {
                if (descriptor.stopPosition() < target)
                {
                    throw new IllegalStateException("recording " + recordingId + " stopped at " +
                        descriptor.stopPosition() + " before reaching " + target);
                }
                return;
            }
            deadline.pause("recording " + recordingId + " to reach position " + target);
        }
    }

    static Descriptor awaitStopped(final AeronArchive archive, final long recordingId, final Deadline deadline)
    {
        while (true)
        {
            final Descriptor descriptor = Descriptor.find(archive, recordingId);
            if (descriptor != null && descriptor.stopPosition() != AeronArchive.NULL_POSITION)
            {
                return descriptor;
            }
            deadline.pause("recording " + recordingId + " to show a stop position in the catalog");
        }
    }

    static SourceLocation sourceLocation(final Options options, final String channel)
    {
        final String value = options.string("source-location", channel.startsWith("aeron:ipc") ? "local" : "remote");
        return switch (value)
        {
            case "local" -> SourceLocation.LOCAL;
            case "remote" -> SourceLocation.REMOTE;
            default -> throw new UsageException(
                options.command() + ": --source-location must be 'local' or 'remote', got '" + value + "'");
        };
    }

    /** Without --fragmented every message fits one frame, which callers rely on for position maths. */
    static void checkFragmentation(
        final Options options, final boolean fragmented, final int size, final int maxPayloadLength)
    {
        if (fragmented && size <= maxPayloadLength)
        {
            throw new UsageException(options.command() + ": --fragmented needs --size above the max payload length " +
                maxPayloadLength + ", got " + size);
        }
        if (!fragmented && size > maxPayloadLength)
        {
            throw new UsageException(options.command() + ": --size " + size + " exceeds the max payload length " +
                maxPayloadLength + " of one frame; pass --fragmented to send fragmented messages");
        }
    }

    static String offerResult(final long result)
    {
        if (result == Publication.NOT_CONNECTED)
        {
            return "NOT_CONNECTED";
        }
        if (result == Publication.BACK_PRESSURED)
        {
            return "BACK_PRESSURED";
        }
        if (result == Publication.ADMIN_ACTION)
        {
            return "ADMIN_ACTION";
        }
        if (result == Publication.CLOSED)
        {
            return "CLOSED";
        }
        if (result == Publication.MAX_POSITION_EXCEEDED)
        {
            return "MAX_POSITION_EXCEEDED";
        }
        return Long.toString(result);
    }

    static void sleep(final long millis)
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

    /** Whole messages read from a replay (or merged) image: count, first/last index and their digest. */
    static final class ReplayRead
    {
        private final MessageDigest digest = Payloads.newDigest();
        long messages;
        long firstIndex = -1;
        long lastIndex = -1;
        long payloadBytes;
        final FragmentHandler handler = new FragmentAssembler((buffer, offset, length, header) ->
        {
            final byte[] bytes = new byte[length];
            buffer.getBytes(offset, bytes);
            digest.update(bytes);
            final long index = Payloads.indexOf(buffer, offset, length);
            if (messages == 0)
            {
                firstIndex = index;
            }
            lastIndex = index;
            messages++;
            payloadBytes += length;
        });

        void readUntil(final Image image, final long endPosition, final Deadline deadline)
        {
            while (image.position() < endPosition)
            {
                if (image.poll(handler, 256) == 0)
                {
                    if (image.isClosed())
                    {
                        throw new IllegalStateException("replay image closed at position " + image.position() +
                            " before reaching " + endPosition + " after " + messages + " messages");
                    }
                    deadline.pause("the replay to reach position " + endPosition + " (at " + image.position() + ")");
                }
            }
        }

        Json toJson(final String event)
        {
            return Json.event(event)
                .put("messages", messages)
                .put("payloadBytes", payloadBytes)
                .put("firstIndex", firstIndex)
                .put("lastIndex", lastIndex)
                .put("digest", Payloads.hex(digest.digest()));
        }
    }

    /**
     * Where a recording's position comes from: the archive's rec-pos counter when the archive shares
     * this client's driver, else the protocol (listing + RecordingPositionRequest), which also works
     * for an archive behind another driver, e.g. our Python sidecar.
     */
    static final class RecordingProgress
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
            final ArchiveConnection connection, final AeronArchive archive, final int sessionId, final int streamId,
            final Deadline deadline)
        {
            final CountersReader counters = connection.aeron.countersReader();
            long lastListNs = System.nanoTime();
            while (true)
            {
                final int counterId = RecordingPos.findCounterIdBySession(counters, sessionId, archive.archiveId());
                if (counterId != CountersReader.NULL_COUNTER_ID)
                {
                    return new RecordingProgress(RecordingPos.getRecordingId(counters, counterId), counters, counterId, null);
                }
                if (System.nanoTime() - lastListNs > 50_000_000L)
                {
                    lastListNs = System.nanoTime();
                    final long recordingId = findActiveRecording(archive, sessionId, streamId);
                    if (recordingId != -1)
                    {
                        return new RecordingProgress(recordingId, null, CountersReader.NULL_COUNTER_ID, archive);
                    }
                }
                deadline.pause("a recording of session " + sessionId + " stream " + streamId + " to start");
            }
        }

        long position()
        {
            return archive == null ? counters.getCounterValue(counterId) : archive.getRecordingPosition(recordingId);
        }

        String via()
        {
            return archive == null ? "counter" : "protocol";
        }

        private static long findActiveRecording(final AeronArchive archive, final int sessionId, final int streamId)
        {
            final List<Descriptor> descriptors = new ArrayList<>();
            archive.listRecordings(0, LIST_ALL, Descriptor.collector(descriptors));
            long found = -1;
            for (final Descriptor d : descriptors)
            {
                if (d.sessionId() == sessionId && d.streamId() == streamId &&
                    d.stopPosition() == AeronArchive.NULL_POSITION)
                {
                    found = Math.max(found, d.recordingId());
                }
            }
            return found;
        }
    }
}
