package io.aeronspark.spark.source;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import io.aeron.Aeron;
import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ReplayParams;
import io.aeron.logbuffer.ControlledFragmentHandler;
import io.aeron.logbuffer.FrameDescriptor;
import io.aeron.logbuffer.Header;
import io.aeronspark.spark.AeronConnections;
import io.aeronspark.spark.ArchiveSettings;
import io.aeronspark.spark.BoundaryTimings;
import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;

/**
 * Executor side: one recording read through one replay, as whole messages.
 *
 * <p>A micro-batch partition replays [start, end) and yields the messages whose last frame ends in
 * (start, end]. A real-time partition asks for an open-ended replay (length -1: the archive follows
 * the live recording) and {@link #nextWithTimeout} polls it; {@link #getOffset} is the position after
 * the last row returned, always a message boundary, so the next batch starts on a whole message.
 *
 * <p>A start inside a fragmented message (a micro-batch end taken from a recording position can cut
 * one) is detected by the first fragment lacking the BEGIN flag: the replay then starts again at
 * the start of that term (Aeron never lets a message cross a term) and drops every message ending
 * at or before the start. At a recording's first position a message begun before the recording is
 * dropped, as Aeron's FragmentAssembler would. Commit markers of the Python sink (reserved value
 * {@link #MARKER_RESERVED_VALUE}) are not rows.
 */
