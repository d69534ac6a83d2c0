package io.aeronspark.modern;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;

import io.aeron.archive.Archive;
import io.aeron.archive.ArchiveThreadingMode;
import io.aeron.archive.ArchivingMediaDriver;
import io.aeron.archive.checksum.Checksums;
import io.aeron.archive.client.AeronArchive;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.security.AuthenticatorSupplier;
import io.aeron.security.SimpleAuthenticator;
import org.agrona.CloseHelper;

/**
 * The long-running subcommands: {@code archive} (a real Archive, with its own MediaDriver or on an
 * already running driver) and {@code driver} (a plain Java MediaDriver). Each prints one "ready"
 * line, runs until stdin reaches end-of-file, SIGTERM or SIGINT, closes, and prints "stopped".
 */
final class ServerCommands
{
    static final String DEFAULT_REPLICATION_CHANNEL = "aeron:udp?endpoint=localhost:0";

    private ServerCommands()
    {
    }

    static int archive(final Options options)
    {
        final String archiveDir = options.requiredString("archive-dir");
        final String aeronDir = options.requiredString("aeron-dir");
        final String controlChannel = options.string("control-channel", "aeron:udp?endpoint=localhost:8010");
        final int controlStreamId = options.intValue(
            "control-stream-id", AeronArchive.Configuration.CONTROL_STREAM_ID_DEFAULT);
        final String localControlChannel = options.string(
            "local-control-channel", AeronArchive.Configuration.LOCAL_CONTROL_CHANNEL_DEFAULT);
        final int localControlStreamId = options.intValue(
            "local-control-stream-id", AeronArchive.Configuration.LOCAL_CONTROL_STREAM_ID_DEFAULT);
        final String replicationChannel = options.string("replication-channel", DEFAULT_REPLICATION_CHANNEL);
        final String eventsChannel = options.string(
            "recording-events-channel", AeronArchive.Configuration.RECORDING_EVENTS_CHANNEL_DEFAULT);
        final int eventsStreamId = options.intValue(
            "recording-events-stream-id", AeronArchive.Configuration.RECORDING_EVENTS_STREAM_ID_DEFAULT);
        final int segmentLength = options.intValue("segment-length", Archive.Configuration.segmentFileLength());
        final boolean dedicated = dedicatedThreading(options);
        final boolean externalDriver = options.flag("external-driver");
        final String recordChecksum = options.string("record-checksum", null);

        final File archiveDirectory = new File(archiveDir);
        if (!archiveDirectory.mkdirs() && !archiveDirectory.isDirectory())
        {
            throw new UsageException("archive: cannot create --archive-dir " + archiveDir);
        }

        final Archive.Context archiveContext = new Archive.Context()
            .aeronDirectoryName(aeronDir)
            .archiveDir(archiveDirectory)
            .controlChannel(controlChannel)
            .controlStreamId(controlStreamId)
            .localControlChannel(localControlChannel)
            .localControlStreamId(localControlStreamId)
            .replicationChannel(replicationChannel)
            .recordingEventsEnabled(true)
            .recordingEventsChannel(eventsChannel)
            .recordingEventsStreamId(eventsStreamId)
            .segmentFileLength(segmentLength)
            .deleteArchiveOnStart(options.flag("delete-archive-on-start"))
            .threadingMode(dedicated ? ArchiveThreadingMode.DEDICATED : ArchiveThreadingMode.SHARED);
        if (options.has("credentials"))
        {
            archiveContext.authenticatorSupplier(credentialsAuthenticator(
                options.requiredString("credentials"), options.has("challenge") ? options.requiredString("challenge") : null));
        }
        if (options.has("archive-id"))
        {
            archiveContext.archiveId(options.requiredLong("archive-id"));
        }
        if (recordChecksum != null)
        {
            if (!"crc32c".equals(recordChecksum) && !"crc32".equals(recordChecksum))
            {
                throw new UsageException("archive: --record-checksum must be 'crc32c' or 'crc32', got '" +
                    recordChecksum + "'");
            }
            archiveContext.recordChecksum("crc32c".equals(recordChecksum) ? Checksums.crc32c() : Checksums.crc32());
        }

        final CountDownLatch stop = stopOnSignal();
        final long launchStartNs = System.nanoTime();
        AutoCloseable running = null;
        try
        {
            final Archive archive;
            if (externalDriver)
            {
                archive = Archive.launch(archiveContext);
                running = archive;
            }
            else
            {
                final ArchivingMediaDriver launched = ArchivingMediaDriver.launch(
                    driverContext(aeronDir, dedicated).spiesSimulateConnection(options.flag("spies-simulate-connection")),
                    archiveContext);
                running = launched;
                archive = launched.archive();
            }
            final Archive.Context concluded = archive.context();
            Json.event("ready")
                .put("role", "archive")
                .put("aeronVersion", Versions.AERON)
                .put("archiveProtocolVersion", Versions.ARCHIVE_PROTOCOL)
                .put("pid", ProcessHandle.current().pid())
                .put("archiveId", concluded.archiveId())
                .put("aeronDir", aeronDir)
                .put("archiveDir", concluded.archiveDir().getPath())
                .put("controlChannel", controlChannel)
                .put("controlStreamId", controlStreamId)
                .put("localControlChannel", localControlChannel)
                .put("localControlStreamId", localControlStreamId)
                .put("replicationChannel", replicationChannel)
                .put("recordingEventsChannel", eventsChannel)
                .put("recordingEventsStreamId", eventsStreamId)
                .put("segmentFileLength", concluded.segmentFileLength())
                .put("recordChecksum", recordChecksum)
                .put("authenticated", options.has("credentials"))
                .put("threading", dedicated ? "dedicated" : "shared")
                .put("externalDriver", externalDriver)
                .put("launchMs", (System.nanoTime() - launchStartNs) / 1_000_000)
                .put("sinceJvmStartMs", sinceJvmStartMs())
                .emit();
            awaitShutdown(stop, options);
        }
        finally
        {
            CloseHelper.close(running);
        }
        Json.event("stopped").put("role", "archive").emit();
        return ModernPeer.EXIT_OK;
    }

