package io.aeronspark.interop;

import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import io.aeron.ChannelUri;
import io.aeron.ExclusivePublication;
import io.aeron.FragmentAssembler;
import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ArchiveException;
import io.aeron.archive.codecs.SourceLocation;
import org.agrona.CloseHelper;

/**
 * {@code scripted-session}: ONE 1.15.1 {@link AeronArchive} connection that sends every request the
 * 1.15.1 client has (Connect, StartRecording, StopRecording, StopRecordingSubscription, ListRecordings,
 * ListRecordingsForUri, ListRecording, RecordingPosition, StopPosition, FindLastMatchingRecording,
 * Replay, StopReplay, ExtendRecording, TruncateRecording, CloseSession), with malformed inputs
 * (unknown recording ids, bad channels, unaligned and out-of-range positions, truncate of an active
 * recording, ...). One {@code "step"} JSON line per step with every returned value, or its error
 * (exception class, {@code ArchiveException.errorCode()} - 1.15.1 has the codes but no names for
 * them - and the message). Errors the archive sends for no pending request (the client's error
 * handler) come as {@code "async-error"} lines.
 *
 * <p>Everything an archive could otherwise choose differently is pinned: the publications' session
 * ids, initial term ids, term length (64 KiB) and MTU, so two fresh archives given the same script
 * must answer the same. Mirrors the modern peer's {@code scripted-session} where 1.15.1 allows.
 *
 * <p>Options: the client connection options, {@code --channel C} and {@code --channel-b C2} (UDP
 * endpoint channels the archive records), {@code --stream-id N}, {@code --messages K},
 * {@code --size B} (one frame each; the framed length must divide the 64 KiB term, e.g. 96 B),
 * {@code --replay-channel R --replay-stream-id N}, {@code --session-id S} (the others use S+1 ...),
 * {@code --with-unanswered} (steps the Java 1.15.1 archive never answers, each costing the client's
 * message timeout: a StopReplay sent before any Replay, which 1.15.1's ArchiveProxy sends as a bare
 * 8-byte header, and a Replay to an unknown media).
 */
final class ScriptedSession
{
    static final int TERM_LENGTH = 64 * 1024;
    static final int MTU = 1408;
    static final int INITIAL_TERM_ID = 7;
    static final long UNKNOWN_ID = 987_654;
    private static final int NULL_VALUE = -1;

    private final AeronArchive archive;
    private final ArchiveConnection connection;
    private final Deadline deadline;
    private int stepNumber;
    private String replayChannel;
    private int replayStreamId;

    private ScriptedSession(final ArchiveConnection connection, final AeronArchive archive, final Deadline deadline)
    {
        this.connection = connection;
        this.archive = archive;
        this.deadline = deadline;
    }

