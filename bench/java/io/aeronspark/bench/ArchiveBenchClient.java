package io.aeronspark.bench;

import java.io.File;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.client.ArchiveException;
import io.aeron.archive.codecs.SourceLocation;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.BlockHandler;
import org.agrona.CloseHelper;
import org.agrona.DirectBuffer;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The benchmark's client program: one and the same program (real Aeron 1.15.1 client) drives both
 * the Java 1.15.1 archive and our sidecar, so neither archive gets a different publisher,
 * subscriber or position probe.
 *
 * <pre>
 * record  --channel CH [--publication-channel P] --stream-id N --messages K --size B
 *         [--source-location local|remote]
 * replay  --recording-id R --replay-channel CH --replay-stream-id N
 * common: --embedded-driver | --aeron-dir D; --control-channel C --control-stream-id N
 *         --response-channel R --response-stream-id N
 * </pre>
 *
 * {@code record}: starts a recording, publishes K messages of B bytes as fast as one thread can
 * offer (payload pre-filled; only the 8-byte message index changes), while a second thread polls
 * the archive's RecordingPosition over the control protocol (every ~0.5 ms). Record throughput is
 * measured between the first observation past the start position and the first observation of the
 * final position: bytes between those two observed positions / time between them.
 * {@code replay}: replays the whole recording to a subscription in this process that block-polls
 * the image and only counts bytes; throughput is bytes after the first block / time from the first
 * to the last block. Results are one JSON line on stdout.
 */
public final class ArchiveBenchClient
{
    private static final int BLOCK_LIMIT = 1024 * 1024;

