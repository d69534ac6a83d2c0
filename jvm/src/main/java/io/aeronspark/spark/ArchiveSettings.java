package io.aeronspark.spark;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Objects;

import io.aeronspark.spark.options.OptionError;
import io.aeronspark.spark.options.OptionSpecs;

/**
 * How to reach an archive, from the archive.* and aeron.dir options (serialisable: partitions carry
 * it to executors). The secret of archive.credentials is kept but never printed.
 */
public final class ArchiveSettings implements Serializable {
    private static final long serialVersionUID = 1L;

    public static final String CONTROL_CHANNEL = "archive.controlChannel";
    public static final String CONTROL_STREAM_ID = "archive.controlStreamId";
    public static final String RESPONSE_CHANNEL = "archive.responseChannel";
    public static final String RESPONSE_STREAM_ID = "archive.responseStreamId";
    public static final String TIMEOUT_MS = "archive.timeoutMs";
    public static final String AERON_DIR = "aeron.dir";
    public static final String CREDENTIALS = "archive.credentials";
    public static final String CREDENTIALS_ENCODING = "archive.credentialsEncoding";

    public final String controlChannel;
    public final int controlStreamId;
    public final String responseChannel;
    public final int responseStreamId;
    public final long timeoutMs;
    /** The media driver directory to use; null: $AERON_DIR's driver if one runs, else an embedded one. */
    public final String aeronDir;
    private final String credentials;
    public final String credentialsEncoding;
    /** archive.responseChannel was not given: a UDP default an executor may point at its own host's address. */
    public final boolean responseChannelDefaulted;

    private ArchiveSettings(final String controlChannel, final int controlStreamId, final String responseChannel,
                            final int responseStreamId, final long timeoutMs, final String aeronDir,
                            final String credentials, final String credentialsEncoding,
                            final boolean responseChannelDefaulted) {
        this.controlChannel = controlChannel;
        this.controlStreamId = controlStreamId;
        this.responseChannel = responseChannel;
        this.responseStreamId = responseStreamId;
        this.timeoutMs = timeoutMs;
        this.aeronDir = aeronDir;
        this.responseChannelDefaulted = responseChannelDefaulted;
        this.credentials = credentials;
        this.credentialsEncoding = credentialsEncoding;
    }

    /** From canonical options (OptionSpecs.canonical). */
    public static ArchiveSettings from(final Map<String, String> options) {
        final OptionSpecs specs = OptionSpecs.get();
        final String control = specs.channel(options, CONTROL_CHANNEL);
        if (control == null) {
            throw new OptionError("option " + CONTROL_CHANNEL + " is required: the archive's control channel, e.g. "
                + "aeron:udp?endpoint=archive-host:8010 (the JVM source and sink reach an archive by it only)");
        }
        String response = specs.channel(options, RESPONSE_CHANNEL);
        final boolean defaulted = response == null;
        if (defaulted) {
            // The Java client resolves port 0 and tells the archive the bound port.
            response = control.startsWith("aeron:ipc") ? "aeron:ipc" : "aeron:udp?endpoint=localhost:0";
        }
        final String credentials = options.get(CREDENTIALS);
        if (credentials != null) {
            final int colon = credentials.indexOf(':');
            if (colon <= 0 || colon == credentials.length() - 1) {
                // Never quote the value: it holds a secret.
                throw new OptionError("option " + CREDENTIALS + " is not valid; accepted: "
                    + specs.spec(CREDENTIALS).accepted);
            }
        }
        final String encoding = specs.choice(options, CREDENTIALS_ENCODING);
        if (options.containsKey(CREDENTIALS_ENCODING) && credentials == null) {
            throw new OptionError("option " + CREDENTIALS_ENCODING + " needs " + CREDENTIALS);
        }
        return new ArchiveSettings(control, specs.number(options, CONTROL_STREAM_ID).intValue(), response,
            specs.number(options, RESPONSE_STREAM_ID).intValue(), specs.number(options, TIMEOUT_MS),
            specs.string(options, AERON_DIR), credentials, encoding, defaulted);
    }

    /** The same archive, its control responses asked on another channel (an executor's own address). */
    public ArchiveSettings withResponseChannel(final String channel) {
        return new ArchiveSettings(controlChannel, controlStreamId, channel, responseStreamId, timeoutMs, aeronDir,
            credentials, credentialsEncoding, responseChannelDefaulted);
    }

    public boolean responseChannelMode() {
        return responseChannel.contains("control-mode=response");
    }

    boolean hasCredentials() {
        return credentials != null;
    }

    String principal() {
        return credentials.substring(0, credentials.indexOf(':'));
    }

    byte[] secret() {
        return credentials.substring(credentials.indexOf(':') + 1).getBytes(StandardCharsets.UTF_8);
    }

    /** For errors: where the archive is, in the options' terms. */
    public String describeEndpoint() {
        return CONTROL_CHANNEL + "=" + controlChannel + " (stream " + controlStreamId + ")";
    }

    @Override
    public boolean equals(final Object other) {
        if (!(other instanceof ArchiveSettings)) {
            return false;
        }
        final ArchiveSettings that = (ArchiveSettings) other;
        return controlChannel.equals(that.controlChannel) && controlStreamId == that.controlStreamId
            && responseChannel.equals(that.responseChannel) && responseStreamId == that.responseStreamId
            && timeoutMs == that.timeoutMs && Objects.equals(aeronDir, that.aeronDir)
            && Objects.equals(credentials, that.credentials) && Objects.equals(credentialsEncoding, that.credentialsEncoding);
    }

    @Override
    public int hashCode() {
        return Objects.hash(controlChannel, controlStreamId, responseChannel, responseStreamId, timeoutMs, aeronDir);
    }

    @Override
    public String toString() {
        return "ArchiveSettings[" + describeEndpoint() + ", response " + responseChannel + " (stream "
            + responseStreamId + "), timeoutMs=" + timeoutMs + (credentials != null ? ", credentials=***" : "") + "]";
    }
}