    static int run(final Options options)
    {
        final String channelA = options.requiredString("channel");
        final String channelB = options.requiredString("channel-b");
        final int streamId = options.requiredInt("stream-id");
        final int messages = options.requiredInt("messages");
        final int size = options.requiredInt("size");
        final String replayChannel = options.requiredString("replay-channel");
        final int replayStreamId = options.requiredInt("replay-stream-id");
        final int sessionId = options.requiredInt("session-id");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 60_000));

        final ArchiveConnection connection = ArchiveConnection.open(options, false);
        AeronArchive archive = null;
        try
        {
            final int[] asyncErrors = {0};
            final long connectNs = System.nanoTime();
            archive = AeronArchive.connect(new AeronArchive.Context()
                .aeron(connection.aeron)
                .ownsAeronClient(false)
                .controlRequestChannel(options.string(
                    "control-channel", AeronArchive.Configuration.CONTROL_CHANNEL_DEFAULT))
                .controlRequestStreamId(options.intValue(
                    "control-stream-id", AeronArchive.Configuration.CONTROL_STREAM_ID_DEFAULT))
                .controlResponseChannel(options.string(
                    "response-channel", AeronArchive.Configuration.CONTROL_RESPONSE_CHANNEL_DEFAULT))
                .controlResponseStreamId(options.intValue(
                    "response-stream-id", AeronArchive.Configuration.CONTROL_RESPONSE_STREAM_ID_DEFAULT))
                .messageTimeoutNs(options.longValue("message-timeout-ms", 5_000) * 1_000_000L)
                .errorHandler((throwable) ->
                {
                    asyncErrors[0]++;
                    final Json line = Json.event("async-error").put("exception", throwable.getClass().getName());
                    if (throwable instanceof ArchiveException)
                    {
                        line.put("code", ((ArchiveException)throwable).errorCode());
                    }
                    line.put("message", String.valueOf(throwable.getMessage())).emit();
                }));
            final ScriptedSession session = new ScriptedSession(connection, archive, deadline);
            session.emit("connect", null, Json.object()
                .put("controlSessionId", archive.controlSessionId())
                .put("connectMs", (System.nanoTime() - connectNs) / 1_000_000.0),
                (System.nanoTime() - connectNs) / 1_000_000.0);
            session.script(channelA, channelB, streamId, messages, size, replayChannel, replayStreamId, sessionId,
                options.flag("with-unanswered"));
            Json.event("script-done").put("steps", session.stepNumber).put("asyncErrors", asyncErrors[0]).emit();
        }
        finally
        {
            CloseHelper.quietClose(archive);  // CloseSession
            connection.close();
        }
        return InteropPeer.EXIT_OK;
    }

    // -----------------------------------------------------------------------------------------

    private void script(
        final String channelA, final String channelB, final int streamId, final int messages, final int size,
        final String replayChannel, final int replayStreamId, final int sessionId, final boolean withUnanswered)
    {
        final int frame = framedLength(size);
        final String recordA = channelA + "|session-id=" + sessionId;
        final String recordB = channelB + "|session-id=" + (sessionId + 1);
        final String ipc = "aeron:ipc?session-id=" + (sessionId + 2);
        final long end = (long)messages * frame;
        this.replayChannel = replayChannel;
        this.replayStreamId = replayStreamId;
        // Replays started and stopped at once go to a stream nobody ever subscribes to, so they wait
        // for a subscriber until stopped (on the read replays' stream a lingering connection could
        // let one run to its end first, and the stop would race it).
        final int idleStreamId = replayStreamId + 1;

        if (withUnanswered)
        {
            // 1.15.1's ArchiveProxy.stopReplay offers replayRequestEncoder.encodedLength() bytes of body:
            // before any Replay that is 0, so only the 8-byte header goes out (docs/interop.md).
            step("stop-replay-before-any-replay", () ->
            {
                archive.stopReplay(UNKNOWN_ID);
                return Json.object();
            });
        }

        final long[] subA = {-1};
        step("start-recording-udp", () -> Json.object()
            .put("subscriptionId", subA[0] = archive.startRecording(recordA, streamId, SourceLocation.REMOTE)));
        step("start-recording-ipc", () -> Json.object()
            .put("subscriptionId", archive.startRecording(ipc, streamId + 1, SourceLocation.LOCAL)));
        step("start-recording-duplicate", () -> Json.object()
            .put("subscriptionId", archive.startRecording(recordA, streamId, SourceLocation.REMOTE)));

        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelA, sessionId, 0), streamId))
        {
            step("publish-a", () -> publish(publication, 0, messages, size, 0));
            step("list-recordings-active", () -> listRecordings(0, 10));
            step("positions-active", () -> positions(0));
            step("truncate-active", () -> { archive.truncateRecording(0, 0); return positions(0); });
            step("extend-active", () -> Json.object()
                .put("subscriptionId", archive.extendRecording(0, recordA, streamId, SourceLocation.REMOTE)));
            step("stop-recording-by-subscription", () ->
            {
                archive.stopRecording(subA[0]);
                return Json.object().put("stopped", awaitStopped(0));
            });
            step("stop-recording-ipc-by-channel", () -> { archive.stopRecording(ipc, streamId + 1); return Json.object(); });
            step("stop-recording-unknown-channel", () -> { archive.stopRecording(ipc, streamId + 1); return Json.object(); });
            step("stop-recording-unknown-subscription", () -> { archive.stopRecording(UNKNOWN_ID); return Json.object(); });
            step("stop-recording-subscription-again", () -> { archive.stopRecording(subA[0]); return Json.object(); });
        }

        step("list-recordings", () -> listRecordings(0, 10));
        step("list-recordings-from-1", () -> listRecordings(1, 10));
        step("list-recordings-negative-from", () -> listRecordings(-7, 3));
        step("list-recordings-for-uri", () -> listRecordingsForUri(0, 10, "localhost", streamId));
        step("list-recordings-for-uri-other-stream", () -> listRecordingsForUri(0, 10, "localhost", streamId + 9));
        step("list-recordings-for-uri-no-match", () -> listRecordingsForUri(0, 10, "aeron:ipc", streamId));
        step("list-recording", () -> listRecording(0));
        step("list-recording-unknown", () -> listRecording(UNKNOWN_ID));
        step("list-recording-negative", () -> listRecording(-5));
        step("find-last-matching", () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "localhost", streamId, sessionId)));
        step("find-last-matching-other-session", () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "localhost", streamId, sessionId + 50)));
        step("find-last-matching-any-session", () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "localhost", streamId, NULL_VALUE)));
        step("find-last-matching-past-end", () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(UNKNOWN_ID, "localhost", streamId, sessionId)));
        step("find-last-matching-negative", () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(-3, "localhost", streamId, sessionId)));
        step("find-last-matching-no-channel", () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "aeron:ipc", streamId, sessionId)));
        step("positions-stopped", () -> positions(0));

        // Replays of recording 0 (stopped), read to the end
        step("replay-whole", () -> replay(0, 0, end, replayChannel, replayStreamId, end));
        final long middle = (long)(messages / 2) * frame;
        step("replay-from-middle", () -> replay(0, middle, end - middle, replayChannel, replayStreamId, end));
        step("replay-bounded-length", () -> replay(0, 10L * frame, 25L * frame, replayChannel, replayStreamId, 35L * frame));
        step("replay-length-max", () -> replay(0, 0, Long.MAX_VALUE, replayChannel, replayStreamId, end));
        step("replay-length-null", () -> replay(0, 0, AeronArchive.NULL_LENGTH, replayChannel, replayStreamId, end));
        // Refused or accepted replays, started and stopped at once
        step("replay-unknown-recording", () -> startAndStop(UNKNOWN_ID, 0, end, replayChannel, idleStreamId));
        step("replay-unaligned-position", () -> startAndStop(0, 13, frame, replayChannel, idleStreamId));
        step("replay-position-past-end", () -> startAndStop(0, end + frame, frame, replayChannel, idleStreamId));
        step("replay-at-stop", () -> startAndStop(0, end, frame, replayChannel, idleStreamId));
        step("replay-position-before-start", () -> startAndStop(0, -2L * frame, frame, replayChannel, idleStreamId));
        step("replay-position-null", () -> startAndStop(0, AeronArchive.NULL_POSITION, frame, replayChannel, idleStreamId));
        step("replay-length-past-end", () -> startAndStop(0, 0, end + 10L * frame, replayChannel, idleStreamId));
        step("stop-replay-running", () ->
        {
            final long replaySessionId = archive.startReplay(0, 0, Long.MAX_VALUE, replayChannel, idleStreamId);
            archive.stopReplay(replaySessionId);
            return Json.object().put("replaySessionId", replaySessionId);
        });
        step("stop-replay-again", () ->
        {
            final long replaySessionId = archive.startReplay(0, 0, Long.MAX_VALUE, replayChannel, idleStreamId);
            archive.stopReplay(replaySessionId);
            archive.stopReplay(replaySessionId);
            return Json.object().put("replaySessionId", replaySessionId);
        });
        step("stop-replay-unknown", () -> { archive.stopReplay(UNKNOWN_ID); return Json.object(); });

        // Bad channels for recording
        step("start-recording-malformed-channel", () -> Json.object()
            .put("subscriptionId", archive.startRecording("aeron:udp?endpoint", streamId, SourceLocation.REMOTE)));
        step("start-recording-unknown-media", () -> Json.object().put("subscriptionId",
            archive.startRecording("aeron:xyz?endpoint=localhost:1", streamId, SourceLocation.REMOTE)));
        step("start-recording-not-a-uri", () -> Json.object()
            .put("subscriptionId", archive.startRecording("not-a-uri", streamId, SourceLocation.REMOTE)));

        // Recording 1, on channel B, stopped by channel
        final long endB = 300L * frame;
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelB, sessionId + 1, 0), streamId))
        {
            step("start-recording-b", () -> Json.object()
                .put("subscriptionId", archive.startRecording(recordB, streamId, SourceLocation.REMOTE)));
            step("publish-b", () -> publish(publication, 1, 300, size, 0));
            step("stop-recording-b-by-channel", () ->
            {
                archive.stopRecording(recordB, streamId);
                return Json.object().put("stopped", awaitStopped(1));
            });
        }

        // Extend recording 1 with 100 more messages (a new session: the old publication may still linger)
        final String extendB = channelB + "|session-id=" + (sessionId + 3);
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelB, sessionId + 3, endB), streamId))
        {
            step("extend", () -> Json.object()
                .put("subscriptionId", archive.extendRecording(1, extendB, streamId, SourceLocation.REMOTE)));
            step("publish-extension", () -> publish(publication, 1, 100, size, 300));
            step("extend-duplicate", () -> Json.object()
                .put("subscriptionId", archive.extendRecording(1, extendB, streamId, SourceLocation.REMOTE)));
            step("positions-extending", () -> positions(1));
            step("truncate-extending", () -> { archive.truncateRecording(1, 0); return positions(1); });
            step("stop-extension", () ->
            {
                archive.stopRecording(extendB, streamId);
                return Json.object().put("stopped", awaitStopped(1));
            });
        }
        step("extend-unknown", () -> Json.object()
            .put("subscriptionId", archive.extendRecording(UNKNOWN_ID, extendB, streamId, SourceLocation.REMOTE)));
        step("extend-other-stream", () -> Json.object()
            .put("subscriptionId", archive.extendRecording(1, extendB, streamId + 3, SourceLocation.REMOTE)));
        step("extend-malformed-channel", () -> Json.object()
            .put("subscriptionId", archive.extendRecording(1, "aeron:udp?endpoint", streamId, SourceLocation.REMOTE)));
        step("list-recording-extended", () -> listRecording(1));
        step("positions-extended", () -> positions(1));
        step("replay-extended", () -> replay(1, 0, 400L * frame, replayChannel, replayStreamId, 400L * frame));

        // Truncate recording 1
        step("truncate-unaligned", () -> { archive.truncateRecording(1, 100); return positions(1); });
        step("truncate-past-end", () -> { archive.truncateRecording(1, 401L * frame); return positions(1); });
        step("truncate-negative", () -> { archive.truncateRecording(1, -32); return positions(1); });
        step("truncate-unknown", () -> { archive.truncateRecording(UNKNOWN_ID, 0); return Json.object(); });
        step("truncate", () -> { archive.truncateRecording(1, 200L * frame); return positions(1); });
        step("list-recording-truncated", () -> listRecording(1));
        step("truncate-at-stop", () -> { archive.truncateRecording(1, 200L * frame); return positions(1); });
        step("replay-truncated", () -> replay(1, 0, 200L * frame, replayChannel, replayStreamId, 200L * frame));
        step("replay-past-truncation", () -> startAndStop(1, 0, 300L * frame, replayChannel, idleStreamId));

        // Recording 2 replayed while it is recorded: follows it, ends when the recording stops
        final String recordC = channelA + "|session-id=" + (sessionId + 4);
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelA, sessionId + 4, 0), streamId + 2))
        {
            step("start-recording-live", () -> Json.object()
                .put("subscriptionId", archive.startRecording(recordC, streamId + 2, SourceLocation.REMOTE)));
            step("publish-live", () -> publish(publication, 2, 100, size, 0));
            step("replay-follows-live", () -> followLive(publication, recordC, streamId + 2, size, frame));
        }
        step("truncate-to-start", () -> { archive.truncateRecording(2, 0); return positions(2); });
        step("list-recording-truncated-to-start", () -> listRecording(2));
        step("replay-truncated-to-start", () -> startAndStop(2, 0, frame, replayChannel, idleStreamId));

        // Bad recording ids for the position queries
        step("recording-position-unknown", () -> Json.object().put("position", archive.getRecordingPosition(UNKNOWN_ID)));
        step("stop-position-unknown", () -> Json.object().put("position", archive.getStopPosition(UNKNOWN_ID)));
        step("recording-position-negative", () -> Json.object().put("position", archive.getRecordingPosition(-1)));
        step("stop-position-negative", () -> Json.object().put("position", archive.getStopPosition(-1)));
        step("list-recordings-final", () -> listRecordings(0, 10));
        step("list-recordings-page", () -> listRecordings(1, 1));
        step("list-recordings-for-uri-page", () -> listRecordingsForUri(1, 1, "localhost", streamId));

        if (withUnanswered)
        {
            // The Java 1.15.1 archive sends no response (the client times out after its message timeout).
            step("replay-unknown-media", () -> startAndStop(0, 0, frame, "aeron:xyz?endpoint=localhost:1", replayStreamId));
        }
    }

    // -----------------------------------------------------------------------------------------

    private void step(final String name, final Callable<Json> action)
    {
        Json result = null;
        Json error = null;
        final long startNs = System.nanoTime();
        try
        {
            result = action.call();
        }
        catch (final PeerTimeoutException ex)
        {
            throw ex;
        }
        catch (final Exception ex)
        {
            error = errorJson(ex);
        }
        emit(name, error, result, (System.nanoTime() - startNs) / 1_000_000.0);
    }

    private static Json errorJson(final Exception ex)
    {
        return Json.object()
            .put("exception", ex.getClass().getName())
            .put("code", ex instanceof ArchiveException ? (Object)((ArchiveException)ex).errorCode() : null)
            .put("message", String.valueOf(ex.getMessage()));
    }

    private void emit(final String name, final Json error, final Json result, final double ms)
    {
        Json.event("step").put("index", stepNumber++).put("step", name).put("ok", error == null)
            .put("result", result).put("error", error).put("ms", ms).emit();
    }

    /** A publication whose session id, initial term id, term length and MTU are pinned; starts at {@code position}. */
    static String pinned(final String channel, final int sessionId, final long position)
    {
        final ChannelUri uri = ChannelUri.parse(channel);
        uri.put("session-id", Integer.toString(sessionId));
        uri.put("mtu", Integer.toString(MTU));
        uri.initialPosition(position, INITIAL_TERM_ID, TERM_LENGTH);
        return uri.toString();
    }

    static int framedLength(final int size)
    {
        return (size + 32 + 31) & ~31;
    }

    /** Starts a replay nobody reads and, if the archive accepted it, stops it at once. */
    private Json startAndStop(
        final long recordingId, final long position, final long length, final String channel, final int streamId)
    {
        final long replaySessionId = archive.startReplay(recordingId, position, length, channel, streamId);
        archive.stopReplay(replaySessionId);
        return Json.object().put("replaySessionId", replaySessionId);
    }

    private Json publish(
        final ExclusivePublication publication, final long recordingId, final int messages, final int size,
        final long firstIndex)
    {
        while (!publication.isConnected())
        {
            deadline.pause("the recording subscription to connect");
        }
        final long startPosition = publication.position();
        final String digest = ClientCommands.offerMessages(publication, firstIndex, messages, size, deadline);
        final long position = publication.position();
        // The archive adds the recording asynchronously, on the image: until then its id is unknown.
        while (ClientCommands.describe(archive, recordingId) == null)
        {
            deadline.pause("recording " + recordingId + " to be in the catalog");
        }
        while (archive.getRecordingPosition(recordingId) < position)
        {
            deadline.pause("recording " + recordingId + " to reach " + position);
        }
        return Json.object()
            .put("sessionId", publication.sessionId())
            .put("startPosition", startPosition)
            .put("position", position)
            .put("messages", messages)
            .put("digest", digest)
            .put("recordingPosition", archive.getRecordingPosition(recordingId));
    }

    private long awaitStopped(final long recordingId)
    {
        while (true)
        {
            final Descriptor descriptor = ClientCommands.describe(archive, recordingId);
            if (descriptor != null && descriptor.stopPosition != AeronArchive.NULL_POSITION)
            {
                return descriptor.stopPosition;
            }
            deadline.pause("recording " + recordingId + " to stop");
        }
    }

    /** RecordingPosition and StopPosition (1.15.1 has no StartPosition request), each a value or its error. */
    private Json positions(final long recordingId)
    {
        return Json.object()
            .put("recording", value(() -> archive.getRecordingPosition(recordingId)))
            .put("stop", value(() -> archive.getStopPosition(recordingId)));
    }

    private static Object value(final Callable<?> call)
    {
        try
        {
            return call.call();
        }
        catch (final PeerTimeoutException ex)
        {
            throw ex;
        }
        catch (final Exception ex)
        {
            return errorJson(ex);
        }
    }

    private Json listRecordings(final long fromId, final int count)
    {
        final Descriptor.Collector collector = new Descriptor.Collector();
        return descriptors(archive.listRecordings(fromId, count, collector), collector);
    }

    private Json listRecordingsForUri(final long fromId, final int count, final String fragment, final int streamId)
    {
        final Descriptor.Collector collector = new Descriptor.Collector();
        return descriptors(archive.listRecordingsForUri(fromId, count, fragment, streamId, collector), collector);
    }

    private Json listRecording(final long recordingId)
    {
        final Descriptor.Collector collector = new Descriptor.Collector();
        return descriptors(archive.listRecording(recordingId, collector), collector);
    }

    private static Json descriptors(final int count, final Descriptor.Collector collector)
    {
        final List<Json> list = new ArrayList<>();
        for (final Descriptor d : collector.descriptors)
        {
            list.add(d.toJson("descriptor"));
        }
        return Json.object().put("count", count).put("descriptors", list);
    }

    // -----------------------------------------------------------------------------------------
    // Reading replays

    private static final class ReplayRead
    {
        final MessageDigest digest = Payloads.newDigest();
        long messages;
        long firstIndex = -1;
        long lastIndex = -1;
        final FragmentAssembler handler = new FragmentAssembler((buffer, offset, length, header) ->
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
                    deadline.pause("replay to reach position " + endPosition + " (at " + image.position() + ")");
                }
            }
        }

        Json toJson()
        {
            return Json.object()
                .put("messages", messages)
                .put("firstIndex", firstIndex)
                .put("lastIndex", lastIndex)
                .put("digest", Payloads.hex(digest.digest()));
        }
    }

    private Image awaitImage(final Subscription subscription, final String what)
    {
        while (subscription.imageCount() == 0)
        {
            deadline.pause(what);
        }
        return subscription.imageAtIndex(0);
    }

    private Json replay(
        final long recordingId, final long position, final long length, final String channel, final int streamId,
        final long endPosition)
    {
        final ReplayRead read = new ReplayRead();
        try (Subscription subscription = archive.replay(recordingId, position, length, channel, streamId))
        {
            final Image image = awaitImage(subscription, "the replay image on " + channel);
            final long joinPosition = image.joinPosition();
            read.readUntil(image, endPosition, deadline);
            return read.toJson()
                .put("replaySessionId", image.sessionId())
                .put("joinPosition", joinPosition)
                .put("lastPosition", image.position());
        }
    }

    /**
     * Replays recording 2 from 0 with length Long.MAX_VALUE while it is recorded: reads the 100
     * messages there, publishes 50 more and reads them, stops the recording and reads until the
     * replay image ends.
     */
    private Json followLive(
        final ExclusivePublication publication, final String recordingChannel, final int streamId, final int size,
        final int frame)
    {
        final ReplayRead read = new ReplayRead();
        try (Subscription subscription = archive.replay(2, 0, Long.MAX_VALUE, replayChannel, replayStreamId))
        {
            final Image image = awaitImage(subscription, "the live replay image");
            read.readUntil(image, 100L * frame, deadline);
            final long caughtUp = image.position();
            final Json more = publish(publication, 2, 50, size, 100);
            read.readUntil(image, 150L * frame, deadline);
            archive.stopRecording(recordingChannel, streamId);
            final long stopped = awaitStopped(2);
            final long waitUntil = System.nanoTime() + 2_000_000_000L;
            while (!image.isEndOfStream() && !image.isClosed() && System.nanoTime() < waitUntil)
            {
                image.poll(read.handler, 16);
                deadline.pause("the live replay to end after the recording stopped");
            }
            return read.toJson()
                .put("joinPosition", image.joinPosition())
                .put("caughtUp", caughtUp)
                .put("published", more)
                .put("stopped", stopped)
                .put("lastPosition", image.position())
                .put("ended", image.isEndOfStream() || image.isClosed());
        }
    }
}
