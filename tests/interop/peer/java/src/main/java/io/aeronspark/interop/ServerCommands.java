package io.aeronspark.interop;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;

import io.aeron.archive.Archive;
import io.aeron.archive.ArchiveThreadingMode;
import io.aeron.archive.ArchivingMediaDriver;
import io.aeron.archive.client.AeronArchive;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import org.agrona.concurrent.ShutdownSignalBarrier;

/**
 * Long-running subcommands: {@code archive} (real 1.15.1 ArchivingMediaDriver) and {@code driver}
 * (a plain 1.15.1 Java media driver that 1.15.1 clients can attach to). Both print one "ready" line,
 * run until stdin reaches end-of-file, SIGTERM or SIGINT, then close and print "stopped".
 */
final class ServerCommands
{
    private ServerCommands()
    {
    }

    static int archive(final Options options)
    {
        final String archiveDir = options.requiredString("archive-dir");
        final String aeronDir = options.requiredString("aeron-dir");
        final String controlChannel = options.string(
            "control-channel", AeronArchive.Configuration.CONTROL_CHANNEL_DEFAULT);
        final int controlStreamId = options.intValue(
            "control-stream-id", AeronArchive.Configuration.CONTROL_STREAM_ID_DEFAULT);
        final String localControlChannel = options.string(
            "local-control-channel", AeronArchive.Configuration.LOCAL_CONTROL_CHANNEL_DEFAULT);
        final int localControlStreamId = options.intValue(
            "local-control-stream-id", AeronArchive.Configuration.LOCAL_CONTROL_STREAM_ID_DEFAULT);
        final String eventsChannel = options.string(
            "recording-events-channel", AeronArchive.Configuration.RECORDING_EVENTS_CHANNEL_DEFAULT);
        final int eventsStreamId = options.intValue(
            "recording-events-stream-id", AeronArchive.Configuration.RECORDING_EVENTS_STREAM_ID_DEFAULT);
        final int segmentLength = options.intValue("segment-length", Archive.Configuration.segmentFileLength());
        final boolean dedicated = threadingIsDedicated(options);

        if (!new File(archiveDir).mkdirs() && !new File(archiveDir).isDirectory())
        {
            throw new UsageException("archive: cannot create --archive-dir " + archiveDir);
        }

        final ShutdownSignalBarrier barrier = new ShutdownSignalBarrier();
        final long launchStartNs = System.nanoTime();
        final MediaDriver.Context driverContext = driverContext(aeronDir, dedicated)
            .spiesSimulateConnection(options.flag("spies-simulate-connection"));
        final Archive.Context archiveContext = new Archive.Context()
            .aeronDirectoryName(aeronDir)
            .archiveDir(new File(archiveDir))
            .controlChannel(controlChannel)
            .controlStreamId(controlStreamId)
            .localControlChannel(localControlChannel)
            .localControlStreamId(localControlStreamId)
            .recordingEventsChannel(eventsChannel)
            .recordingEventsStreamId(eventsStreamId)
            .segmentFileLength(segmentLength)
            .deleteArchiveOnStart(options.flag("delete-archive-on-start"))
            .threadingMode(dedicated ? ArchiveThreadingMode.DEDICATED : ArchiveThreadingMode.SHARED);

        try (ArchivingMediaDriver ignored = ArchivingMediaDriver.launch(driverContext, archiveContext))
        {
            Json.event("ready")
                .put("role", "archive")
                .put("aeronVersion", "1.15.1")
                .put("pid", ProcessHandle.current().pid())
                .put("aeronDir", aeronDir)
                .put("archiveDir", archiveDir)
                .put("controlChannel", controlChannel)
                .put("controlStreamId", controlStreamId)
                .put("localControlChannel", localControlChannel)
                .put("localControlStreamId", localControlStreamId)
                .put("recordingEventsChannel", eventsChannel)
                .put("recordingEventsStreamId", eventsStreamId)
                .put("segmentFileLength", segmentLength)
                .put("threading", dedicated ? "dedicated" : "shared")
                .put("launchMs", (System.nanoTime() - launchStartNs) / 1_000_000)
                .put("sinceJvmStartMs", sinceJvmStartMs())
                .emit();
            awaitShutdown(barrier, options);
        }
        Json.event("stopped").put("role", "archive").emit();
        return InteropPeer.EXIT_OK;
    }

    static int driver(final Options options)
    {
        final String aeronDir = options.requiredString("aeron-dir");
        final boolean dedicated = threadingIsDedicated(options);
        final ShutdownSignalBarrier barrier = new ShutdownSignalBarrier();
        final long launchStartNs = System.nanoTime();
        final MediaDriver.Context context = driverContext(aeronDir, dedicated)
            .spiesSimulateConnection(options.flag("spies-simulate-connection"));
        try (MediaDriver ignored = MediaDriver.launch(context))
        {
            Json.event("ready")
                .put("role", "driver")
                .put("aeronVersion", "1.15.1")
                .put("pid", ProcessHandle.current().pid())
                .put("aeronDir", aeronDir)
                .put("threading", dedicated ? "dedicated" : "shared")
                .put("launchMs", (System.nanoTime() - launchStartNs) / 1_000_000)
                .put("sinceJvmStartMs", sinceJvmStartMs())
                .emit();
            awaitShutdown(barrier, options);
        }
        Json.event("stopped").put("role", "driver").emit();
        return InteropPeer.EXIT_OK;
    }

    /** A driver context for a directory the caller owns: stale files from a dead driver are removed. */
    static MediaDriver.Context driverContext(final String aeronDir, final boolean dedicated)
    {
        return new MediaDriver.Context()
            .aeronDirectoryName(aeronDir)
            .dirDeleteOnStart(true)
            .warnIfDirectoryExists(false)
            .termBufferSparseFile(true)
            // Shared mode keeps the JVM to one busy thread: the machines these tests run on are small.
            .threadingMode(dedicated ? ThreadingMode.DEDICATED : ThreadingMode.SHARED);
    }

    private static boolean threadingIsDedicated(final Options options)
    {
        final String threading = options.string("threading", "shared");
        if (!"shared".equals(threading) && !"dedicated".equals(threading))
        {
            throw new UsageException("--threading must be 'shared' or 'dedicated', got '" + threading + "'");
        }
        return "dedicated".equals(threading);
    }

    private static void awaitShutdown(final ShutdownSignalBarrier barrier, final Options options)
    {
        if (!options.flag("no-stdin-watch"))
        {
            final Thread watcher = new Thread(() -> drainUntilEof(System.in, barrier), "stdin-watch");
            watcher.setDaemon(true);
            watcher.start();
        }
        barrier.await();
        System.err.println("[interop-peer] shutting down");
    }

    private static void drainUntilEof(final InputStream in, final ShutdownSignalBarrier barrier)
    {
        final byte[] sink = new byte[256];
        try
        {
            while (in.read(sink) >= 0)
            {
                // Anything written to stdin is ignored; only end-of-file matters.
            }
        }
        catch (final IOException ignored)
        {
            // A broken stdin means the parent is gone: shut down as for end-of-file.
        }
        barrier.signal();
    }

    private static long sinceJvmStartMs()
    {
        return System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime();
    }
}
