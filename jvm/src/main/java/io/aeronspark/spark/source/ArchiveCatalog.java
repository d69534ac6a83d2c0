package io.aeronspark.spark.source;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ArchiveException;
import io.aeronspark.spark.AeronConnections;

/**
 * The driver side's view of the archive: one control session for the query's life, the recordings
 * the selection matches (discovered incrementally, at most every discoveryIntervalMs), their
 * descriptors and latest positions.
 */
final class ArchiveCatalog implements AutoCloseable {
    private static final int LISTING_BATCH = 256;

    private final SourceOptions options;
    private AeronArchive archive;
    private final SortedMap<Long, RecordingInfo> known = new TreeMap<>();
    /** channel: the next recording id to list per stream id; channelPattern: of the one scan. */
    private final Map<Integer, Long> cursors = new TreeMap<>();
    private long scanCursor;
    private long lastDiscoveryMs = Long.MIN_VALUE / 2;

    ArchiveCatalog(final SourceOptions options) {
        this.options = options;
    }

    synchronized AeronArchive archive() {
        if (archive == null) {
            archive = AeronConnections.connectArchive(options.archive);
        }
        return archive;
    }

    /** The recordings the selection matches, listing the archive again once discoveryIntervalMs passed. */
    synchronized SortedMap<Long, RecordingInfo> recordings(final boolean force) {
        final long now = System.currentTimeMillis();
        if (force || now - lastDiscoveryMs >= options.discoveryIntervalMs) {
            lastDiscoveryMs = now;
            try {
                discover();
            } catch (RuntimeException error) {
                throw stopAware(error);
            }
        }
        return new TreeMap<>(known);
    }

    /**
     * Aeron's clients fail a call interrupted by query.stop() with "unexpected interrupt"; Spark
     * ends a query quietly only on an InterruptedException, so that is what the stream throws then.
     */
    static RuntimeException stopAware(final RuntimeException error) {
        if (Thread.currentThread().isInterrupted() || String.valueOf(error.getMessage()).contains("unexpected interrupt")) {
            final InterruptedException interrupted = new InterruptedException("aeron-archive-jvm source: stopped during "
                + "an archive request (" + error.getMessage() + ")");
            interrupted.initCause(error);
            throw AeronArchiveCatalogSneaky.<RuntimeException>sneaky(interrupted);
        }
        return error;
    }

    /** Throws a checked exception where the interface declares none (Spark's own stop handling expects it). */
    static final class AeronArchiveCatalogSneaky {
        private AeronArchiveCatalogSneaky() {
        }

        @SuppressWarnings("unchecked")
        static <T extends Throwable> RuntimeException sneaky(final Throwable error) throws T {
            throw (T) error;
        }
    }

    private void discover() {
        final AeronArchive client = archive();
        if (options.recordingIds != null) {
            for (long recordingId : options.recordingIds) {
                if (!known.containsKey(recordingId)) {
                    final RecordingInfo info = describe(recordingId);
                    if (info != null) {
                        known.put(recordingId, info);
                    }
                }
            }
            return;
        }
        if (options.channel != null) {
            for (int streamId : options.streamIds) {
                long cursor = cursors.getOrDefault(streamId, 0L);
                while (true) {
                    final List<RecordingInfo> listed = new ArrayList<>();
                    final int count = client.listRecordingsForUri(cursor, LISTING_BATCH, options.channel, streamId,
                        (controlSessionId, correlationId, recordingId, startTimestamp, stopTimestamp, startPosition,
                         stopPosition, initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId,
                         stream, strippedChannel, originalChannel, sourceIdentity) ->
                            listed.add(new RecordingInfo(recordingId, startPosition, stopPosition, termBufferLength,
                                sessionId, stream, strippedChannel, originalChannel)));
                    for (RecordingInfo info : listed) {
                        known.put(info.recordingId, info);
                        cursor = Math.max(cursor, info.recordingId + 1);
                    }
                    if (count < LISTING_BATCH) {
                        break;
                    }
                }
                cursors.put(streamId, cursor);
            }
            return;
        }
        while (true) {  // channelPattern: the archive cannot match a regex; list what is new, filter here
            final List<RecordingInfo> listed = new ArrayList<>();
            final int count = client.listRecordings(scanCursor, LISTING_BATCH,
                (controlSessionId, correlationId, recordingId, startTimestamp, stopTimestamp, startPosition,
                 stopPosition, initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId,
                 stream, strippedChannel, originalChannel, sourceIdentity) ->
                    listed.add(new RecordingInfo(recordingId, startPosition, stopPosition, termBufferLength,
                        sessionId, stream, strippedChannel, originalChannel)));
            for (RecordingInfo info : listed) {
                scanCursor = Math.max(scanCursor, info.recordingId + 1);
                if (options.matches(info)) {
                    known.put(info.recordingId, info);
                }
            }
            if (count < LISTING_BATCH) {
                break;
            }
        }
    }

    /** A recording's descriptor now, or null when the archive no longer has it. */
    synchronized RecordingInfo describe(final long recordingId) {
        try {
            return describeNow(recordingId);
        } catch (RuntimeException error) {
            throw stopAware(error);
        }
    }

    private RecordingInfo describeNow(final long recordingId) {
        final RecordingInfo[] found = new RecordingInfo[1];
        final int count = archive().listRecording(recordingId,
            (controlSessionId, correlationId, id, startTimestamp, stopTimestamp, startPosition, stopPosition,
             initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId, streamId, strippedChannel,
             originalChannel, sourceIdentity) ->
                found[0] = new RecordingInfo(id, startPosition, stopPosition, termBufferLength, sessionId, streamId,
                    strippedChannel, originalChannel));
        if (count == 0 || found[0] == null) {
            known.remove(recordingId);
            return null;
        }
        known.put(recordingId, found[0]);
        return found[0];
    }

    /** The latest recorded position (rec-pos of an active recording, else its stop), null when gone. */
    synchronized Long latestPosition(final long recordingId) {
        try {
            return archive().getMaxRecordedPosition(recordingId);
        } catch (ArchiveException error) {
            if (error.errorCode() == ArchiveException.UNKNOWN_RECORDING) {
                known.remove(recordingId);
                return null;
            }
            throw stopAware(error);
        } catch (RuntimeException error) {
            throw stopAware(error);
        }
    }

    @Override
    public synchronized void close() {
        if (archive != null) {
            try {
                archive.close();
            } finally {
                archive = null;
            }
        }
    }
}
