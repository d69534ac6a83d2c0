package io.aeronspark.spark.source;

import java.util.Collection;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Real-time mode's view of the archive, refreshed on a background thread so that a batch boundary
 * (latestOffset, planInputPartitions, the lag metrics: all on Spark's query thread, while rows wait)
 * asks the archive nothing: each refresh lists new recordings, describes every recording the query
 * follows and reads its latest recorded position, every {@code discoveryIntervalMs} (at least
 * {@link #MIN_REFRESH_MS}). Bounded staleness: a boundary sees the archive as it was at most one
 * refresh interval plus one refresh earlier, so a new recording joins, and a purge or truncation
 * is noticed, at most that much later than with a listing at the boundary itself. The first call,
 * a call naming a recording the view does not cover yet, and every call after a failed refresh
 * refresh on the caller's thread (an unreachable archive fails the query there, as before).
 */
final class RealTimeCatalogView implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RealTimeCatalogView.class);
    static final long MIN_REFRESH_MS = 100;

    /** The archive as one refresh saw it. */
    static final class Snapshot {
        /** What the selection matches (discovery). */
        final SortedMap<Long, RecordingInfo> discovered;
        /** Fresh descriptors of the discovered and followed recordings; a recording missing here is gone. */
        final SortedMap<Long, RecordingInfo> described;
        /** Latest recorded position of each described recording the archive still has. */
        final Map<Long, Long> latest;
        final Set<Long> covered;

        Snapshot(final SortedMap<Long, RecordingInfo> discovered, final SortedMap<Long, RecordingInfo> described,
                 final Map<Long, Long> latest, final Set<Long> covered) {
            this.discovered = discovered;
            this.described = described;
            this.latest = latest;
            this.covered = covered;
        }
    }

    private final ArchiveCatalog catalog;
    private final long refreshMs;
    /** Recordings in the query's offsets: described even when discovery does not list them. */
    private final Set<Long> followed = ConcurrentHashMap.newKeySet();
    private volatile Snapshot snapshot;
    private volatile boolean lastRefreshFailed;
    private volatile boolean closed;
    private ScheduledExecutorService refresher;

    RealTimeCatalogView(final ArchiveCatalog catalog, final long discoveryIntervalMs) {
        this.catalog = catalog;
        this.refreshMs = Math.max(MIN_REFRESH_MS, discoveryIntervalMs);
    }

    /** The latest snapshot covering {@code ids}, refreshed on this thread only when there is none. */
    Snapshot current(final Collection<Long> ids) {
        followed.addAll(ids);
        final Snapshot seen = snapshot;
        if (seen != null && !lastRefreshFailed && seen.covered.containsAll(ids)) {
            return seen;
        }
        final Snapshot fresh = refresh();
        startRefresher();
        return fresh;
    }

    /** The latest positions the last refresh read (for the lag metrics), without asking the archive. */
    Map<Long, Long> latestPositions() {
        final Snapshot seen = snapshot;
        return seen == null ? Map.of() : seen.latest;
    }

    private synchronized Snapshot refresh() {
        final SortedMap<Long, RecordingInfo> discovered = catalog.recordings(true);
        final Set<Long> ids = new TreeSet<>(discovered.keySet());
        ids.addAll(followed);
        final SortedMap<Long, RecordingInfo> described = new TreeMap<>();
        final Map<Long, Long> latest = new TreeMap<>();
        for (Long recordingId : ids) {
            final RecordingInfo info = catalog.describe(recordingId);
            if (info == null) {
                continue;
            }
            described.put(recordingId, info);
            final Long position = catalog.latestPosition(recordingId);
            if (position != null) {
                latest.put(recordingId, position);
            }
        }
        final Snapshot fresh = new Snapshot(discovered, described, latest, ids);
        snapshot = fresh;
        lastRefreshFailed = false;
        return fresh;
    }

    private synchronized void startRefresher() {
        if (refresher != null || closed) {
            return;
        }
        refresher = Executors.newSingleThreadScheduledExecutor(runnable -> {
            final Thread thread = new Thread(runnable, "aeron-archive-jvm-catalog-refresh");
            thread.setDaemon(true);
            return thread;
        });
        refresher.scheduleWithFixedDelay(this::refreshInBackground, refreshMs, refreshMs, TimeUnit.MILLISECONDS);
    }

    private void refreshInBackground() {
        if (closed) {
            return;
        }
        try {
            refresh();
        } catch (RuntimeException error) {
            // The next boundary refreshes on the query thread, where the error fails the query as it should.
            lastRefreshFailed = true;
            if (!closed) {
                LOG.warn("aeron-archive-jvm source: background refresh of the archive's recordings failed (the next "
                    + "batch asks the archive itself): {}", error.toString());
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        final ScheduledExecutorService running;
        synchronized (this) {
            running = refresher;
            refresher = null;
        }
        if (running != null) {
            running.shutdown();
            try {
                running.awaitTermination(5, TimeUnit.SECONDS);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