final class AeronPartitionReader implements SupportsRealTimeRead<InternalRow> {
    /** Replays come on this stream id (each to a subscription of its own, told apart by session id). */
    static final int REPLAY_STREAM_ID = 0x5eed;
    static final long MARKER_RESERVED_VALUE =
        ByteBuffer.wrap("AeSkMrk1".getBytes(StandardCharsets.US_ASCII)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    private static final int FRAGMENT_LIMIT = 256;
    private static final int ROWS_BEFORE_RETURN = 1024;
    private static final int SPIN_ROUNDS = 100;
    private static final int YIELD_ROUNDS = 10;
    private static final long MIN_PARK_NS = 50_000L;
    private static final long MAX_PARK_NS = 1_000_000L;
    private static final int MAX_PARK_DOUBLINGS = 5;
    private static final long FINISHED_PARK_NS = 10_000_000L;

    private final AeronInputPartition partition;
    private final long recordingId;
    private final ArchiveSettings settings;
    private ArrayDeque<Object[]> pending = new ArrayDeque<>();
    private ExpandableArrayBuffer assembly = new ExpandableArrayBuffer(4096);
    private final ControlledFragmentHandler handler = this::onFragment;

    private AeronArchive archive;
    private Subscription subscription;
    private Image image;
    private long replaySessionId = Long.MIN_VALUE;
    /** Messages ending at or before this are not this partition's (a head replayed for a cut message). */
    private long dropUpTo;
    private long replayFrom;
    private boolean started;
    private boolean firstFragmentSeen;
    private boolean headRestartNeeded;
    private boolean finished;
    // the message being assembled
    private int assembledLength = -1;
    private long assembledReservedValue;
    // the row returned last, and where it ends
    private InternalRow current;
    private long offset;
    private long idleSinceNs;
    private long rowsReturned;
    /** Time nextWithTimeout spent waiting for data (the reader was ahead of the replay), for the timings log. */
    private long waitedNs;
    private long openedAtNs;

    AeronPartitionReader(final AeronInputPartition partition) {
        this.partition = partition;
        this.recordingId = partition.recording.recordingId;
        this.settings = partition.options.archive;
        this.offset = partition.start;
        this.dropUpTo = partition.start;
    }

    // --- Spark's side ----------------------------------------------------------------------------

    @Override
    public boolean next() throws IOException {
        if (partition.openEnded()) {  // real-time: Spark calls nextWithTimeout; here, wait as long as it takes
            while (true) {
                if (nextWithTimeout(1_000L).hasRecord()) {
                    return true;
                }
            }
        }
        ensureStarted();
        idleSinceNs = System.nanoTime();
        while (true) {
            if (takePending()) {
                return true;
            }
            if (finished) {
                return false;
            }
            if (pollOnce() == 0) {
                checkBoundedProgress();
                idle();
            } else {
                idleSinceNs = System.nanoTime();
            }
        }
    }

    @Override
    public RecordStatus nextWithTimeout(final Long timeoutMs) throws IOException {
        ensureStarted();
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        int idleRounds = 0;
        long waitingSinceNs = 0;
        while (true) {
            if (takePending()) {
                if (waitingSinceNs != 0) {
                    waitedNs += System.nanoTime() - waitingSinceNs;
                }
                return RecordStatus.newStatusWithoutArrivalTime(true);
            }
            if (!finished && pollOnce() > 0) {
                idleRounds = 0;
                continue;
            }
            final long now = System.nanoTime();
            if (waitingSinceNs == 0) {
                waitingSinceNs = now;
            }
            final long left = deadline - now;
            if (left <= 0) {
                waitedNs += now - waitingSinceNs;
                return RecordStatus.newStatusWithoutArrivalTime(false);
            }
            idle(idleRounds++, left);
        }
    }

    /**
     * Spin, yield a little, then park from 50 us doubling to 1 ms: a real-time reader waits most of its
     * batch, and a fixed 50 us park woke it ~10,000 times a second (15-19 % of a core at 1,000 msg/s, which
     * the Spark driver's planning of the next batch then waited for). A message waits at most 1 ms here.
     */
    private void idle(final int idleRounds, final long leftNs) {
        if (idleRounds < SPIN_ROUNDS) {
            Thread.onSpinWait();
        } else if (idleRounds < SPIN_ROUNDS + YIELD_ROUNDS) {
            Thread.yield();
        } else if (finished) {
            LockSupport.parkNanos(Math.min(leftNs, FINISHED_PARK_NS));
        } else {
            final int doublings = Math.min(idleRounds - SPIN_ROUNDS - YIELD_ROUNDS, MAX_PARK_DOUBLINGS);
            LockSupport.parkNanos(Math.min(leftNs, Math.min(MIN_PARK_NS << doublings, MAX_PARK_NS)));
        }
    }

    @Override
    public InternalRow get() {
        return current;
    }

    @Override
    public PartitionOffset getOffset() {
        return new AeronPartitionOffset(recordingId, offset);
    }

    @Override
    public void close() {
        BoundaryTimings.note("reader.close", partition + " rows=" + rowsReturned + " pending=" + pending.size()
            + " parkable=" + parkable() + " open_ms=" + (System.nanoTime() - openedAtNs) / 1_000_000
            + " waited_ms=" + waitedNs / 1_000_000 + " image_position=" + (image == null ? -1 : image.position()));
        if (parkable()) {
            // The next batch's reader of this recording starts where this one ended: hand it the replay.
            OpenReplays.park(replayKey(), new OpenReplays.Parked(archive, subscription, image, replaySessionId,
                replayFrom, offset, pending, assembly, assembledLength, assembledReservedValue));
            archive = null;
            subscription = null;
            image = null;
            replaySessionId = Long.MIN_VALUE;
            return;
        }
        stopReplay();
        if (archive != null) {
            try {
                archive.close();
            } catch (RuntimeException ignored) {
                // closing after a failure: the archive may be gone; nothing else to release
            }
            archive = null;
        }
    }

    // --- the replay ----------------------------------------------------------------------------------

    private OpenReplays.Key replayKey() {
        return new OpenReplays.Key(settings, recordingId, partition.options.includeTimestamp);
    }

    private boolean parkable() {
        return partition.openEnded() && started && !finished && !headRestartNeeded && archive != null
            && subscription != null && image != null && !image.isClosed() && !image.isEndOfStream();
    }

    /** Continues the replay an earlier batch's reader left parked at this partition's start, if any. */
    private boolean takeOverParkedReplay() {
        final OpenReplays.Parked parked = OpenReplays.take(replayKey(), partition.start);
        if (parked == null) {
            return false;
        }
        archive = parked.archive;
        subscription = parked.subscription;
        image = parked.image;
        replaySessionId = parked.replaySessionId;
        replayFrom = parked.replayFrom;
        firstFragmentSeen = true;
        pending = parked.pending;
        assembly = parked.assembly;
        assembledLength = parked.assembledLength;
        assembledReservedValue = parked.assembledReservedValue;
        return true;
    }

    private void ensureStarted() {
        if (started) {
            return;
        }
        started = true;
        openedAtNs = System.nanoTime();
        BoundaryTimings.note("reader.open.start", partition.toString());
        if (partition.openEnded() && takeOverParkedReplay()) {
            BoundaryTimings.note("reader.open.end", partition + " took over the parked replay");
            return;
        }
        openReplay();
        BoundaryTimings.note("reader.open.end", partition + " new replay");
    }

    private void openReplay() {
        archive = AeronConnections.connectArchive(settings.responseChannelDefaulted && !ipc()
            ? settings.withResponseChannel(ReplayEndpoint.of(partition.options).controlResponseChannel()) : settings);
        final RecordingInfo now = describeNow();
        if (now == null) {
            DataLossPolicy.report(partition.options.failOnDataLoss, "recording " + recordingId
                + " is no longer in the archive; " + partition + " is lost");
            finished = true;
            return;
        }
        long from = partition.start;
        if (from < now.startPosition) {
            DataLossPolicy.report(partition.options.failOnDataLoss, "recording " + recordingId + ": [" + from + ", "
                + now.startPosition + ") was purged or detached (the recording now starts at " + now.startPosition + ")");
            from = now.startPosition;
            offset = from;
            dropUpTo = from;
        }
        if (!now.isActive() && from >= now.stopPosition) {
            finished = true;
            return;
        }
        if (!partition.openEnded() && from >= partition.end) {
            finished = true;
            return;
        }
        startReplay(from);
    }

    private RecordingInfo describeNow() {
        final RecordingInfo[] found = new RecordingInfo[1];
        archive.listRecording(recordingId,
            (controlSessionId, correlationId, id, startTimestamp, stopTimestamp, startPosition, stopPosition,
             initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId, streamId, strippedChannel,
             originalChannel, sourceIdentity) ->
                found[0] = new RecordingInfo(id, startPosition, stopPosition, termBufferLength, sessionId, streamId,
                    strippedChannel, originalChannel));
        return found[0];
    }

    private void startReplay(final long from) {
        replayFrom = from;
        firstFragmentSeen = false;
        assembledLength = -1;
        final long length = partition.openEnded() ? AeronArchive.NULL_LENGTH : partition.end - from;
        final ReplayParams params = new ReplayParams().position(from).length(length);
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.timeoutMs);
        if (settings.responseChannelMode()) {
            // Over a response channel: the client asks the archive for a token and subscribes first;
            // the archive connects its replay publication to this subscription.
            subscription = archive.replay(recordingId, settings.responseChannel, REPLAY_STREAM_ID, params);
            while (subscription.imageCount() == 0) {
                awaitOrFail(deadline, "the replay image of recording " + recordingId);
            }
            image = subscription.imageAtIndex(0);
            return;
        }
        final Aeron aeron = AeronConnections.aeron(settings.aeronDir);
        final boolean ipc = ipc();
        final ReplayEndpoint endpoint = ipc ? null : ReplayEndpoint.of(partition.options);
        subscription = aeron.addSubscription(ipc ? "aeron:ipc" : endpoint.subscribeChannel(), REPLAY_STREAM_ID);
        String channel = ipc ? "aeron:ipc" : null;
        while (channel == null) {
            final String resolved = subscription.tryResolveChannelEndpointPort();
            if (resolved == null) {
                awaitOrFail(deadline, "a port for the replay subscription");
            } else {
                channel = endpoint.told(resolved);  // this host's address the archive reaches, the bound port
            }
        }
        replaySessionId = archive.startReplay(recordingId, channel, REPLAY_STREAM_ID, params);
        final int sessionId = (int) replaySessionId;
        while ((image = subscription.imageBySessionId(sessionId)) == null) {
            awaitOrFail(deadline, "the replay image of recording " + recordingId + " (session " + sessionId + ")");
        }
    }

