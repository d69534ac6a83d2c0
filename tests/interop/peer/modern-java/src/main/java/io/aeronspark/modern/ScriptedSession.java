package io.aeronspark.modern;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ArchiveException;
import io.aeron.archive.client.ReplayParams;
import io.aeron.archive.codecs.SourceLocation;
import org.agrona.CloseHelper;

/**
 * {@code scripted-session}: ONE {@link AeronArchive} connection that runs a fixed script of requests
 * (recording, listing, positions, replays, stopping, truncate, purge, segment operations, extend,
 * replay control and many malformed requests) and prints one {@code "step"} JSON line per step with
 * every returned value, or the step's error (exception class, {@code ArchiveException.errorCode()},
 * message). The recording signals the client saw come last, one {@code "signal"} line each.
 *
 * <p>Everything an archive could otherwise choose differently is pinned by the script: the
 * publications' session ids, initial term ids, term length and MTU, so two fresh archives given the
 * same script must answer the same (the differential test compares them field by field).
 *
 * <p>Options: {@code --channel C} (a UDP endpoint channel the archive records, e.g.
 * {@code aeron:udp?endpoint=localhost:P}), {@code --channel-b C2} (a second one),
 * {@code --stream-id N}, {@code --messages K}, {@code --size B} (one frame each; the framed length
 * must divide the 64 KiB term, e.g. 96 B: then message {@code i} is at {@code i * framed}),
 * {@code --replay-channel R --replay-stream-id N}, {@code --session-id S} (the first publication's
 * session id; the others use S+1 ... S+5), {@code --timeout-ms}, {@code --with-unanswered} (two more
 * steps the Java archive never answers, each costing the client's message timeout).
 */
final class ScriptedSession
{
    static final int TERM_LENGTH = 64 * 1024;
    static final int MTU = 1408;
    static final int INITIAL_TERM_ID = 7;
    static final long UNKNOWN_ID = 987_654;

    private final AeronArchive archive;
    private final ArchiveConnection connection;
    private final Deadline deadline;
    private final List<Json> signals = new ArrayList<>();
    private int stepNumber;
    private String replayChannel;
    private int replayStreamId;
    private boolean withUnanswered;

    private ScriptedSession(final ArchiveConnection connection, final AeronArchive archive, final Deadline deadline)
    {
        this.connection = connection;
        this.archive = archive;
        this.deadline = deadline;
    }

    /*
     * Only with --with-unanswered, because the Java 1.51 archive sends NO response and the client waits
     * for its 5 s message timeout: ListRecordings with count 0, and a replay channel "aeron:udp?endpoint"
     * (the URI parse error escapes the request handler). See docs/interop.md.
     */

