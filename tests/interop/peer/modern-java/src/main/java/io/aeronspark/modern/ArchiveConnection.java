package io.aeronspark.modern;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import io.aeron.Aeron;
import io.aeron.archive.client.AeronArchive;
import io.aeron.driver.MediaDriver;
import io.aeron.security.CredentialsSupplier;
import org.agrona.CloseHelper;
import org.agrona.IoUtil;

/**
 * The Aeron client, and for archive commands the real {@link AeronArchive}, of one peer
 * invocation. It attaches to the driver in {@code --aeron-dir}, or with {@code --embedded-driver}
 * launches a private Java driver whose directory is removed again on close.
 */
final class ArchiveConnection implements AutoCloseable
{
    static final String DEFAULT_CONTROL_CHANNEL = "aeron:udp?endpoint=localhost:8010";
    /** Port 0: the client resolves the port the OS picked and sends it in its ConnectRequest. */
    static final String DEFAULT_RESPONSE_CHANNEL = "aeron:udp?endpoint=localhost:0";

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

    /** Attaches (or launches a driver) and, when {@code connectArchive}, connects an AeronArchive. */
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
                driverDir = newEmbeddedDriverDir();
                driver = MediaDriver.launchEmbedded(ServerCommands.driverContext(driverDir.getPath(), false));
                aeronDir = driver.aeronDirectoryName();
            }
            else if (options.has("aeron-dir"))
            {
                aeronDir = options.requiredString("aeron-dir");
            }
            else
            {
                throw new UsageException(options.command() + ": give --aeron-dir A or --embedded-driver");
            }
            aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(aeronDir));
            final AeronArchive archive = connectArchive ? AeronArchive.connect(archiveContext(options, aeron)) : null;
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

    static AeronArchive.Context archiveContext(final Options options, final Aeron aeron)
    {
        final AeronArchive.Context context = new AeronArchive.Context()
            .aeron(aeron)
            .ownsAeronClient(false)
            .controlRequestChannel(options.string("control-channel", DEFAULT_CONTROL_CHANNEL))
            .controlRequestStreamId(options.intValue(
                "control-stream-id", AeronArchive.Configuration.CONTROL_STREAM_ID_DEFAULT))
            .controlResponseChannel(options.string("response-channel", DEFAULT_RESPONSE_CHANNEL))
            .controlResponseStreamId(options.intValue(
                "response-stream-id", AeronArchive.Configuration.CONTROL_RESPONSE_STREAM_ID_DEFAULT))
            .messageTimeoutNs(options.longValue("message-timeout-ms", 5_000) * 1_000_000L);
        if (options.flag("signals"))
        {
            context.recordingSignalConsumer(RecordingSignals.INSTANCE);
        }
        if (options.has("credentials"))
        {
            context.credentialsSupplier(new FixedCredentials(options.requiredString("credentials")));
        }
        if (options.has("hmac-credentials"))
        {
            context.credentialsSupplier(new HmacChallengeCredentials(options.requiredString("hmac-credentials")));
        }
        return context;
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

    private static File newEmbeddedDriverDir()
    {
        final Path shm = Path.of("/dev/shm");
        final Path base = Files.isDirectory(shm) && Files.isWritable(shm) ?
            shm : Path.of(System.getProperty("java.io.tmpdir"));
        try
        {
            return Files.createTempDirectory(base, "aeron-modern-peer-").toFile();
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("cannot create an embedded driver directory under " + base, ex);
        }
    }

    /** Sends {@code --credentials} as given (UTF-8) in the ConnectRequest and answers a challenge with them too. */
    private static final class FixedCredentials implements CredentialsSupplier
    {
        private final byte[] encoded;

        FixedCredentials(final String credentials)
        {
            this.encoded = credentials.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public byte[] encodedCredentials()
        {
            return encoded.clone();
        }

        @Override
        public byte[] onChallenge(final byte[] encodedChallenge)
        {
            return encoded.clone();
        }
    }
}
