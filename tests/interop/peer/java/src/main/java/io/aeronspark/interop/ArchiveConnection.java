package io.aeronspark.interop;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import io.aeron.Aeron;
import io.aeron.archive.client.AeronArchive;
import io.aeron.driver.MediaDriver;
import org.agrona.CloseHelper;
import org.agrona.IoUtil;

/**
 * The Aeron client (and, for the client subcommands, the real 1.15.1 {@link AeronArchive}) that one
 * peer invocation uses. It attaches to the driver in {@code --aeron-dir}, or with
 * {@code --embedded-driver} launches a private Java driver that is removed again on close.
 */
final class ArchiveConnection implements AutoCloseable
{
    final Aeron aeron;
    final AeronArchive archive;
    private final MediaDriver embeddedDriver;
    private final File embeddedDir;

    private ArchiveConnection(
        final MediaDriver embeddedDriver, final File embeddedDir, final Aeron aeron, final AeronArchive archive)
    {
        this.embeddedDriver = embeddedDriver;
        this.embeddedDir = embeddedDir;
        this.aeron = aeron;
        this.archive = archive;
    }

    static ArchiveConnection open(final Options options, final boolean connectArchive)
    {
        MediaDriver driver = null;
        File driverDir = null;
        Aeron aeron = null;
        try
        {
            final String aeronDir;
            if (options.flag("embedded-driver"))
            {
                driverDir = embeddedDriverDir();
                driver = MediaDriver.launchEmbedded(ServerCommands.driverContext(driverDir.getPath(), false));
                aeronDir = driver.aeronDirectoryName();
            }
            else
            {
                aeronDir = options.requiredString("aeron-dir");
            }
            aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(aeronDir));

            AeronArchive archive = null;
            if (connectArchive)
            {
                final AeronArchive.Context context = new AeronArchive.Context()
                    .aeron(aeron)
                    .ownsAeronClient(false)
                    .controlRequestChannel(options.string(
                        "control-channel", AeronArchive.Configuration.CONTROL_CHANNEL_DEFAULT))
                    .controlRequestStreamId(options.intValue(
                        "control-stream-id", AeronArchive.Configuration.CONTROL_STREAM_ID_DEFAULT))
                    .controlResponseChannel(options.string(
                        "response-channel", AeronArchive.Configuration.CONTROL_RESPONSE_CHANNEL_DEFAULT))
                    .controlResponseStreamId(options.intValue(
                        "response-stream-id", AeronArchive.Configuration.CONTROL_RESPONSE_STREAM_ID_DEFAULT))
                    .messageTimeoutNs(options.longValue("message-timeout-ms", 5_000) * 1_000_000L);
                archive = AeronArchive.connect(context);
            }
            return new ArchiveConnection(driver, driverDir, aeron, archive);
        }
        catch (final RuntimeException ex)
        {
            CloseHelper.quietClose(aeron);
            CloseHelper.quietClose(driver);
            if (driverDir != null)
            {
                IoUtil.delete(driverDir, true);
            }
            throw ex;
        }
    }

    @Override
    public void close()
    {
        CloseHelper.quietClose(archive);
        CloseHelper.quietClose(aeron);
        CloseHelper.quietClose(embeddedDriver);
        if (embeddedDir != null)
        {
            IoUtil.delete(embeddedDir, true);
        }
    }

    private static File embeddedDriverDir()
    {
        final Path shm = Paths.get("/dev/shm");
        final Path base = Files.isDirectory(shm) && Files.isWritable(shm) ?
            shm : Paths.get(System.getProperty("java.io.tmpdir"));
        try
        {
            return Files.createTempDirectory(base, "aeron-interop-peer-").toFile();
        }
        catch (final java.io.IOException ex)
        {
            throw new IllegalStateException("cannot create an embedded driver directory under " + base, ex);
        }
    }
}
