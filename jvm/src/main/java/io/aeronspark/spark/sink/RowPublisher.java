package io.aeronspark.spark.sink;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import io.aeron.Publication;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Offers one value per call on the shared publication. Back pressure, a not-yet-connected
 * subscriber (the archive's recording) and admin actions are retried with a spin-yield-park
 * backoff for at most sink.offerTimeoutMs, then the task fails naming the stream and the option.
 */
final class RowPublisher {
    private static final int SPINS = 100;
    private static final int YIELDS = 100;
    private static final long MAX_PARK_NS = TimeUnit.MICROSECONDS.toNanos(500);

    private final SinkOptions options;
    private final Publication publication;
    private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[0]);
    /** The publication's position after this writer's last message: what a commit waits to see recorded. */
    private long lastPosition;
    private long messages;
    private long bytes;
    private long backPressureNs;

    RowPublisher(final SinkOptions options, final Publication publication) {
        this.options = options;
        this.publication = publication;
    }

    void publish(final byte[] value) {
        buffer.wrap(value);
        long result = publication.offer(buffer, 0, value.length);
        if (result < 0) {
            result = retry(value.length);
        }
        lastPosition = result;
        messages++;
        bytes += value.length;
    }

    private long retry(final int length) {
        final long startNs = System.nanoTime();
        final long deadlineNs = startNs + TimeUnit.MILLISECONDS.toNanos(options.offerTimeoutMs);
        long parkNs = 1_000;
        for (int attempt = 0; ; attempt++) {
            final long result = publication.offer(buffer, 0, length);
            if (result > 0) {
                backPressureNs += System.nanoTime() - startNs;
                return result;
            }
            if (result == Publication.CLOSED || result == Publication.MAX_POSITION_EXCEEDED) {
                throw new IllegalStateException("format(\"aeron-archive-jvm\") sink: the publication on "
                    + options.describeStream() + " is " + (result == Publication.CLOSED ? "closed"
                    : "at its maximum position (use a longer term-length in the channel)") + "; the row was not published");
            }
            if (System.nanoTime() - deadlineNs > 0) {
                throw new IllegalStateException(timeoutMessage(result));
            }
            if (attempt < SPINS) {
                Thread.onSpinWait();
            } else if (attempt < SPINS + YIELDS) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(parkNs);
                parkNs = Math.min(parkNs * 2, MAX_PARK_NS);
            }
        }
    }

    private String timeoutMessage(final long lastResult) {
        final String prefix = "format(\"aeron-archive-jvm\") sink: a row could not be published on "
            + options.describeStream() + " within " + SinkOptions.OFFER_TIMEOUT_MS + "=" + options.offerTimeoutMs + " ms: ";
        if (lastResult == Publication.NOT_CONNECTED) {
            return prefix + "no subscriber is connected (is the archive at " + options.archive.describeEndpoint()
                + " recording that stream, and can it reach the channel's endpoint? the sink asks it to record "
                + "when the query starts)";
        }
        return prefix + "back pressured (the archive's recording, or another subscriber, is not keeping up); "
            + "raise " + SinkOptions.OFFER_TIMEOUT_MS + " or slow the input";
    }

    long lastPosition() {
        return lastPosition;
    }

    long messages() {
        return messages;
    }

    long bytes() {
        return bytes;
    }

    long backPressureNs() {
        return backPressureNs;
    }

    Publication publication() {
        return publication;
    }
}