    private boolean ipc() {
        return settings.controlChannel.startsWith("aeron:ipc");
    }

    private void awaitOrFail(final long deadlineNs, final String what) {
        if (System.nanoTime() - deadlineNs > 0) {
            throw new IllegalStateException("aeron-archive-jvm source: " + what + " did not arrive within "
                + ArchiveSettings.TIMEOUT_MS + "=" + settings.timeoutMs + " from the archive at "
                + settings.describeEndpoint());
        }
        LockSupport.parkNanos(100_000L);
    }

    private void stopReplay() {
        if (replaySessionId != Long.MIN_VALUE && archive != null) {
            try {
                archive.stopReplay(replaySessionId);
            } catch (RuntimeException ignored) {
                // the replay may have ended by itself already
            }
        }
        replaySessionId = Long.MIN_VALUE;
        if (subscription != null) {
            subscription.close();
            subscription = null;
        }
        image = null;
    }

    private int pollOnce() {
        if (image == null) {
            finished = true;
            return 0;
        }
        final int fragments = image.controlledPoll(handler, FRAGMENT_LIMIT);
        if (headRestartNeeded) {
            headRestartNeeded = false;
            stopReplay();
            final long termLength = partition.recording.termBufferLength;
            final long termStart = replayFrom / termLength * termLength;
            startReplay(Math.max(partition.recording.startPosition, termStart));
            return 1;
        }
        if (fragments == 0) {
            if (!partition.openEnded() && image.position() >= partition.end) {
                finished = true;
            } else if (image.isClosed() || image.isEndOfStream()) {
                onReplayEnded();
            }
        } else if (!partition.openEnded() && image.position() >= partition.end) {
            finished = true;
        }
        return fragments;
    }

