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
                    if (streamId == options.streamId && sameStream(strippedChannel, options.channel)) {
                        found[0] = true;
                    }
                });
            if (found[0]) {
                return false;
            }
            archive.startRecording(options.channel, options.streamId,
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

    /** The same media and, for UDP, the same endpoint (or MDC control address): the same recorded traffic. */
    static boolean sameStream(final String recorded, final String wanted) {
        final ChannelUri a = ChannelUri.parse(recorded);
        final ChannelUri b = ChannelUri.parse(wanted);
        if (!a.media().equals(b.media())) {
            return false;
        }
        if (a.isIpc()) {
            return true;
        }
        return same(a.get(CommonContext.ENDPOINT_PARAM_NAME), b.get(CommonContext.ENDPOINT_PARAM_NAME))
            && same(a.get(CommonContext.MDC_CONTROL_PARAM_NAME), b.get(CommonContext.MDC_CONTROL_PARAM_NAME));
    }

    private static boolean same(final String a, final String b) {
        return a == null ? b == null : a.equals(b);
    }
}