    private ArchiveBenchClient()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        if (args.length == 0)
        {
            System.err.println("usage: ArchiveBenchClient record|replay --option value ...");
            System.exit(2);
        }
        final Map<String, String> options = parse(args);
        final String command = args[0];
        MediaDriver driver = null;
        File driverDir = null;
        try
        {
            final String aeronDir;
            if (options.containsKey("embedded-driver"))
            {
                // The caller may name the directory, so it can remove it even if this JVM is killed.
                driverDir = options.containsKey("embedded-driver-dir") ?
                    new File(options.get("embedded-driver-dir")) :
                    Files.createTempDirectory(new File("/dev/shm").isDirectory() ?
                    new File("/dev/shm").toPath() : new File(System.getProperty("java.io.tmpdir")).toPath(),
                    "aeron-bench-client-").toFile();
                driver = MediaDriver.launchEmbedded(new MediaDriver.Context()
                    .aeronDirectoryName(driverDir.getPath())
                    .dirDeleteOnStart(true)
                    .warnIfDirectoryExists(false)
                    .termBufferSparseFile(true)
                    .threadingMode(ThreadingMode.valueOf(options.getOrDefault("driver-threading", "SHARED"))));
                aeronDir = driver.aeronDirectoryName();
            }
            else
            {
                aeronDir = required(options, "aeron-dir");
            }
            try (Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(aeronDir));
                AeronArchive archive = AeronArchive.connect(new AeronArchive.Context()
                    .aeron(aeron)
                    .ownsAeronClient(false)
                    .controlRequestChannel(required(options, "control-channel"))
                    .controlRequestStreamId(Integer.parseInt(options.getOrDefault("control-stream-id", "10")))
                    .controlResponseChannel(required(options, "response-channel"))
                    .controlResponseStreamId(Integer.parseInt(options.getOrDefault("response-stream-id", "20")))
                    .messageTimeoutNs(10_000_000_000L)))
            {
                switch (command)
                {
                    case "record":
                        record(aeron, archive, options);
                        break;
                    case "replay":
                        replay(aeron, archive, options);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown command '" + command + "': record or replay");
                }
            }
        }
        finally
        {
            CloseHelper.quietClose(driver);
            if (driverDir != null)
            {
                IoUtil.delete(driverDir, true);
            }
        }
    }

    private static void record(final Aeron aeron, final AeronArchive archive, final Map<String, String> options)
        throws InterruptedException
    {
        final String channel = required(options, "channel");
        final String publicationChannel = options.getOrDefault("publication-channel", channel);
        final int streamId = Integer.parseInt(required(options, "stream-id"));
        final long messages = Long.parseLong(required(options, "messages"));
        final int size = Integer.parseInt(required(options, "size"));
        final SourceLocation location = "local".equals(options.getOrDefault("source-location", "remote")) ?
            SourceLocation.LOCAL : SourceLocation.REMOTE;

        archive.startRecording(channel, streamId, location);
        try (ExclusivePublication publication = aeron.addExclusivePublication(publicationChannel, streamId))
        {
            if (size > publication.maxPayloadLength())
            {
                throw new IllegalArgumentException("--size " + size + " exceeds one frame (max payload " +
                    publication.maxPayloadLength() + "): the benchmark offers unfragmented messages");
            }
            final long deadline = System.nanoTime() + 30_000_000_000L;
            while (!publication.isConnected())
            {
                check(deadline, "the recording subscription to connect");
                Thread.sleep(1);
            }
            long recordingId;
            while ((recordingId = findRecording(archive, channel, streamId, publication.sessionId())) < 0)
            {
                check(deadline, "the recording to appear in the catalog");
                Thread.sleep(1);
            }
            final long startPosition = publication.position();
            final PositionProbe probe = new PositionProbe(archive, recordingId);
            final Thread probeThread = new Thread(probe, "position-probe");
            probeThread.start();

            final UnsafeBuffer payload = new UnsafeBuffer(new byte[size]);
            for (int j = 0; j < size; j++)
            {
                payload.putByte(j, (byte)(j * 7));
            }
            final long publishStart = System.nanoTime();
            long backPressured = 0;
            for (long i = 0; i < messages; i++)
            {
                if (size >= 8)
                {
                    payload.putLong(0, i, ByteOrder.LITTLE_ENDIAN);
                }
                long result;
                while ((result = publication.offer(payload, 0, size)) < 0)
                {
                    if (result == Publication.CLOSED || result == Publication.MAX_POSITION_EXCEEDED)
                    {
                        throw new IllegalStateException("offer failed: " + result);
                    }
                    backPressured++;
                    if ((backPressured & 0xFFFF) == 0)
                    {
                        check(publishStart + 300_000_000_000L, "offer of message " + i);
                    }
                    Thread.yield(); // on 2 cores a spinning publisher would starve the archive it waits for
                }
            }
            final long publishNs = System.nanoTime() - publishStart;
            final long endPosition = publication.position();
            probe.target = endPosition;
            probeThread.join(300_000);
            if (probeThread.isAlive() || probe.failure != null)
            {
                throw new IllegalStateException("recording did not reach " + endPosition + " (last seen " +
                    probe.lastPosition + ")", probe.failure);
            }
            archive.stopRecording(channel, streamId);
            long stopPosition;
            while ((stopPosition = archive.getStopPosition(recordingId)) == AeronArchive.NULL_POSITION)
            {
                Thread.sleep(1);
            }
            final long bytes = probe.endPosition - probe.firstPosition;
            final double seconds = (probe.endNs - probe.firstNs) / 1e9;
            System.out.println("{\"event\": \"recorded\", \"recordingId\": " + recordingId +
                ", \"startPosition\": " + startPosition + ", \"stopPosition\": " + stopPosition +
                ", \"publicationPosition\": " + endPosition + ", \"messages\": " + messages + ", \"size\": " + size +
                ", \"measuredFromPosition\": " + probe.firstPosition + ", \"measuredToPosition\": " + probe.endPosition +
                ", \"measuredBytes\": " + bytes + ", \"measuredSeconds\": " + seconds +
                ", \"probes\": " + probe.probes + ", \"publishSeconds\": " + publishNs / 1e9 +
                ", \"backPressuredOffers\": " + backPressured + "}");
        }
    }

    private static long findRecording(
        final AeronArchive archive, final String channel, final int streamId, final int sessionId)
    {
        try
        {
            return archive.findLastMatchingRecording(0, channel, streamId, sessionId);
        }
        catch (final ArchiveException ex)
        {
            // 1.15.1 answers "min recording id outside valid range" while its catalog is still empty.
            return -1;
        }
    }

    /** Polls RecordingPosition on its own thread: the publisher thread never waits for the archive. */
    private static final class PositionProbe implements Runnable
    {
        private final AeronArchive archive;
        private final long recordingId;
        volatile long target = Long.MAX_VALUE;
        volatile long lastPosition = -1;
        volatile Throwable failure;
        long firstPosition = -1;
        long firstNs;
        long endPosition;
        long endNs;
        long probes;

        PositionProbe(final AeronArchive archive, final long recordingId)
        {
            this.archive = archive;
            this.recordingId = recordingId;
        }

        public void run()
        {
            try
            {
                long start = -1;
                while (true)
                {
                    final long position = archive.getRecordingPosition(recordingId);
                    final long now = System.nanoTime();
                    probes++;
                    lastPosition = position;
                    if (start < 0)
                    {
                        start = position;
                    }
                    else if (firstPosition < 0 && position > start)
                    {
                        firstPosition = position;
                        firstNs = now;
                    }
                    if (position >= target)
                    {
                        endPosition = position;
                        endNs = now;
                        return;
                    }
                    LockSupport.parkNanos(500_000);
                }
            }
            catch (final Throwable ex)
            {
                failure = ex;
            }
        }
    }

    private static void replay(final Aeron aeron, final AeronArchive archive, final Map<String, String> options)
    {
        final long recordingId = Long.parseLong(required(options, "recording-id"));
        final String replayChannel = required(options, "replay-channel");
        final int replayStreamId = Integer.parseInt(required(options, "replay-stream-id"));
        final long[] positions = new long[2];
        archive.listRecording(recordingId,
            (controlSessionId, correlationId, id, startTimestamp, stopTimestamp, startPosition, stopPosition,
            initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId, streamId, strippedChannel,
            originalChannel, sourceIdentity) ->
            {
                positions[0] = startPosition;
                positions[1] = stopPosition;
            });
        final long start = positions[0];
        final long length = positions[1] - start;
        if (positions[1] <= 0 || length <= 0)
        {
            throw new IllegalStateException("recording " + recordingId + " has no stopped data: " + start + ".." +
                positions[1]);
        }
        try (Subscription subscription = aeron.addSubscription(replayChannel, replayStreamId))
        {
            final long replaySessionId = archive.startReplay(recordingId, start, length, replayChannel, replayStreamId);
            final long deadline = System.nanoTime() + 30_000_000_000L;
            Image image;
            while ((image = subscription.imageBySessionId((int)replaySessionId)) == null)
            {
                check(deadline, "the replay image");
                Thread.yield();
            }
            final long[] counted = new long[1];
            final BlockHandler counter =
                (final DirectBuffer buffer, final int offset, final int blockLength, final int sessionId,
                final int termId) -> counted[0] += blockLength;
            final long end = start + length;
            long firstNs = 0;
            long firstBlockBytes = 0;
            long polls = 0;
            while (image.position() < end)
            {
                final int bytes = image.blockPoll(counter, BLOCK_LIMIT);
                polls++;
                if (bytes > 0 && firstNs == 0)
                {
                    firstNs = System.nanoTime();
                    firstBlockBytes = bytes;
                }
                if (bytes == 0 && image.isClosed())
                {
                    throw new IllegalStateException("replay image closed at " + image.position() + " before " + end);
                }
                if (bytes == 0 && (polls & 0xFFFFF) == 0)
                {
                    check(deadline + 270_000_000_000L, "the replay to reach " + end);
                }
                if (bytes == 0)
                {
                    Thread.yield(); // let the archive's replayer run (2 cores)
                }
            }
            final long lastNs = System.nanoTime();
            System.out.println("{\"event\": \"replayed\", \"recordingId\": " + recordingId +
                ", \"replaySessionId\": " + replaySessionId + ", \"position\": " + start + ", \"length\": " + length +
                ", \"countedBytes\": " + counted[0] + ", \"measuredBytes\": " + (counted[0] - firstBlockBytes) +
                ", \"measuredSeconds\": " + (lastNs - firstNs) / 1e9 + "}");
        }
    }

    private static void check(final long deadlineNs, final String what)
    {
        if (System.nanoTime() > deadlineNs)
        {
            throw new IllegalStateException("timed out waiting for " + what);
        }
    }

    private static String required(final Map<String, String> options, final String name)
    {
        final String value = options.get(name);
        if (value == null)
        {
            throw new IllegalArgumentException("missing --" + name);
        }
        return value;
    }

    private static Map<String, String> parse(final String[] args)
    {
        final Map<String, String> options = new HashMap<>();
        for (int i = 1; i < args.length; i++)
        {
            if (!args[i].startsWith("--"))
            {
                throw new IllegalArgumentException("unexpected argument '" + args[i] + "'");
            }
            final String name = args[i].substring(2);
            if (i + 1 < args.length && !args[i + 1].startsWith("--"))
            {
                options.put(name, args[++i]);
            }
            else
            {
                options.put(name, "");
            }
        }
        return options;
    }
}