    /** The replay ended before the range did: the recording stopped (fine), or it was purged or truncated. */
    private void onReplayEnded() {
        final long reached = image.position();
        stopReplay();
        finished = true;
        final RecordingInfo now = describeNow();
        if (now == null) {
            DataLossPolicy.report(partition.options.failOnDataLoss, "recording " + recordingId
                + " is no longer in the archive; read up to " + reached);
        } else if (!partition.openEnded() && reached < partition.end) {
            if (!now.isActive() && now.stopPosition < partition.end) {
                DataLossPolicy.report(partition.options.failOnDataLoss, "recording " + recordingId + ": ["
                    + Math.max(reached, now.stopPosition) + ", " + partition.end + ") was truncated (the recording now "
                    + "stops at " + now.stopPosition + ")");
            } else {
                throw new IllegalStateException("aeron-archive-jvm source: recording " + recordingId + ": replay stopped at "
                    + reached + ", range end is " + partition.end + " (archive at " + settings.describeEndpoint() + ")");
            }
        }
    }

    private void checkBoundedProgress() {
        if (System.nanoTime() - idleSinceNs > TimeUnit.MILLISECONDS.toNanos(settings.timeoutMs)) {
            throw new IllegalStateException("aeron-archive-jvm source: the replay of " + partition + " delivered nothing "
                + "for " + ArchiveSettings.TIMEOUT_MS + "=" + settings.timeoutMs + " ms (archive at "
                + settings.describeEndpoint() + ")");
        }
    }

    private static void idle() {
        LockSupport.parkNanos(50_000L);
    }

    private ControlledFragmentHandler.Action onFragment(final DirectBuffer buffer, final int offset, final int length,
                                                        final Header header) {
        final byte flags = header.flags();
        final boolean begin = (flags & FrameDescriptor.BEGIN_FRAG_FLAG) != 0;
        final boolean end = (flags & FrameDescriptor.END_FRAG_FLAG) != 0;
        if (!firstFragmentSeen) {
            firstFragmentSeen = true;
            if (!begin && replayFrom > partition.recording.startPosition && replayFrom % partition.recording.termBufferLength != 0) {
                headRestartNeeded = true;  // started inside a message: replay its head from the term's start
                return ControlledFragmentHandler.Action.ABORT;
            }
        }
        if (begin && end) {
            emit(buffer, offset, length, header.reservedValue(), header);
        } else if (begin) {
            assembly.putBytes(0, buffer, offset, length);
            assembledLength = length;
            assembledReservedValue = header.reservedValue();
        } else if (assembledLength >= 0) {
            assembly.putBytes(assembledLength, buffer, offset, length);
            assembledLength += length;
            if (end) {
                emit(assembly, 0, assembledLength, assembledReservedValue, header);
                assembledLength = -1;
            }
        }
        // else: a continuation of a message whose head is not in this range (begun before the recording)
        return pending.size() >= ROWS_BEFORE_RETURN ? ControlledFragmentHandler.Action.BREAK
            : ControlledFragmentHandler.Action.CONTINUE;
    }

    private void emit(final DirectBuffer buffer, final int offset, final int length, final long reservedValue,
                      final Header lastFrame) {
        final long endPosition = lastFrame.position();
        if (endPosition <= dropUpTo || (!partition.openEnded() && endPosition > partition.end)) {
            return;
        }
        if (reservedValue == MARKER_RESERVED_VALUE) {
            offset(endPosition);
            return;
        }
        final byte[] payload = new byte[length];
        buffer.getBytes(offset, payload);
        final Object[] values = partition.options.includeTimestamp ? new Object[8] : new Object[7];
        values[0] = recordingId;
        values[1] = endPosition;
        values[2] = payload;
        values[3] = lastFrame.sessionId();
        values[4] = lastFrame.streamId();
        values[5] = reservedValue;
        if (partition.options.includeTimestamp) {
            values[6] = reservedValue / 1000L;  // the reserved value read as epoch ns, shown in microseconds
        }
        values[values.length - 1] = endPosition;  // where this row ends, for getOffset
        pending.add(values);
    }

    /** A marker row at the head of the queue moves the offset on without becoming a row. */
    private void offset(final long endPosition) {
        if (pending.isEmpty()) {
            offset = Math.max(offset, endPosition);
        } else {
            pending.add(new Object[] {null, endPosition});
        }
    }

    private boolean takePending() {
        while (!pending.isEmpty()) {
            final Object[] values = pending.poll();
            final long end = (Long) values[values.length - 1];
            offset = Math.max(offset, end);
            if (values[0] == null) {
                continue;  // a marker
            }
            final Object[] row = new Object[values.length - 1];
            System.arraycopy(values, 0, row, 0, row.length);
            current = new GenericInternalRow(row);
            if (rowsReturned++ == 0) {
                BoundaryTimings.note("reader.firstRow", partition + " position=" + end);
            }
            return true;
        }
        return false;
    }
}
