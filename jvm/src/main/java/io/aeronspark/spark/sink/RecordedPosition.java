package io.aeronspark.spark.sink;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import io.aeron.Aeron;
import io.aeron.Publication;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.status.RecordingPos;
import io.aeronspark.spark.AeronConnections;
import org.agrona.concurrent.status.CountersReader;

/**
 * A commit's durability step: wait until the archive's recording of this JVM's session holds
 * every message up to a position. The archive's recording-position counter when the archive
 * shares this media driver, else the archive protocol (list the session's active recording once,
 * then RecordingPosition requests), which works for an archive behind another driver too.
 */
final class RecordedPosition {
    private static final long POLL_NS = TimeUnit.MILLISECONDS.toNanos(1);
    /** "aeron:" is in every channel: list the stream's recordings whatever their channel. */
    private static final String ANY_CHANNEL = "aeron:";
    private static final int LIST_LIMIT = 10_000;
    /** archive, stream and session -> the active recording of that session. */
    private static final Map<String, Long> RECORDINGS = new ConcurrentHashMap<>();

    private RecordedPosition() {
    }

    static void await(final SinkOptions options, final Publication publication, final long target) {
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(options.offerTimeoutMs);
        final Aeron aeron = AeronConnections.aeron(options.archive.aeronDir);
        final CountersReader counters = aeron.countersReader();
        final int sessionId = publication.sessionId();
        AeronArchive archive = SinkPublications.archive(options.archive);
        // The session's recording is found once per JVM: later commits ask only for its position.
        final String recordingKey = options.archive.describeEndpoint() + "|" + options.streamId + "|" + sessionId;
        long recordingId = RECORDINGS.getOrDefault(recordingKey, (long) Aeron.NULL_VALUE);
        long recorded = AeronArchive.NULL_POSITION;
        while (true) {
            try {
                final int counterId = RecordingPos.findCounterIdBySession(counters, sessionId, archive.archiveId());
                if (counterId != CountersReader.NULL_COUNTER_ID) {
                    recorded = counters.getCounterValue(counterId);
                } else {
                    if (recordingId == Aeron.NULL_VALUE) {
                        recordingId = activeRecording(archive, options.streamId, sessionId);
                        if (recordingId != Aeron.NULL_VALUE) {
                            RECORDINGS.put(recordingKey, recordingId);
                        }
                    }
                    if (recordingId != Aeron.NULL_VALUE) {
                        recorded = archive.getRecordingPosition(recordingId);
                        if (recorded == AeronArchive.NULL_POSITION) {
                            RECORDINGS.remove(recordingKey);
                            recordingId = Aeron.NULL_VALUE;  // it stopped: look again (a new one may follow)
                        }
                    }
                }
            } catch (RuntimeException error) {
                SinkPublications.discard(options.archive, archive);
                throw new IllegalStateException("format(\"aeron-archive-jvm\") sink: the commit could not ask the archive "
                    + "at " + options.archive.describeEndpoint() + " how far it recorded session " + sessionId + " of "
                    + options.describeStream() + ": " + error.getMessage(), error);
            }
            if (recorded >= target) {
                return;
            }
            if (System.nanoTime() - deadlineNs > 0) {
                throw new IllegalStateException("format(\"aeron-archive-jvm\") sink: the archive at "
                    + options.archive.describeEndpoint() + " did not record session " + sessionId + " of "
                    + options.describeStream() + " up to position " + target + " within " + SinkOptions.OFFER_TIMEOUT_MS
                    + "=" + options.offerTimeoutMs + " ms (" + (recordingId == Aeron.NULL_VALUE && recorded < 0
                    ? "no active recording of that session found" : "recorded up to " + recorded)
                    + "); the batch is not committed and will be written again");
            }
            LockSupport.parkNanos(POLL_NS);
            if (recorded < 0) {
                archive = SinkPublications.archive(options.archive);
            }
        }
    }

    private static long activeRecording(final AeronArchive archive, final int streamId, final int sessionId) {
        final long[] found = {Aeron.NULL_VALUE};
        archive.listRecordingsForUri(0, LIST_LIMIT, ANY_CHANNEL, streamId,
            (controlSessionId, correlationId, recordingId, startTimestamp, stopTimestamp, startPosition, stopPosition,
             initialTermId, segmentFileLength, termBufferLength, mtuLength, recordingSessionId, recordingStreamId,
             strippedChannel, originalChannel, sourceIdentity) -> {
                if (recordingSessionId == sessionId && stopPosition == AeronArchive.NULL_POSITION) {
                    found[0] = Math.max(found[0], recordingId);
                }
            });
        return found[0];
    }
}
