package io.aeronspark.spark.source;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeronspark.spark.ArchiveSettings;
import org.agrona.ExpandableArrayBuffer;

/**
 * Executor-JVM-wide pool of open-ended replays left by the real-time partition readers of ended
 * batches (Kafka's consumer pool, for replays).
 *
 * <p>Opening a replay costs a control session, a replay request, a publication set-up and an image
 * join: a stall at every real-time batch boundary. A reader that ends with its replay still healthy
 * parks it here; the next batch's reader of the same recording whose start offset is the parked
 * replay's next position takes it over and keeps polling. Any other start closes the parked replay
 * and opens a fresh one. A replay parked longer than {@link #IDLE_TIMEOUT_MS} is closed; all are
 * closed at JVM exit.
 */
final class OpenReplays {
    static final long IDLE_TIMEOUT_MS = 30_000L;
    private static final long SWEEP_INTERVAL_MS = 1_000L;

    /** Which replays are interchangeable: same archive session settings, recording and row shape. */
    record Key(ArchiveSettings settings, long recordingId, boolean includeTimestamp) {
    }

    /** A replay between two readers: everything the reader had consumed from it but not yet returned. */
    static final class Parked {
        final AeronArchive archive;
        final Subscription subscription;
        final Image image;
        final long replaySessionId;
        final long replayFrom;
        /** The position after the last row returned: the next batch must start here to take it over. */
        final long nextOffset;
        final ArrayDeque<Object[]> pending;
        final ExpandableArrayBuffer assembly;
        final int assembledLength;
        final long assembledReservedValue;
        final long parkedAtNs = System.nanoTime();

        Parked(final AeronArchive archive, final Subscription subscription, final Image image,
               final long replaySessionId, final long replayFrom, final long nextOffset,
               final ArrayDeque<Object[]> pending, final ExpandableArrayBuffer assembly, final int assembledLength,
               final long assembledReservedValue) {
            this.archive = archive;
            this.subscription = subscription;
            this.image = image;
            this.replaySessionId = replaySessionId;
            this.replayFrom = replayFrom;
            this.nextOffset = nextOffset;
            this.pending = pending;
            this.assembly = assembly;
            this.assembledLength = assembledLength;
            this.assembledReservedValue = assembledReservedValue;
        }

        void close() {
            try {
                if (replaySessionId != Long.MIN_VALUE) {
                    archive.stopReplay(replaySessionId);
                }
            } catch (RuntimeException ignored) {
                // the replay or the archive may be gone already; closing is all that is left
            }
            try {
                subscription.close();
            } catch (RuntimeException ignored) {
                // the shared Aeron client may be closed first at JVM exit
            }
            try {
                archive.close();
            } catch (RuntimeException ignored) {
                // as above
            }
        }
    }

    private static final Map<Key, Parked> PARKED = new HashMap<>();
    private static ScheduledExecutorService sweeper;

    private OpenReplays() {
    }

    /**
     * The parked replay of this key if it continues exactly at {@code start}; a parked replay at any
     * other position is closed (its rows would be a gap or a repeat).
     */
    static Parked take(final Key key, final long start) {
        final Parked parked;
        synchronized (OpenReplays.class) {
            parked = PARKED.remove(key);
        }
        if (parked == null) {
            return null;
        }
        if (parked.nextOffset == start && !parked.image.isClosed()) {
            return parked;
        }
        parked.close();
        return null;
    }

    /** Parks a healthy replay for the next batch, closing one parked earlier under the same key. */
    static void park(final Key key, final Parked replay) {
        final Parked previous;
        synchronized (OpenReplays.class) {
            startSweeper();
            previous = PARKED.put(key, replay);
        }
        if (previous != null) {
            previous.close();
        }
    }

    private static void startSweeper() {
        if (sweeper != null) {
            return;
        }
        sweeper = Executors.newSingleThreadScheduledExecutor(runnable -> {
            final Thread thread = new Thread(runnable, "aeron-spark-jvm-replay-sweeper");
            thread.setDaemon(true);
            return thread;
        });
        sweeper.scheduleWithFixedDelay(OpenReplays::closeIdle, SWEEP_INTERVAL_MS, SWEEP_INTERVAL_MS,
            TimeUnit.MILLISECONDS);
        Runtime.getRuntime().addShutdownHook(new Thread(OpenReplays::closeAll, "aeron-spark-jvm-replays-close"));
    }

    private static void closeIdle() {
        final long idleNs = TimeUnit.MILLISECONDS.toNanos(IDLE_TIMEOUT_MS);
        final List<Parked> expired = new ArrayList<>();
        synchronized (OpenReplays.class) {
            final Iterator<Parked> it = PARKED.values().iterator();
            while (it.hasNext()) {
                final Parked parked = it.next();
                if (System.nanoTime() - parked.parkedAtNs > idleNs) {
                    expired.add(parked);
                    it.remove();
                }
            }
        }
        expired.forEach(Parked::close);
    }

    static void closeAll() {
        final List<Parked> all;
        synchronized (OpenReplays.class) {
            all = new ArrayList<>(PARKED.values());
            PARKED.clear();
        }
        all.forEach(Parked::close);
    }
}
