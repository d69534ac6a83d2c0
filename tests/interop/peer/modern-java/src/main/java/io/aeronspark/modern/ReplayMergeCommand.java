package io.aeronspark.modern;

import java.util.ArrayList;
import java.util.List;

import io.aeron.ChannelUri;
import io.aeron.CommonContext;
import io.aeron.ExclusivePublication;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ReplayMerge;
import io.aeron.archive.codecs.SourceLocation;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * {@code replay-merge}: the whole ReplayMerge story in one process, with the real client class.
 *
 * <ol>
 * <li>publishes {@code --messages} on a dynamic multi-destination {@code --live-channel}
 *     ({@code aeron:udp?control=H:P|control-mode=dynamic}) and has the archive record it (REMOTE);</li>
 * <li>a manual-control subscription starts a {@link ReplayMerge} from {@code --position} (default the
 *     recording's start) while {@code --live-messages} more are published, a few per poll;</li>
 * <li>reads until every message arrived and the merge is done, then prints the states seen,
 *     message count, index range and digest.</li>
 * </ol>
 */
final class ReplayMergeCommand
{
    private ReplayMergeCommand()
    {
    }

    static int run(final Options options)
    {
        final String liveChannel = options.requiredString("live-channel");
        final int streamId = options.requiredInt("live-stream-id");
        final int messages = options.nonNegativeInt("messages");
        final int liveMessages = options.nonNegativeInt("live-messages");
        final int size = options.nonNegativeInt("size");
        final String replayChannelBase = options.string("replay-channel", "aeron:udp");
        final String replayEndpoint = options.string("replay-endpoint", "localhost:0");
        final String liveEndpoint = options.string("live-endpoint", "localhost:0");
        final String recordingEndpoint = options.string("recording-endpoint", "localhost:0");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));

        final ChannelUri liveUri = ChannelUri.parse(liveChannel);
        final String controlEndpoint = liveUri.get(CommonContext.MDC_CONTROL_PARAM_NAME);
        if (controlEndpoint == null ||
            !CommonContext.MDC_CONTROL_MODE_DYNAMIC.equals(liveUri.get(CommonContext.MDC_CONTROL_MODE_PARAM_NAME)))
        {
            throw new UsageException("replay-merge: --live-channel must be a dynamic MDC channel, " +
                "e.g. aeron:udp?control=localhost:P|control-mode=dynamic; got " + liveChannel);
        }

        try (ArchiveConnection connection = ArchiveConnection.open(options, true);
            ExclusivePublication publication = connection.aeron.addExclusivePublication(liveChannel, streamId))
        {
            final AeronArchive archive = connection.archive;
            ClientCommands.checkFragmentation(options, false, size, publication.maxPayloadLength());
            final int sessionId = publication.sessionId();
            final String recordingChannel = "aeron:udp?endpoint=" + recordingEndpoint + "|control=" + controlEndpoint +
                "|session-id=" + sessionId;
            archive.startRecording(recordingChannel, streamId, SourceLocation.REMOTE);
            while (!publication.isConnected())
            {
                deadline.pause("the archive's recording subscription to connect to " + liveChannel);
            }

            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[size]);
            final int total = messages + liveMessages;
            long nextIndex = 0;
            for (; nextIndex < messages; nextIndex++)
            {
                Payloads.fill(buffer, 0, nextIndex, size);
                ClientCommands.offer(publication, buffer, size, nextIndex, deadline);
            }
            final long recordingId = awaitRecorded(connection, archive, sessionId, streamId, publication.position(), deadline);
            final long startPosition = options.longValue("position", archive.getStartPosition(recordingId));

            final String replayChannel = replayChannelBase + (replayChannelBase.contains("?") ? "|" : "?") +
                "session-id=" + sessionId;
            final String replayDestination = "aeron:udp?endpoint=" + replayEndpoint;
            final String liveDestination = "aeron:udp?endpoint=" + liveEndpoint + "|control=" + controlEndpoint;
            final List<String> states = new ArrayList<>();
            final ClientCommands.ReplayRead read = new ClientCommands.ReplayRead();
            final long startNs = System.nanoTime();
            try (Subscription subscription = connection.aeron.addSubscription(
                    "aeron:udp?control-mode=manual", streamId);
                ReplayMerge merge = new ReplayMerge(
                    subscription, archive, replayChannel, replayDestination, liveDestination, recordingId, startPosition))
            {
                noteState(states, merge);
                long mergedAtMessage = -1;
                while (!(merge.isMerged() && read.lastIndex == total - 1))
                {
                    // Live traffic keeps flowing while the replay catches up, a few messages per poll.
                    for (int burst = 0; burst < 4 && nextIndex < total; burst++)
                    {
                        Payloads.fill(buffer, 0, nextIndex, size);
                        if (publication.offer(buffer, 0, size) > 0)
                        {
                            nextIndex++;
                        }
                    }
                    final int fragments = merge.poll(read.handler, 64);
                    noteState(states, merge);
                    if (merge.hasFailed())
                    {
                        throw new IllegalStateException("ReplayMerge failed: " + merge);
                    }
                    if (merge.isMerged() && mergedAtMessage < 0)
                    {
                        mergedAtMessage = read.messages;
                    }
                    if (fragments == 0)
                    {
                        deadline.pause("ReplayMerge (" + merge + ") after " + read.messages + " messages");
                    }
                }
                read.toJson("replay-merged")
                    .put("recordingId", recordingId)
                    .put("sessionId", sessionId)
                    .put("startPosition", startPosition)
                    .put("merged", merge.isMerged())
                    .put("liveAdded", merge.isLiveAdded())
                    .put("states", states)
                    .put("mergedAtMessage", mergedAtMessage)
                    .put("publishedMessages", nextIndex)
                    .put("publicationPosition", publication.position())
                    .put("lastPosition", merge.image() == null ? null : merge.image().position())
                    .put("mergeMs", (System.nanoTime() - startNs) / 1_000_000.0)
                    .emit();
            }
            archive.stopRecording(recordingChannel, streamId);
        }
        return ModernPeer.EXIT_OK;
    }

    /** ReplayMerge keeps its state enum private; its toString starts with {@code state=NAME}. */
    private static void noteState(final List<String> states, final ReplayMerge merge)
    {
        final String text = merge.toString();
        final int from = text.indexOf("state=");
        if (from < 0)
        {
            return;
        }
        int to = from + "state=".length();
        while (to < text.length() && (Character.isLetter(text.charAt(to)) || text.charAt(to) == '_'))
        {
            to++;
        }
        final String state = text.substring(from + "state=".length(), to);
        if (states.isEmpty() || !states.get(states.size() - 1).equals(state))
        {
            states.add(state);
        }
    }

    /** The counter when the archive shares this driver, else the protocol (e.g. our sidecar behind another driver). */
    private static long awaitRecorded(
        final ArchiveConnection connection, final AeronArchive archive, final int sessionId, final int streamId,
        final long position, final Deadline deadline)
    {
        final ClientCommands.RecordingProgress progress = ClientCommands.RecordingProgress.find(
            connection, archive, sessionId, streamId, deadline);
        while (progress.position() < position)
        {
            deadline.pause("recording " + progress.recordingId + " to reach position " + position);
        }
        return progress.recordingId;
    }
}