    static int driver(final Options options)
    {
        final String aeronDir = options.requiredString("aeron-dir");
        final boolean dedicated = dedicatedThreading(options);
        final CountDownLatch stop = stopOnSignal();
        final long launchStartNs = System.nanoTime();
        final MediaDriver.Context context = driverContext(aeronDir, dedicated)
            .spiesSimulateConnection(options.flag("spies-simulate-connection"));
        try (MediaDriver driver = MediaDriver.launch(context))
        {
            Json.event("ready")
                .put("role", "driver")
                .put("aeronVersion", Versions.AERON)
                .put("pid", ProcessHandle.current().pid())
                .put("aeronDir", driver.aeronDirectoryName())
                .put("threading", dedicated ? "dedicated" : "shared")
                .put("launchMs", (System.nanoTime() - launchStartNs) / 1_000_000)
                .put("sinceJvmStartMs", sinceJvmStartMs())
                .emit();
            awaitShutdown(stop, options);
        }
        Json.event("stopped").put("role", "driver").emit();
        return ModernPeer.EXIT_OK;
    }

    /**
     * {@code --credentials user:pass}: Aeron's own {@link SimpleAuthenticator} knowing one principal
     * ({@code user}) whose encoded credentials are exactly the UTF-8 bytes of {@code user:pass}. A
     * connect request with other credentials, or none, is rejected; there is no challenge. With
     * {@code --challenge TEXT} the {@link ChallengingAuthenticator} instead: connect with {@code user},
     * answer the challenge TEXT with {@code user:pass}.
     */
    static AuthenticatorSupplier credentialsAuthenticator(final String credentials, final String challenge)
    {
        final int colon = credentials.indexOf(':');
        if (colon <= 0 || colon == credentials.length() - 1)
        {
            throw new UsageException("archive: --credentials must be user:pass, got '" + credentials + "'");
        }
        final byte[] principal = credentials.substring(0, colon).getBytes(StandardCharsets.UTF_8);
        final byte[] encoded = credentials.getBytes(StandardCharsets.UTF_8);
        if (challenge != null)
        {
            final byte[] challengeBytes = challenge.getBytes(StandardCharsets.UTF_8);
            return () -> new ChallengingAuthenticator(principal, encoded, challengeBytes);
        }
        return () -> new SimpleAuthenticator.Builder().principal(principal, encoded).newInstance();
    }

    /** A driver in a directory the caller owns: whatever a dead driver left there is removed first. */
    static MediaDriver.Context driverContext(final String aeronDir, final boolean dedicated)
    {
        return new MediaDriver.Context()
            .aeronDirectoryName(aeronDir)
            .dirDeleteOnStart(true)
            .warnIfDirectoryExists(false)
            .termBufferSparseFile(true)
            // Shared threading keeps the JVM to one busy thread: these machines are small and shared.
            .threadingMode(dedicated ? ThreadingMode.DEDICATED : ThreadingMode.SHARED);
    }

    private static boolean dedicatedThreading(final Options options)
    {
        final String threading = options.string("threading", "shared");
        if (!"shared".equals(threading) && !"dedicated".equals(threading))
        {
            throw new UsageException(options.command() + ": --threading must be 'shared' or 'dedicated', got '" +
                threading + "'");
        }
        return "dedicated".equals(threading);
    }

    /**
     * A latch released by SIGTERM or SIGINT. Handled here rather than with Agrona's
     * ShutdownSignalBarrier: that one now lets the JVM's shutdown start and holds it in a hook, so
     * the process would end with 143 instead of closing Aeron in order and exiting 0.
     */
    @SuppressWarnings("removal")
    private static CountDownLatch stopOnSignal()
    {
        final CountDownLatch stop = new CountDownLatch(1);
        for (final String name : new String[] {"TERM", "INT"})
        {
            sun.misc.Signal.handle(new sun.misc.Signal(name), signal -> stop.countDown());
        }
        return stop;
    }

    private static void awaitShutdown(final CountDownLatch stop, final Options options)
    {
        if (!options.flag("no-stdin-watch"))
        {
            final Thread watcher = new Thread(() -> releaseAtEndOfInput(System.in, stop), "stdin-watch");
            watcher.setDaemon(true);
            watcher.start();
        }
        try
        {
            stop.await();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        System.err.println("[modern-peer] shutting down");
    }

    /** An orphaned server (its parent died, so stdin closed) shuts itself down. */
    private static void releaseAtEndOfInput(final InputStream in, final CountDownLatch stop)
    {
        final byte[] sink = new byte[256];
        try
        {
            while (in.read(sink) >= 0)
            {
                // Only end-of-file matters; what is written is ignored.
            }
        }
        catch (final IOException ignored)
        {
            // A broken stdin means the parent is gone, as for end-of-file.
        }
        stop.countDown();
    }

    static long sinceJvmStartMs()
    {
        return System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime();
    }
}
