package io.aeronspark.spark.sink;

import io.aeron.ChannelUri;
import io.aeron.CommonContext;
import io.aeron.archive.client.AeronArchive;
import io.aeron.archive.codecs.SourceLocation;
import io.aeronspark.spark.AeronConnections;

/**
 * Run on the driver when the query starts: make the archive record the sink's channel and stream
 * unless a recording subscription for it is there already (a previous run's, or the user's). The
 * subscription stays after the query ends, so the next run's rows go to the same kind of recording
 * (one per publishing session) without a gap.
 */
final class SinkRecording {
    /** "aeron:" is in every channel: list the stream's recording subscriptions whatever their channel. */
    private static final String ANY_CHANNEL = "aeron:";
    private static final int LIST_LIMIT = 1_000;

    private SinkRecording() {
    }

    /** Returns true when it started a recording, false when one was there. */
    static boolean ensure(final SinkOptions options) {
        try (AeronArchive archive = AeronConnections.connectArchive(options.archive)) {
            final boolean[] found = {false};
            archive.listRecordingSubscriptions(0, LIST_LIMIT, ANY_CHANNEL, options.streamId, true,
                (controlSessionId, correlationId, subscriptionId, streamId, strippedChannel) -> {
                    if (streamId == options.streamId && sameStream(strippedChannel, recordingChannel(options))) {
                        found[0] = true;
                    }
                });
            if (found[0]) {
                return false;
            }
            archive.startRecording(recordingChannel(options), options.streamId,
                options.localSource ? SourceLocation.LOCAL : SourceLocation.REMOTE);
            return true;
        } catch (RuntimeException error) {
            if (error instanceof AeronConnections.ArchiveUnreachableException) {
                throw error;
            }
            throw new IllegalStateException("format(\"aeron-archive-jvm\") sink: could not have the archive at "
                + options.archive.describeEndpoint() + " record " + options.describeStream() + ": " + error.getMessage(),
                error);
        }
    }

    /**
     * The channel the archive subscribes with. A plain UDP or IPC channel as given. A dynamic
     * multi-destination channel ({@code aeron:udp?control=H:P|control-mode=dynamic}: the publication
     * sends to every subscriber that registers at its control address, so other readers can follow the
     * stream live beside the archive) is recorded as a subscriber of it, at an ephemeral port on the
     * archive's host (the host of archive.controlChannel's endpoint).
     */
    static String recordingChannel(final SinkOptions options) {
        final ChannelUri uri = ChannelUri.parse(options.channel);
        if (!uri.isUdp() || !CommonContext.MDC_CONTROL_MODE_DYNAMIC.equals(
            uri.get(CommonContext.MDC_CONTROL_MODE_PARAM_NAME))) {
            return options.channel;
        }
        final ChannelUri control = ChannelUri.parse(options.archive.controlChannel);
        final String endpoint = control.isUdp() ? control.get(CommonContext.ENDPOINT_PARAM_NAME) : null;
        final String host = endpoint == null ? "localhost" : endpoint.substring(0, endpoint.lastIndexOf(':'));
        return "aeron:udp?endpoint=" + host + ":0|control=" + uri.get(CommonContext.MDC_CONTROL_PARAM_NAME);
    }

    /** The same media and, for UDP, the same MDC control address, else the same endpoint: the same traffic. */
    static boolean sameStream(final String recorded, final String wanted) {
        final ChannelUri a = ChannelUri.parse(recorded);
        final ChannelUri b = ChannelUri.parse(wanted);
        if (!a.media().equals(b.media())) {
            return false;
        }
        if (a.isIpc()) {
            return true;
        }
        final String controlA = a.get(CommonContext.MDC_CONTROL_PARAM_NAME);
        final String controlB = b.get(CommonContext.MDC_CONTROL_PARAM_NAME);
        if (controlA != null || controlB != null) {
            return same(controlA, controlB);  // a subscriber of one MDC publication (its own endpoint is ephemeral)
        }
        return same(a.get(CommonContext.ENDPOINT_PARAM_NAME), b.get(CommonContext.ENDPOINT_PARAM_NAME));
    }

    private static boolean same(final String a, final String b) {
        return a == null ? b == null : a.equals(b);
    }
}