    static int run(final Options options)
    {
        final String channelA = options.requiredString("channel");
        final String channelB = options.requiredString("channel-b");
        final int streamId = options.requiredInt("stream-id");
        final int messages = options.nonNegativeInt("messages");
        final int size = options.nonNegativeInt("size");
        final String replayChannel = options.requiredString("replay-channel");
        final int replayStreamId = options.requiredInt("replay-stream-id");
        final int sessionId = options.requiredInt("session-id");
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 60_000));

        final ArchiveConnection connection = ArchiveConnection.open(options, false);
        AeronArchive archive = null;
        try
        {
            final List<Json> signals = new ArrayList<>();
            final long connectNs = System.nanoTime();
            archive = AeronArchive.connect(ArchiveConnection.archiveContext(options, connection.aeron)
                .recordingSignalConsumer((controlSessionId, correlationId, recordingId, subscriptionId, position,
                    signal) -> signals.add(Json.object()
                    .put("recordingId", recordingId)
                    .put("subscriptionId", subscriptionId)
                    .put("position", position)
                    .put("signal", signal.name()))));
            final ScriptedSession session = new ScriptedSession(connection, archive, deadline);
            session.withUnanswered = options.flag("with-unanswered");
            session.signals.addAll(signals);
            signals.clear();
            final AeronArchive connected = archive;
            session.emit("connect", null, Json.object()
                .put("archiveIdPresent", connected.archiveId() != io.aeron.Aeron.NULL_VALUE)
                .put("archiveId", connected.archiveId())
                .put("controlSessionId", connected.controlSessionId())
                .put("archiveProtocolVersion", connected.controlResponsePoller().version())
                .put("connectMs", (System.nanoTime() - connectNs) / 1_000_000.0),
                (System.nanoTime() - connectNs) / 1_000_000.0);
            session.script(channelA, channelB, streamId, messages, size, replayChannel, replayStreamId, sessionId,
                signals);
        }
        finally
        {
            CloseHelper.quietClose(archive);
            connection.close();
        }
        return ModernPeer.EXIT_OK;
    }

    // -----------------------------------------------------------------------------------------

    private void script(
        final String channelA, final String channelB, final int streamId, final int messages, final int size,
        final String replayChannel, final int replayStreamId, final int sessionId, final List<Json> sink)
    {
        final int frame = framedLength(size);
        final String recordA = channelA + "|session-id=" + sessionId;
        final String recordB = channelB + "|session-id=" + (sessionId + 1);
        final String ipc = "aeron:ipc?session-id=" + (sessionId + 2);
        final long end = (long)messages * frame;
        this.replayChannel = replayChannel;
        this.replayStreamId = replayStreamId;

        final long[] subA = {-1};
        final long[] subIpc = {-1};
        step("start-recording-udp", sink, () -> Json.object()
            .put("subscriptionId", subA[0] = archive.startRecording(recordA, streamId, SourceLocation.REMOTE)));
        step("start-recording-ipc", sink, () -> Json.object()
            .put("subscriptionId", subIpc[0] = archive.startRecording(ipc, streamId + 1, SourceLocation.LOCAL)));
        step("start-recording-duplicate", sink, () -> Json.object()
            .put("subscriptionId", archive.startRecording(recordA, streamId, SourceLocation.REMOTE)));

        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelA, sessionId, 0), streamId))
        {
            step("publish-a", sink, () -> publish(publication, 0, messages, size, 0));
            step("list-recordings-active", sink, () -> descriptors(archive.listRecordings(0, 10, collect())));
            step("positions-active", sink, () -> positions(0));
            step("truncate-active", sink, () -> Json.object().put("result", archive.truncateRecording(0, 0)));
            step("purge-active", sink, () -> Json.object().put("result", archive.purgeRecording(0)));
            step("detach-active", sink, () -> { archive.detachSegments(0, 0); return Json.object(); });
            step("extend-active", sink, () -> Json.object()
                .put("subscriptionId", archive.extendRecording(0, recordA, streamId, SourceLocation.REMOTE)));
            step("list-recording-subscriptions-all", sink, () -> subscriptions(0, 10, "", streamId, false));
            step("list-recording-subscriptions-ipc", sink, () -> subscriptions(0, 10, "aeron:ipc", streamId + 1, true));
            step("list-recording-subscriptions-other-stream", sink,
                () -> subscriptions(0, 10, "", streamId + 5, true));
            step("list-recording-subscriptions-pseudo-index", sink, () -> subscriptions(1, 10, "", streamId, false));
            step("stop-recording-by-subscription", sink, () ->
            {
                archive.stopRecording(subA[0]);
                return Json.object().put("stopped", awaitStopped(0));
            });
            step("stop-recording-ipc-by-channel", sink, () ->
            {
                archive.stopRecording(ipc, streamId + 1);
                return Json.object();
            });
            step("stop-recording-unknown-channel", sink, () ->
            {
                archive.stopRecording(ipc, streamId + 1);
                return Json.object();
            });
            step("try-stop-recording-unknown-channel", sink, () -> Json.object()
                .put("result", archive.tryStopRecording(ipc, streamId + 1)));
            step("stop-recording-unknown-subscription", sink, () ->
            {
                archive.stopRecording(UNKNOWN_ID);
                return Json.object();
            });
            step("try-stop-recording-unknown-subscription", sink, () -> Json.object()
                .put("result", archive.tryStopRecording(UNKNOWN_ID)));
            step("try-stop-recording-by-identity-stopped", sink, () -> Json.object()
                .put("result", archive.tryStopRecordingByIdentity(0)));
        }

        step("list-recordings", sink, () -> descriptors(archive.listRecordings(0, 10, collect())));
        step("list-recordings-from-1", sink, () -> descriptors(archive.listRecordings(1, 10, collect())));
        step("list-recordings-for-uri", sink,
            () -> descriptors(archive.listRecordingsForUri(0, 10, "localhost", streamId, collect())));
        step("list-recordings-for-uri-other-stream", sink,
            () -> descriptors(archive.listRecordingsForUri(0, 10, "localhost", streamId + 9, collect())));
        step("list-recordings-for-uri-no-match", sink,
            () -> descriptors(archive.listRecordingsForUri(0, 10, "aeron:ipc", streamId, collect())));
        step("list-recording", sink, () -> descriptors(archive.listRecording(0, collect())));
        step("list-recording-unknown", sink, () -> descriptors(archive.listRecording(UNKNOWN_ID, collect())));
        step("list-recording-negative", sink, () -> descriptors(archive.listRecording(-5, collect())));
        step("find-last-matching", sink, () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "localhost", streamId, sessionId)));
        step("find-last-matching-other-session", sink, () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "localhost", streamId, sessionId + 50)));
        step("find-last-matching-past-end", sink, () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(UNKNOWN_ID, "localhost", streamId, sessionId)));
        step("find-last-matching-negative", sink, () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(-3, "localhost", streamId, sessionId)));
        step("positions-stopped", sink, () -> positions(0));

        // Replays of recording 0 (stopped)
        step("replay-whole", sink, () -> replay(0, 0, end, replayChannel, replayStreamId, end));
        final long middle = (long)(messages / 2) * frame;
        step("replay-from-middle", sink, () -> replay(0, middle, end - middle, replayChannel, replayStreamId, end));
        step("replay-bounded-length", sink,
            () -> replay(0, 10L * frame, 25L * frame, replayChannel, replayStreamId, 35L * frame));
        step("replay-length-max", sink,
            () -> replay(0, 0, Long.MAX_VALUE, replayChannel, replayStreamId, end));
        step("replay-length-null", sink,
            () -> replay(0, 0, AeronArchive.NULL_LENGTH, replayChannel, replayStreamId, end));
        step("replay-position-null", sink,
            () -> replay(0, AeronArchive.NULL_POSITION, 5L * frame, replayChannel, replayStreamId, 5L * frame));
        step("replay-unknown-recording", sink,
            () -> Json.object().put("replaySessionId", startAndStop(UNKNOWN_ID, 0, end, replayChannel, replayStreamId)));
        step("replay-unaligned-position", sink,
            () -> Json.object().put("replaySessionId", startAndStop(0, 13, frame, replayChannel, replayStreamId)));
        step("replay-position-past-end", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(0, end + frame, frame, replayChannel, replayStreamId)));
        step("replay-at-stop", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(0, end, frame, replayChannel, replayStreamId)));
        step("replay-position-before-start", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(0, -2L * frame, frame, replayChannel, replayStreamId)));
        step("replay-length-past-end", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(0, 0, end + 10L * frame, replayChannel, replayStreamId)));
        step("replay-unknown-media", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(0, 0, frame, "aeron:xyz?endpoint=localhost:1", replayStreamId)));
        step("bounded-replay-unknown-counter", sink, () -> Json.object().put("replaySessionId",
            startAndStopBounded(0, 0, end, 999_999, replayChannel, replayStreamId)));
        step("stop-replay-running", sink, () ->
        {
            final long replaySessionId = archive.startReplay(0, 0, Long.MAX_VALUE, replayChannel, replayStreamId);
            archive.stopReplay(replaySessionId);
            return Json.object().put("replaySessionId", replaySessionId);
        });
        step("stop-replay-unknown", sink, () ->
        {
            archive.stopReplay(UNKNOWN_ID);
            return Json.object();
        });
        step("stop-all-replays-recording", sink, () ->
        {
            archive.startReplay(0, 0, Long.MAX_VALUE, replayChannel, replayStreamId);
            archive.stopAllReplays(0);
            return Json.object();
        });
        step("stop-all-replays-any", sink, () ->
        {
            archive.stopAllReplays(io.aeron.Aeron.NULL_VALUE);
            return Json.object();
        });
        step("stop-all-replays-unknown", sink, () ->
        {
            archive.stopAllReplays(UNKNOWN_ID);
            return Json.object();
        });

        // Bad channels for recording
        step("start-recording-malformed-channel", sink, () -> Json.object()
            .put("subscriptionId", archive.startRecording("aeron:udp?endpoint", streamId, SourceLocation.REMOTE)));
        step("start-recording-unknown-media", sink, () -> Json.object().put("subscriptionId",
            archive.startRecording("aeron:xyz?endpoint=localhost:1", streamId, SourceLocation.REMOTE)));
        step("start-recording-not-a-uri", sink, () -> Json.object()
            .put("subscriptionId", archive.startRecording("not-a-uri", streamId, SourceLocation.REMOTE)));

        // Recording 1, stopped by identity while active
        final long endB = 300L * frame;
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelB, sessionId + 1, 0), streamId))
        {
            final long[] subB = {-1};
            step("start-recording-b", sink, () -> Json.object()
                .put("subscriptionId", subB[0] = archive.startRecording(recordB, streamId, SourceLocation.REMOTE)));
            step("publish-b", sink, () -> publish(publication, 1, 300, size, 0));
            step("try-stop-recording-by-identity-active", sink, () -> Json.object()
                .put("result", archive.tryStopRecordingByIdentity(1))
                .put("stopped", awaitStopped(1)));
            step("stop-recording-b-subscription-after-identity", sink, () ->
            {
                archive.stopRecording(subB[0]);
                return Json.object();
            });
        }
        step("try-stop-recording-by-identity-unknown", sink, () -> Json.object()
            .put("result", archive.tryStopRecordingByIdentity(UNKNOWN_ID)));

        // Extend recording 1 with 100 more messages (a new session: the old publication may still linger)
        final String extendB = channelB + "|session-id=" + (sessionId + 3);
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelB, sessionId + 3, endB), streamId))
        {
            step("extend", sink, () -> Json.object()
                .put("subscriptionId", archive.extendRecording(1, extendB, streamId, SourceLocation.REMOTE)));
            step("publish-extension", sink, () -> publish(publication, 1, 100, size, 300));
            step("extend-duplicate", sink, () -> Json.object()
                .put("subscriptionId", archive.extendRecording(1, extendB, streamId, SourceLocation.REMOTE)));
            step("stop-extension", sink, () ->
            {
                archive.stopRecording(extendB, streamId);
                return Json.object().put("stopped", awaitStopped(1));
            });
        }
        step("extend-unknown", sink, () -> Json.object()
            .put("subscriptionId", archive.extendRecording(UNKNOWN_ID, extendB, streamId, SourceLocation.REMOTE)));
        step("extend-other-stream", sink, () -> Json.object()
            .put("subscriptionId", archive.extendRecording(1, extendB, streamId + 3, SourceLocation.REMOTE)));
        step("list-recording-extended", sink, () -> descriptors(archive.listRecording(1, collect())));
        step("positions-extended", sink, () -> positions(1));
        step("replay-extended", sink, () -> replay(1, 0, 400L * frame, replayChannel, replayStreamId, 400L * frame));

        // Truncate recording 1
        step("truncate-unaligned", sink, () -> Json.object().put("result", archive.truncateRecording(1, 100)));
        step("truncate-past-end", sink, () -> Json.object()
            .put("result", archive.truncateRecording(1, 401L * frame)));
        step("truncate-negative", sink, () -> Json.object().put("result", archive.truncateRecording(1, -32)));
        step("truncate-unknown", sink, () -> Json.object().put("result", archive.truncateRecording(UNKNOWN_ID, 0)));
        step("truncate", sink, () -> Json.object().put("result", archive.truncateRecording(1, 200L * frame)));
        step("positions-truncated", sink, () -> positions(1));
        step("truncate-at-stop", sink, () -> Json.object().put("result", archive.truncateRecording(1, 200L * frame)));
        step("replay-truncated", sink, () -> replay(1, 0, 200L * frame, replayChannel, replayStreamId, 200L * frame));

        // Segment operations on recording 0 (64 KiB segments)
        final long segment = TERM_LENGTH;
        step("detach-unaligned", sink, () -> { archive.detachSegments(0, segment + frame); return positions(0); });
        step("detach-past-end", sink, () -> { archive.detachSegments(0, 100L * segment); return positions(0); });
        step("detach-unknown", sink, () -> { archive.detachSegments(UNKNOWN_ID, segment); return Json.object(); });
        step("detach-one", sink, () -> { archive.detachSegments(0, segment); return positions(0); });
        step("attach", sink, () -> Json.object().put("count", archive.attachSegments(0)).put("positions", positions(0)));
        step("attach-nothing", sink, () -> Json.object().put("count", archive.attachSegments(0)));
        step("attach-unknown", sink, () -> Json.object().put("count", archive.attachSegments(UNKNOWN_ID)));
        step("detach-two", sink, () -> { archive.detachSegments(0, 2 * segment); return positions(0); });
        step("delete-detached", sink, () -> Json.object().put("count", archive.deleteDetachedSegments(0)));
        step("delete-detached-unknown", sink, () -> Json.object()
            .put("count", archive.deleteDetachedSegments(UNKNOWN_ID)));
        step("attach-after-delete", sink, () -> Json.object().put("count", archive.attachSegments(0)));
        step("purge-segments-unaligned", sink, () -> Json.object()
            .put("count", archive.purgeSegments(0, 3 * segment + frame)));
        step("purge-segments-unknown", sink, () -> Json.object()
            .put("count", archive.purgeSegments(UNKNOWN_ID, 3 * segment)));
        step("purge-segments", sink, () -> Json.object()
            .put("count", archive.purgeSegments(0, 3 * segment)).put("positions", positions(0)));
        step("replay-after-segments", sink, () -> replay(0, 3 * segment, end - 3 * segment, replayChannel,
            replayStreamId, end));
        step("replay-before-new-start", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(0, 0, frame, replayChannel, replayStreamId)));
        step("migrate-unknown-source", sink, () -> Json.object()
            .put("count", archive.migrateSegments(UNKNOWN_ID, 0)));
        step("migrate-unknown-destination", sink, () -> Json.object()
            .put("count", archive.migrateSegments(1, UNKNOWN_ID)));
        step("migrate-not-adjacent", sink, () -> Json.object().put("count", archive.migrateSegments(1, 0)));

        // Migrate: recording 2 holds exactly one segment [0, 64 KiB), recording 3 continues it from 64 KiB
        final int migrateStream = streamId + 10;
        final int perSegment = (int)(segment / frame);
        final String recordC = channelB + "|session-id=" + (sessionId + 4);
        final String recordD = channelB + "|session-id=" + (sessionId + 5);
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelB, sessionId + 4, 0), migrateStream))
        {
            step("start-recording-c", sink, () -> Json.object()
                .put("subscriptionId", archive.startRecording(recordC, migrateStream, SourceLocation.REMOTE)));
            step("publish-c", sink, () -> publish(publication, 2, perSegment, size, 0));
            step("stop-recording-c", sink, () ->
            {
                archive.stopRecording(recordC, migrateStream);
                return Json.object().put("stopped", awaitStopped(2));
            });
        }
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelB, sessionId + 5, segment), migrateStream))
        {
            step("start-recording-d", sink, () -> Json.object()
                .put("subscriptionId", archive.startRecording(recordD, migrateStream, SourceLocation.REMOTE)));
            step("publish-d", sink, () -> publish(publication, 3, 100, size, perSegment));
            step("migrate-active-source", sink, () -> Json.object().put("count", archive.migrateSegments(3, 2)));
            step("stop-recording-d", sink, () ->
            {
                archive.stopRecording(recordD, migrateStream);
                return Json.object().put("stopped", awaitStopped(3));
            });
        }
        step("migrate-other-stream", sink, () -> Json.object().put("count", archive.migrateSegments(2, 0)));
        step("migrate", sink, () -> Json.object().put("count", archive.migrateSegments(2, 3))
            .put("source", positions(2)).put("destination", positions(3)));
        step("list-migrated", sink, () -> descriptors(archive.listRecordings(2, 10, collect())));
        step("replay-migrated", sink, () -> replay(3, 0, segment + 100L * frame, replayChannel, replayStreamId,
            segment + 100L * frame));
        step("replay-migrated-source", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(2, 0, frame, replayChannel, replayStreamId)));

        // Recording 4: a replay that follows the live recording until it stops
        final int liveStream = streamId + 20;
        final String recordE = channelB + "|session-id=" + (sessionId + 6);
        try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
            pinned(channelB, sessionId + 6, 0), liveStream))
        {
            step("start-recording-live", sink, () -> Json.object()
                .put("subscriptionId", archive.startRecording(recordE, liveStream, SourceLocation.REMOTE)));
            step("publish-live", sink, () -> publish(publication, 4, 100, size, 0));
            step("replay-follows-live", sink, () -> followLive(publication, recordE, liveStream, size, frame));
        }

        // Recording 5: auto-stop when the publication goes away
        final int autoStream = streamId + 30;
        final String recordF = channelB + "|session-id=" + (sessionId + 7);
        step("start-recording-auto-stop", sink, () -> Json.object()
            .put("subscriptionId", archive.startRecording(recordF, autoStream, SourceLocation.REMOTE, true)));
        step("publish-auto-stop", sink, () ->
        {
            try (ExclusivePublication publication = connection.aeron.addExclusivePublication(
                pinned(channelB, sessionId + 7, 0) + "|linger=0", autoStream))
            {
                return publish(publication, 5, 10, size, 0);
            }
        });
        step("auto-stopped", sink, () -> Json.object().put("stopped", awaitStopped(5))
            .put("subscriptions", subscriptions(0, 10, "", autoStream, true)));
        step("list-recordings-page", sink, () -> descriptors(archive.listRecordings(1, 2, collect())));
        step("list-recordings-for-uri-page", sink,
            () -> descriptors(archive.listRecordingsForUri(1, 1, "localhost", streamId, collect())));
        step("list-recordings-negative-from", sink, () -> descriptors(archive.listRecordings(-7, 3, collect())));
        step("find-last-matching-any-session", sink, () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "localhost", streamId, io.aeron.Aeron.NULL_VALUE)));
        step("find-last-matching-no-channel", sink, () -> Json.object()
            .put("recordingId", archive.findLastMatchingRecording(0, "aeron:ipc", streamId, sessionId)));

        // Maintenance while a replay is in progress (started towards a channel nobody reads, so it
        // waits for a subscriber until stopped)
        step("truncate-at-segment-base", sink, () -> Json.object()
            .put("result", archive.truncateRecording(3, segment)).put("positions", positions(3)));
        step("detach-during-replay", sink, () -> duringReplay(3, 0, () ->
        {
            archive.detachSegments(3, segment);
            return archive.getStartPosition(3);
        }));
        step("purge-during-replay", sink, () -> duringReplay(0, 3 * segment, () -> archive.purgeRecording(0)));
        step("truncate-during-replay", sink, () -> duringReplay(0, 3 * segment,
            () -> archive.truncateRecording(0, 3 * segment + 10L * frame)));
        step("truncate-to-start", sink, () -> Json.object()
            .put("result", archive.truncateRecording(0, 3 * segment)).put("positions", positions(0)));

        // Bad recording ids for the position queries
        step("start-position-unknown", sink, () -> Json.object()
            .put("position", archive.getStartPosition(UNKNOWN_ID)));
        step("stop-position-unknown", sink, () -> Json.object().put("position", archive.getStopPosition(UNKNOWN_ID)));
        step("recording-position-unknown", sink, () -> Json.object()
            .put("position", archive.getRecordingPosition(UNKNOWN_ID)));
        step("max-recorded-position-unknown", sink, () -> Json.object()
            .put("position", archive.getMaxRecordedPosition(UNKNOWN_ID)));
        step("start-position-negative", sink, () -> Json.object().put("position", archive.getStartPosition(-1)));

        // Purge
        step("purge-unknown", sink, () -> Json.object().put("result", archive.purgeRecording(UNKNOWN_ID)));
        step("purge", sink, () -> Json.object().put("result", archive.purgeRecording(1)));
        step("list-after-purge", sink, () -> descriptors(archive.listRecordings(0, 10, collect())));
        step("purge-again", sink, () -> Json.object().put("result", archive.purgeRecording(1)));
        step("replay-purged", sink, () -> Json.object()
            .put("replaySessionId", startAndStop(1, 0, frame, replayChannel, replayStreamId)));
        step("positions-purged", sink, () -> positions(1));

        if (withUnanswered)
        {
            // The Java archive answers neither (the client times out after its message timeout).
            step("list-recordings-count-0", sink, () -> descriptors(archive.listRecordings(0, 0, collect())));
            step("replay-malformed-channel", sink, () -> Json.object()
                .put("replaySessionId", startAndStop(0, 196608, frame, "aeron:udp?endpoint", replayStreamId)));
        }

        pollSignals(sink, 200);
        for (final Json signal : signals)
        {
            Json.event("signal").put("signal", signal).emit();
        }
        Json.event("script-done").put("steps", stepNumber).put("signals", signals.size()).emit();
    }

    // -----------------------------------------------------------------------------------------

    private void step(final String name, final List<Json> sink, final Callable<Json> action)
    {
        Json result = null;
        Json error = null;
        final long startNs = System.nanoTime();
        try
        {
            result = action.call();
        }
        catch (final ArchiveException ex)
        {
            error = Json.object()
                .put("exception", ex.getClass().getName())
                .put("code", ex.errorCode())
                .put("codeName", ArchiveException.errorCodeAsString(ex.errorCode()))
                .put("message", String.valueOf(ex.getMessage()));
        }
        catch (final PeerTimeoutException ex)
        {
            throw ex;
        }
        catch (final Exception ex)
        {
            error = Json.object()
                .put("exception", ex.getClass().getName())
                .put("code", null)
                .put("codeName", null)
                .put("message", String.valueOf(ex.getMessage()));
        }
        pollSignalsOnce();
        signals.addAll(sink);
        sink.clear();
        emit(name, error, result, (System.nanoTime() - startNs) / 1_000_000.0);
    }

    /** Signals, and errors the archive sends for no request of ours (e.g. a replay that failed later). */
    private void pollSignalsOnce()
    {
        try
        {
            archive.pollForRecordingSignals();
        }
        catch (final ArchiveException ex)
        {
            Json.event("async-error").put("afterStep", stepNumber).put("code", ex.errorCode())
                .put("message", String.valueOf(ex.getMessage())).emit();
        }
    }

    /** Starts a replay nobody reads and, if the archive accepted it, stops it at once. */
    private long startAndStop(
        final long recordingId, final long position, final long length, final String channel, final int streamId)
    {
        final long replaySessionId = archive.startReplay(recordingId, position, length, channel, streamId);
        archive.stopReplay(replaySessionId);
        return replaySessionId;
    }

    private long startAndStopBounded(
        final long recordingId, final long position, final long length, final int counterId, final String channel,
        final int streamId)
    {
        final long replaySessionId = archive.startBoundedReplay(
            recordingId, position, length, counterId, channel, streamId);
        archive.stopReplay(replaySessionId);
        return replaySessionId;
    }

    private void emit(final String name, final Json error, final Json result, final double ms)
    {
        Json.event("step").put("index", stepNumber++).put("step", name).put("ok", error == null)
            .put("result", result).put("error", error).put("ms", ms).emit();
    }

    private void pollSignals(final List<Json> sink, final long millis)
    {
        final long until = System.nanoTime() + millis * 1_000_000L;
        while (System.nanoTime() < until)
        {
            pollSignalsOnce();
            ClientCommands.sleep(5);
        }
        signals.addAll(sink);
        sink.clear();
    }

    /** A publication whose session id, initial term id, term length and MTU are pinned; starts at {@code position}. */
    static String pinned(final String channel, final int sessionId, final long position)
    {
        final io.aeron.ChannelUri uri = io.aeron.ChannelUri.parse(channel);
        uri.put("session-id", Integer.toString(sessionId));
        uri.put("mtu", Integer.toString(MTU));
        uri.initialPosition(position, INITIAL_TERM_ID, TERM_LENGTH);
        return uri.toString();
    }

    static int framedLength(final int size)
    {
        return (size + 32 + 31) & ~31;
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
        // A connected publication does not mean the archive has added the recording yet (both
        // archives start it asynchronously, on the image): until then its id is unknown.
        while (Descriptor.find(archive, recordingId) == null)
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
            final Descriptor descriptor = Descriptor.find(archive, recordingId);
            if (descriptor != null && descriptor.stopPosition() != AeronArchive.NULL_POSITION)
            {
                return descriptor.stopPosition();
            }
            deadline.pause("recording " + recordingId + " to stop");
        }
    }

    private Json positions(final long recordingId)
    {
        return Json.object()
            .put("start", value(() -> archive.getStartPosition(recordingId)))
            .put("stop", value(() -> archive.getStopPosition(recordingId)))
            .put("recording", value(() -> archive.getRecordingPosition(recordingId)))
            .put("maxRecorded", value(() -> archive.getMaxRecordedPosition(recordingId)));
    }

    /**
     * Replays recording 4 from 0 with no length while it is recorded: reads the 100 messages there,
     * publishes 50 more and reads them, stops the recording and reads until the replay ends.
     */
    private Json followLive(
        final ExclusivePublication publication, final String recordingChannel, final int streamId, final int size,
        final int frame)
    {
        final ClientCommands.ReplayRead read = new ClientCommands.ReplayRead();
        final ReplayParams params = new ReplayParams().position(0).length(AeronArchive.NULL_LENGTH);
        try (Subscription subscription = archive.replay(4, replayChannel, replayStreamId, params))
        {
            final Image image = ClientCommands.awaitImage(subscription, deadline, "the live replay image");
            read.readUntil(image, 100L * frame, deadline);
            final long caughtUp = image.position();
            final Json more = publish(publication, 4, 50, size, 100);
            read.readUntil(image, 150L * frame, deadline);
            archive.stopRecording(recordingChannel, streamId);
            final long stopped = awaitStopped(4);
            while (!image.isEndOfStream() && !image.isClosed())
            {
                image.poll(read.handler, 16);
                deadline.pause("the live replay to end after the recording stopped");
            }
            return read.toJson("replayed")
                .put("joinPosition", image.joinPosition())
                .put("caughtUp", caughtUp)
                .put("published", more)
                .put("stopped", stopped)
                .put("lastPosition", image.position())
                .put("endOfStream", image.isEndOfStream());
        }
    }

    /**
     * Starts a replay of {@code recordingId} from {@code position} towards the replay channel with
     * nobody subscribed (it waits there), runs {@code action} while it is in progress, then stops the
     * replay; the result has what the action and the stop returned (or their error codes).
     */
    private Json duringReplay(final long recordingId, final long position, final Callable<?> action)
    {
        final long replaySessionId = archive.startReplay(recordingId, position, 32, replayChannel, replayStreamId);
        final Object result = value(action);
        final Object stopped = value(() ->
        {
            archive.stopReplay(replaySessionId);
            return "stopped";
        });
        return Json.object().put("replaySessionId", replaySessionId).put("action", result).put("stopReplay", stopped);
    }

    /** The value, or {"errorCode": code, "message": text} when the archive refused. */
    private static Object value(final Callable<?> call)
    {
        try
        {
            return call.call();
        }
        catch (final ArchiveException ex)
        {
            return Json.object().put("errorCode", ex.errorCode()).put("message", String.valueOf(ex.getMessage()));
        }
        catch (final Exception ex)
        {
            return Json.object().put("exception", ex.getClass().getName()).put("message", String.valueOf(ex.getMessage()));
        }
    }

    private final List<Descriptor> collected = new ArrayList<>();

    private io.aeron.archive.client.RecordingDescriptorConsumer collect()
    {
        collected.clear();
        return Descriptor.collector(collected);
    }

    private Json descriptors(final int count)
    {
        final List<Json> list = new ArrayList<>();
        for (final Descriptor d : collected)
        {
            final Json json = d.toJson("descriptor");
            list.add(json);
        }
        return Json.object().put("count", count).put("descriptors", list);
    }

    private Json subscriptions(
        final int pseudoIndex, final int count, final String channelFragment, final int streamId, final boolean apply)
    {
        final List<Json> list = new ArrayList<>();
        final int found = archive.listRecordingSubscriptions(pseudoIndex, count, channelFragment, streamId, apply,
            (controlSessionId, correlationId, subscriptionId, subStreamId, strippedChannel) -> list.add(Json.object()
                .put("subscriptionId", subscriptionId)
                .put("streamId", subStreamId)
                .put("strippedChannel", strippedChannel)));
        return Json.object().put("count", found).put("subscriptions", list);
    }

    private Json replay(
        final long recordingId, final long position, final long length, final String channel, final int streamId,
        final long endPosition)
    {
        final ReplayParams params = new ReplayParams().position(position).length(length);
        final ClientCommands.ReplayRead read = new ClientCommands.ReplayRead();
        try (Subscription subscription = archive.replay(recordingId, channel, streamId, params))
        {
            final Image image = ClientCommands.awaitImage(subscription, deadline, "the replay image on " + channel);
            final long joinPosition = image.joinPosition();
            read.readUntil(image, endPosition, deadline);
            return read.toJson("replayed")
                .put("replaySessionId", image.sessionId())
                .put("joinPosition", joinPosition)
                .put("lastPosition", image.position());
        }
    }
}
