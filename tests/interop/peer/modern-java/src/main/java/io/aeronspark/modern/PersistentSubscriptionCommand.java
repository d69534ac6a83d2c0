package io.aeronspark.modern;

import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;

import io.aeron.ChannelUri;
import io.aeron.CommonContext;
import io.aeron.ExclusivePublication;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.PersistentSubscription;
import io.aeron.archive.client.PersistentSubscriptionListener;
import io.aeron.archive.codecs.SourceLocation;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * {@code persistent-subscription}: Aeron 1.51's {@link PersistentSubscription} against an archive
 * (our sidecar in the tests), in one process with the real client classes.
 *
 * <ol>
 * <li>publishes {@code --messages} on a dynamic multi-destination {@code --live-channel}
 *     ({@code aeron:udp?control=H:P|control-mode=dynamic}) that the archive records (REMOTE), and
 *     waits until the recording holds them all;</li>
 * <li>creates a PersistentSubscription on that recording from {@code --position} (default
 *     {@code FROM_START}) with {@code --replay-channel} (default {@code aeron:udp?endpoint=localhost:0},
 *     the dynamic-port kind) and the live channel's subscriber side, and polls it while
 *     {@code --live-messages} more are published, a few per poll;</li>
 * <li>once it is live, publishes {@code --after-live-messages} more, which must arrive live;</li>
 * <li>prints how many messages arrived in replay and live, the index range, whether every index came
 *     once and in order (the first one out of order otherwise), the SHA-256 over the payloads, the
 *     last position seen and the publication's position.</li>
 * </ol>
 */
final class PersistentSubscriptionCommand
{
    private static final int FRAGMENT_LIMIT = 64;
    private static final int LIVE_BURST = 4;

    private PersistentSubscriptionCommand()
    {
    }

