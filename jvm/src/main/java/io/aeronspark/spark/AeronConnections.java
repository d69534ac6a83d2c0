package io.aeronspark.spark;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import io.aeron.Aeron;
import io.aeron.CommonContext;
import io.aeron.archive.client.AeronArchive;
import io.aeron.driver.Configuration;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.security.CredentialsSupplier;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * One Aeron client per JVM per media driver directory, and archive clients built from the options.
 *
 * <p>When no media driver runs at the directory asked for (aeron.dir, else $AERON_DIR), the JVM
 * launches an embedded Java MediaDriver of its own, closed at JVM exit: with aeron.dir given, in that
 * directory; without, in a directory unique to this JVM, so two executors on one host never share
 * (or fight over) one.
 */
public final class AeronConnections {
    /** The challenge our sidecar sends to a client that gave only its principal (archive.credentialsEncoding=challenge). */
    private static final String CHALLENGE_PREFIX = "hmac-sha256:";
    private static final long DRIVER_ACTIVE_TIMEOUT_MS = 2_000;

    private static final Map<String, Aeron> CLIENTS = new HashMap<>();
    private static final Map<String, MediaDriver> DRIVERS = new HashMap<>();
    private static boolean hookAdded;

    private AeronConnections() {
    }

    /** The shared client on the driver at {@code aeronDir} (null: $AERON_DIR's, else an embedded one). */
    public static synchronized Aeron aeron(final String aeronDir) {
        final String key = aeronDir == null ? "" : aeronDir;
        final Aeron existing = CLIENTS.get(key);
        if (existing != null && !existing.isClosed()) {
            return existing;
        }
        String dir = aeronDir;
        if (dir == null) {
            final String fromEnv = System.getenv("AERON_DIR");
            dir = fromEnv != null && !fromEnv.isEmpty() ? fromEnv : null;
        }
        if (dir == null || !CommonContext.isDriverActive(new File(dir), DRIVER_ACTIVE_TIMEOUT_MS, message -> { })) {
            if (dir == null || aeronDir == null) {
                dir = CommonContext.getAeronDirectoryName() + "-spark-" + ProcessHandle.current().pid();
            }
            launchEmbeddedDriver(dir);
        }
        final Aeron client = Aeron.connect(new Aeron.Context().aeronDirectoryName(dir).clientName("aeron-spark-jvm"));
        CLIENTS.put(key, client);
        addShutdownHook();
        return client;
    }

    private static void launchEmbeddedDriver(final String dir) {
        if (DRIVERS.containsKey(dir)) {
            return;
        }
        // Shared threading, one thread: Spark's cores stay Spark's.
        final MediaDriver.Context context = new MediaDriver.Context().aeronDirectoryName(dir)
            .threadingMode(ThreadingMode.SHARED).dirDeleteOnStart(true).dirDeleteOnShutdown(true)
            .termBufferSparseFile(true);
        if (System.getProperty(Configuration.SHARED_IDLE_STRATEGY_PROP_NAME) == null) {
            context.sharedIdleStrategy(newSharedIdleStrategy());
        }
        DRIVERS.put(dir, MediaDriver.launch(context));
    }

    /**
     * Aeron's default back-off (10 spins, 20 yields, parks from 1 us) wakes the driver's one thread ~40 times
     * after every message, each wake a duty cycle with socket syscalls: 28 % of a core at 1,000 msg/s beside
     * a Spark driver, which then planned each real-time batch late (docs/realtime.md, "Idle strategies").
     * Parks from 50 us to Aeron's 1 ms halved that (13-15 %); a message waits at most the same 1 ms.
     * {@code -Daeron.shared.idle.strategy} replaces it.
     */
    static IdleStrategy newSharedIdleStrategy() {
        return new BackoffIdleStrategy(1, 2, TimeUnit.MICROSECONDS.toNanos(50), TimeUnit.MILLISECONDS.toNanos(1));
    }

    private static void addShutdownHook() {
        if (!hookAdded) {
            hookAdded = true;
            Runtime.getRuntime().addShutdownHook(new Thread(AeronConnections::closeAll, "aeron-spark-jvm-close"));
        }
    }

    static synchronized void closeAll() {
        CLIENTS.values().forEach(Aeron::close);
        CLIENTS.clear();
        DRIVERS.values().forEach(MediaDriver::close);
        DRIVERS.clear();
    }

    /**
     * A connected archive client (the caller closes it; the Aeron client stays shared). Fails within
     * archive.timeoutMs naming the endpoint and the option when the archive does not answer.
     */
    public static AeronArchive connectArchive(final ArchiveSettings settings) {
        final Aeron aeron = aeron(settings.aeronDir);
        final AeronArchive.Context context = new AeronArchive.Context().aeron(aeron).ownsAeronClient(false)
            .controlRequestChannel(settings.controlChannel).controlRequestStreamId(settings.controlStreamId)
            .controlResponseChannel(settings.responseChannel).controlResponseStreamId(settings.responseStreamId)
            .messageTimeoutNs(TimeUnit.MILLISECONDS.toNanos(settings.timeoutMs));
        if (settings.hasCredentials()) {
            context.credentialsSupplier(credentials(settings));
        }
        try {
            return AeronArchive.connect(context);
        } catch (RuntimeException error) {
            throw new ArchiveUnreachableException("could not connect to the Aeron archive at " + settings.describeEndpoint()
                + " within " + ArchiveSettings.TIMEOUT_MS + "=" + settings.timeoutMs + ": " + error.getMessage()
                + " (check that an archive serves that control channel and that option " + ArchiveSettings.CONTROL_CHANNEL
                + " names it)", error);
        }
    }

    private static CredentialsSupplier credentials(final ArchiveSettings settings) {
        final String principal = settings.principal();
        final byte[] secret = settings.secret();
        final boolean plain = "plain".equals(settings.credentialsEncoding);
        return new CredentialsSupplier() {
            @Override
            public byte[] encodedCredentials() {
                if (plain) {
                    final byte[] name = (principal + ":").getBytes(StandardCharsets.US_ASCII);
                    final byte[] out = new byte[name.length + secret.length];
                    System.arraycopy(name, 0, out, 0, name.length);
                    System.arraycopy(secret, 0, out, name.length, secret.length);
                    return out;
                }
                return principal.getBytes(StandardCharsets.US_ASCII);
            }

            @Override
            public byte[] onChallenge(final byte[] encodedChallenge) {
                final String challenge = new String(encodedChallenge, StandardCharsets.ISO_8859_1);
                if (!challenge.startsWith(CHALLENGE_PREFIX)) {
                    throw new IllegalStateException("the archive sent an authentication challenge this client cannot "
                        + "answer; it answers " + CHALLENGE_PREFIX + " challenges only");
                }
                try {
                    final Mac mac = Mac.getInstance("HmacSHA256");
                    mac.init(new SecretKeySpec(secret, "HmacSHA256"));
                    final String digest = HexFormat.of().formatHex(mac.doFinal(encodedChallenge));
                    return (principal + ":" + digest).getBytes(StandardCharsets.US_ASCII);
                } catch (GeneralSecurityException error) {
                    throw new IllegalStateException("HMAC-SHA256 unavailable: " + error, error);
                }
            }
        };
    }

    /** The archive did not answer within archive.timeoutMs. */
    public static final class ArchiveUnreachableException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public ArchiveUnreachableException(final String message, final Throwable cause) {
            super(message, cause);
        }
    }
}