    static int run(final Options options)
    {
        final String liveChannel = options.requiredString("live-channel");
        final int streamId = options.requiredInt("live-stream-id");
        final int messages = options.nonNegativeInt("messages");
        final int liveMessages = options.nonNegativeInt("live-messages");
        final int afterLiveMessages = options.intValue("after-live-messages", 100);
        final int size = options.nonNegativeInt("size");
        final String replayChannel = options.string("replay-channel", "aeron:udp?endpoint=localhost:0");
        final int replayStreamId = options.intValue("replay-stream-id", streamId + 1);
        final String recordingEndpoint = options.string("recording-endpoint", "localhost:0");
        final String liveEndpoint = options.string("live-endpoint", "localhost:0");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));
        if (size < Payloads.INDEX_LENGTH)
        {
            throw new UsageException("persistent-subscription: --size must be >= " + Payloads.INDEX_LENGTH +
                " (each message starts with its index), got " + size);
        }

        final ChannelUri liveUri = ChannelUri.parse(liveChannel);
        final String controlEndpoint = liveUri.get(CommonContext.MDC_CONTROL_PARAM_NAME);
        if (controlEndpoint == null ||
            !CommonContext.MDC_CONTROL_MODE_DYNAMIC.equals(liveUri.get(CommonContext.MDC_CONTROL_MODE_PARAM_NAME)))
        {
            throw new UsageException("persistent-subscription: --live-channel must be a dynamic MDC channel, " +
                "e.g. aeron:udp?control=localhost:P|control-mode=dynamic; got " + liveChannel);
        }

        try (ArchiveConnection connection = ArchiveConnection.open(options, true);
            ExclusivePublication publication = connection.aeron.addExclusivePublication(liveChannel, streamId))
        {
            final AeronArchive archive = connection.archive;
            ClientCommands.checkFragmentation(options, false, size, publication.maxPayloadLength());
            final int sessionId = publication.sessionId();
            // The archive and the live side each join the publication as a dynamic MDC destination.
            final String recordingChannel = "aeron:udp?endpoint=" + recordingEndpoint + "|control=" + controlEndpoint +
                "|session-id=" + sessionId;
            final String liveSubscriptionChannel = "aeron:udp?endpoint=" + liveEndpoint + "|control=" +
                controlEndpoint + "|session-id=" + sessionId;
            archive.startRecording(recordingChannel, streamId, SourceLocation.REMOTE);
            while (!publication.isConnected())
            {
                deadline.pause("the archive's recording subscription to connect to " + liveChannel);
            }

            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[size]);
            long nextIndex = 0;
            for (; nextIndex < messages; nextIndex++)
            {
                Payloads.fill(buffer, 0, nextIndex, size);
                ClientCommands.offer(publication, buffer, size, nextIndex, deadline);
            }
            final ClientCommands.RecordingProgress progress = ClientCommands.RecordingProgress.find(
                connection, archive, sessionId, streamId, deadline);
            final long recordedPosition = publication.position();
            while (progress.position() < recordedPosition)
            {
                deadline.pause("recording " + progress.recordingId + " to reach position " + recordedPosition);
            }
            final long startPosition = options.longValue("position", PersistentSubscription.FROM_START);

            final Events events = new Events();
            final Read read = new Read();
            final PersistentSubscription.Context context = new PersistentSubscription.Context()
                .aeron(connection.aeron)
                .ownsAeronClient(false)
                .recordingId(progress.recordingId)
                .startPosition(startPosition)
                .liveChannel(liveSubscriptionChannel)
                .liveStreamId(streamId)
                .replayChannel(replayChannel)
                .replayStreamId(replayStreamId)
                .listener(events)
                // Its own archive session (the context is concluded by the subscription's async connect).
                .aeronArchiveContext(ArchiveConnection.archiveContext(options, connection.aeron));
            final long startNs = System.nanoTime();
            final long liveTarget = messages + liveMessages;
            final long total = liveTarget + afterLiveMessages;
            long joinedAtMessage = -1;
            try (PersistentSubscription subscription = PersistentSubscription.create(context))
            {
                read.subscription = subscription;
                while (!(subscription.isLive() && read.messages() > 0 && read.lastIndex == total - 1))
                {
                    if (subscription.hasFailed())
                    {
                        throw new IllegalStateException("PersistentSubscription failed after " + read.messages() +
                            " messages: " + subscription.failureReason(), subscription.failureReason());
                    }
                    if (read.outOfOrder != null)
                    {
                        throw new IllegalStateException("PersistentSubscription delivered " + read.outOfOrder);
                    }
                    // Live traffic keeps flowing while the replay catches up, a few messages per poll.
                    // The after-live messages only once it is live, so some surely arrive live.
                    final long publishUpTo = subscription.isLive() ? total : liveTarget;
                    for (int burst = 0; burst < LIVE_BURST && nextIndex < publishUpTo; burst++)
                    {
                        Payloads.fill(buffer, 0, nextIndex, size);
                        if (publication.offer(buffer, 0, size) > 0)
                        {
                            nextIndex++;
                        }
                    }
                    if (subscription.isLive() && joinedAtMessage < 0)
                    {
                        joinedAtMessage = read.messages();
                    }
                    if (subscription.poll(read.handler, FRAGMENT_LIMIT) == 0)
                    {
                        deadline.pause("the PersistentSubscription (live=" + subscription.isLive() + ", replaying=" +
                            subscription.isReplaying() + ") after " + read.messages() + " of " + total +
                            " messages; listener errors " + events.errors);
                    }
                }
                if (read.outOfOrder != null)
                {
                    throw new IllegalStateException("PersistentSubscription delivered " + read.outOfOrder);
                }
                read.toJson("persistent-subscription-read")
                    .put("recordingId", progress.recordingId)
                    .put("sessionId", sessionId)
                    .put("startPosition", startPosition)
                    .put("recordedMessages", messages)
                    .put("recordedPosition", recordedPosition)
                    .put("live", subscription.isLive())
                    .put("liveJoined", events.liveJoined)
                    .put("liveLeft", events.liveLeft)
                    .put("listenerErrors", events.errors)
                    .put("joinedAtMessage", joinedAtMessage)
                    .put("publishedMessages", nextIndex)
                    .put("publicationPosition", publication.position())
                    .put("replayChannel", replayChannel)
                    .put("liveChannel", liveSubscriptionChannel)
                    .put("readMs", (System.nanoTime() - startNs) / 1_000_000.0)
                    .emit();
            }
            archive.stopRecording(recordingChannel, streamId);
        }
        return ModernPeer.EXIT_OK;
    }

    /** The listener's callbacks, counted; errors are kept as text (transient ones are not fatal). */
    private static final class Events implements PersistentSubscriptionListener
    {
        int liveJoined;
        int liveLeft;
        final List<String> errors = new ArrayList<>();

        @Override
        public void onLiveJoined()
        {
            liveJoined++;
        }

        @Override
        public void onLiveLeft()
        {
            liveLeft++;
        }

        @Override
        public void onError(final Exception ex)
        {
            errors.add(String.valueOf(ex));
        }
    }

    /**
     * Whole messages (the subscription reassembles): the digest over every payload in arrival order,
     * counts in replay and live, the index range and the first index that broke "each once, in order".
     */
    private static final class Read
    {
        private final MessageDigest digest = Payloads.newDigest();
        PersistentSubscription subscription;
        long replayed;
        long liveRead;
        long firstIndex = -1;
        long lastIndex = -1;
        long lastPosition = -1;
        String outOfOrder;

        final FragmentHandler handler = (buffer, offset, length, header) ->
        {
            final byte[] bytes = new byte[length];
            buffer.getBytes(offset, bytes);
            digest.update(bytes);
            final long index = Payloads.indexOf(buffer, offset, length);
            if (messages() == 0)
            {
                firstIndex = index;
            }
            else if (index != lastIndex + 1 && outOfOrder == null)
            {
                outOfOrder = "message " + index + " after " + lastIndex + " at position " + header.position();
            }
            lastIndex = index;
            lastPosition = header.position();
            if (subscription.isLive())
            {
                liveRead++;
            }
            else
            {
                replayed++;
            }
        };

        long messages()
        {
            return replayed + liveRead;
        }

        Json toJson(final String event)
        {
            return Json.event(event)
                .put("messages", messages())
                .put("replayedMessages", replayed)
                .put("liveMessages", liveRead)
                .put("firstIndex", firstIndex)
                .put("lastIndex", lastIndex)
                .put("lastPosition", lastPosition)
                .put("digest", Payloads.hex(digest.digest()));
        }
    }
}
