package io.aeronspark.interop;

import java.util.LinkedHashMap;
import java.util.Map;

import io.aeron.ExclusivePublication;
import io.aeron.Subscription;
import io.aeron.archive.client.ArchiveProxy;
import io.aeron.archive.codecs.ControlResponseCode;
import io.aeron.archive.codecs.ControlResponseEncoder;
import io.aeron.archive.codecs.MessageHeaderDecoder;
import io.aeron.archive.codecs.MessageHeaderEncoder;
import io.aeron.archive.codecs.RecordingDescriptorEncoder;
import io.aeron.archive.codecs.RecordingProgressEncoder;
import io.aeron.archive.codecs.RecordingStartedEncoder;
import io.aeron.archive.codecs.RecordingStoppedEncoder;
import io.aeron.archive.codecs.SourceLocation;
import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * {@code golden}: the exact bytes of 1.15.1 archive messages for fixed sample values, one JSON
 * line each. Client requests go through the real {@link ArchiveProxy} (what the 1.15.1
 * {@code AeronArchive} sends) over an IPC stream of an embedded driver and are captured from the
 * subscriber side, so they are the bytes an archive receives. Archive-to-client messages are made
 * with the 1.15.1 generated encoders, the way the 1.15.1 archive builds them.
 */
final class GoldenCommand
{
    private static final String CAPTURE_CHANNEL = "aeron:ipc";
    private static final int CAPTURE_STREAM_ID = 7_777;
    private static final long CONTROL_SESSION_ID = 42;

    private GoldenCommand()
    {
    }

    static int run(final Options options)
    {
        final Deadline deadline = new Deadline(options.longValue("timeout-ms", 30_000));
        try (ArchiveConnection connection = ArchiveConnection.open(options, false);
            Subscription subscription = connection.aeron.addSubscription(CAPTURE_CHANNEL, CAPTURE_STREAM_ID);
            ExclusivePublication publication = connection.aeron.addExclusivePublication(
                CAPTURE_CHANNEL, CAPTURE_STREAM_ID))
        {
            while (!publication.isConnected())
            {
                deadline.pause("the capture publication to connect");
            }
            final Capture capture = new Capture(subscription, publication, deadline);
            final ArchiveProxy proxy = new ArchiveProxy(publication);
            emitRequests(proxy, capture);
        }
        emitResponses();
        return InteropPeer.EXIT_OK;
    }

    private static void emitRequests(final ArchiveProxy proxy, final Capture capture)
    {
        final String responseChannel = "aeron:udp?endpoint=localhost:8020";
        final String recordedChannel = "aeron:udp?endpoint=localhost:40123|session-id=7";
        final String replayChannel = "aeron:udp?endpoint=localhost:8021";

        // 1.15.1 ArchiveProxy.stopReplay offers replayRequestEncoder.encodedLength() bytes of body
        // (a bug): from a proxy that never sent a ReplayRequest only the 8-byte header goes out.
        new ArchiveProxy(capture.subscriptionPublication).stopReplay(
            (1L << 32) | 0x0BAD_CAFEL, 1000, CONTROL_SESSION_ID);
        capture.emit("StopReplayRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1000L)
            .put("replaySessionId", (1L << 32) | 0x0BAD_CAFEL),
            "1.15.1 client bug: stopReplay sends header + replayRequestEncoder.encodedLength() bytes; " +
            "this proxy never encoded a ReplayRequest, so only the 8-byte header is sent and the body is missing");

        proxy.connect(responseChannel, 20, 1001);
        capture.emit("ConnectRequest", fields()
            .put("correlationId", 1001L).put("responseStreamId", 20).put("responseChannel", responseChannel));

        proxy.startRecording(recordedChannel, 1010, SourceLocation.REMOTE, 1002, CONTROL_SESSION_ID);
        capture.emit("StartRecordingRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1002L).put("streamId", 1010)
            .put("sourceLocation", "REMOTE").put("channel", recordedChannel));

        proxy.startRecording("aeron:ipc", 1012, SourceLocation.LOCAL, 1003, CONTROL_SESSION_ID);
        capture.emit("StartRecordingRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1003L).put("streamId", 1012)
            .put("sourceLocation", "LOCAL").put("channel", "aeron:ipc"));

        proxy.stopRecording(recordedChannel, 1010, 1004, CONTROL_SESSION_ID);
        capture.emit("StopRecordingRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1004L).put("streamId", 1010)
            .put("channel", recordedChannel));

        proxy.replay(5, 1024, 4096, replayChannel, 1011, 1005, CONTROL_SESSION_ID);
        capture.emit("ReplayRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1005L).put("recordingId", 5L)
            .put("position", 1024L).put("length", 4096L).put("replayStreamId", 1011)
            .put("replayChannel", replayChannel));

        proxy.replay(6, -1, Long.MAX_VALUE, replayChannel, 1011, 1006, CONTROL_SESSION_ID);
        capture.emit("ReplayRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1006L).put("recordingId", 6L)
            .put("position", -1L).put("length", Long.MAX_VALUE).put("replayStreamId", 1011)
            .put("replayChannel", replayChannel));

        proxy.stopReplay((3L << 32) | 0x1234_5678L, 1007, CONTROL_SESSION_ID);
        capture.emit("StopReplayRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1007L)
            .put("replaySessionId", (3L << 32) | 0x1234_5678L),
            "1.15.1 client bug: stopReplay sends header + replayRequestEncoder.encodedLength() bytes, so the " +
            "24-byte block is followed by the tail of the previous ReplayRequest (its bytes 32..)");

        proxy.listRecordings(0, 10, 1008, CONTROL_SESSION_ID);
        capture.emit("ListRecordingsRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1008L).put("fromRecordingId", 0L)
            .put("recordCount", 10));

        proxy.listRecordingsForUri(2, 5, "aeron:udp?endpoint=localhost:40123", 1010, 1009, CONTROL_SESSION_ID);
        capture.emit("ListRecordingsForUriRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1009L).put("fromRecordingId", 2L)
            .put("recordCount", 5).put("streamId", 1010).put("channel", "aeron:udp?endpoint=localhost:40123"));

        proxy.listRecording(7, 1010, CONTROL_SESSION_ID);
        capture.emit("ListRecordingRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1010L).put("recordingId", 7L));

        proxy.extendRecording(recordedChannel, 1010, SourceLocation.REMOTE, 8, 1011, CONTROL_SESSION_ID);
        capture.emit("ExtendRecordingRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1011L).put("recordingId", 8L)
            .put("streamId", 1010).put("sourceLocation", "REMOTE").put("channel", recordedChannel));

        proxy.getRecordingPosition(9, 1012, CONTROL_SESSION_ID);
        capture.emit("RecordingPositionRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1012L).put("recordingId", 9L));

        proxy.truncateRecording(10, 2048, 1013, CONTROL_SESSION_ID);
        capture.emit("TruncateRecordingRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1013L).put("recordingId", 10L)
            .put("position", 2048L));

        proxy.stopRecording(77, 1014, CONTROL_SESSION_ID);
        capture.emit("StopRecordingSubscriptionRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1014L).put("subscriptionId", 77L));

        proxy.getStopPosition(11, 1015, CONTROL_SESSION_ID);
        capture.emit("StopPositionRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1015L).put("recordingId", 11L));

        proxy.findLastMatchingRecording(1, "aeron:udp?endpoint=localhost:40123", 1010, 7, 1016, CONTROL_SESSION_ID);
        capture.emit("FindLastMatchingRecordingRequest", fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1016L).put("minRecordingId", 1L)
            .put("sessionId", 7).put("streamId", 1010).put("channel", "aeron:udp?endpoint=localhost:40123"));

        proxy.closeSession(CONTROL_SESSION_ID);
        capture.emit("CloseSessionRequest", fields().put("controlSessionId", CONTROL_SESSION_ID));
    }

    private static void emitResponses()
    {
        final ExpandableArrayBuffer buffer = new ExpandableArrayBuffer(1024);
        final MessageHeaderEncoder header = new MessageHeaderEncoder();

        final ControlResponseEncoder response = new ControlResponseEncoder();
        response.wrapAndApplyHeader(buffer, 0, header)
            .controlSessionId(CONTROL_SESSION_ID).correlationId(1001).relevantId(CONTROL_SESSION_ID)
            .code(ControlResponseCode.OK).errorMessage("");
        emitEncoded("ControlResponse", buffer, response.encodedLength(), fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1001L)
            .put("relevantId", CONTROL_SESSION_ID).put("code", "OK").put("errorMessage", ""));

        response.wrapAndApplyHeader(buffer, 0, header)
            .controlSessionId(CONTROL_SESSION_ID).correlationId(1005).relevantId(0)
            .code(ControlResponseCode.ERROR).errorMessage("recording not found: 5");
        emitEncoded("ControlResponse", buffer, response.encodedLength(), fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1005L).put("relevantId", 0L)
            .put("code", "ERROR").put("errorMessage", "recording not found: 5"));

        response.wrapAndApplyHeader(buffer, 0, header)
            .controlSessionId(CONTROL_SESSION_ID).correlationId(1008).relevantId(3)
            .code(ControlResponseCode.RECORDING_UNKNOWN).errorMessage("");
        emitEncoded("ControlResponse", buffer, response.encodedLength(), fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1008L).put("relevantId", 3L)
            .put("code", "RECORDING_UNKNOWN").put("errorMessage", ""));

        final RecordingDescriptorEncoder descriptor = new RecordingDescriptorEncoder();
        descriptor.wrapAndApplyHeader(buffer, 0, header)
            .controlSessionId(CONTROL_SESSION_ID).correlationId(1008).recordingId(0)
            .startTimestamp(1_700_000_000_000L).stopTimestamp(1_700_000_001_000L)
            .startPosition(0).stopPosition(65_536)
            .initialTermId(-559_038_737).segmentFileLength(128 * 1024 * 1024).termBufferLength(64 * 1024)
            .mtuLength(1408).sessionId(7).streamId(1010)
            .strippedChannel("aeron:udp?endpoint=localhost:40123")
            .originalChannel("aeron:udp?endpoint=localhost:40123|session-id=7")
            .sourceIdentity("127.0.0.1:51234");
        emitEncoded("RecordingDescriptor", buffer, descriptor.encodedLength(), fields()
            .put("controlSessionId", CONTROL_SESSION_ID).put("correlationId", 1008L).put("recordingId", 0L)
            .put("startTimestamp", 1_700_000_000_000L).put("stopTimestamp", 1_700_000_001_000L)
            .put("startPosition", 0L).put("stopPosition", 65_536L).put("initialTermId", -559_038_737)
            .put("segmentFileLength", 128 * 1024 * 1024).put("termBufferLength", 64 * 1024).put("mtuLength", 1408)
            .put("sessionId", 7).put("streamId", 1010)
            .put("strippedChannel", "aeron:udp?endpoint=localhost:40123")
            .put("originalChannel", "aeron:udp?endpoint=localhost:40123|session-id=7")
            .put("sourceIdentity", "127.0.0.1:51234"));

        final RecordingStartedEncoder started = new RecordingStartedEncoder();
        started.wrapAndApplyHeader(buffer, 0, header)
            .recordingId(4).startPosition(0).sessionId(7).streamId(1010)
            .channel("aeron:udp?endpoint=localhost:40123|session-id=7").sourceIdentity("127.0.0.1:51234");
        emitEncoded("RecordingStarted", buffer, started.encodedLength(), fields()
            .put("recordingId", 4L).put("startPosition", 0L).put("sessionId", 7).put("streamId", 1010)
            .put("channel", "aeron:udp?endpoint=localhost:40123|session-id=7").put("sourceIdentity", "127.0.0.1:51234"));

        final RecordingProgressEncoder progress = new RecordingProgressEncoder();
        progress.wrapAndApplyHeader(buffer, 0, header).recordingId(4).startPosition(0).position(8192);
        emitEncoded("RecordingProgress", buffer, progress.encodedLength(), fields()
            .put("recordingId", 4L).put("startPosition", 0L).put("position", 8192L));

        final RecordingStoppedEncoder stopped = new RecordingStoppedEncoder();
        stopped.wrapAndApplyHeader(buffer, 0, header).recordingId(4).startPosition(0).stopPosition(16_384);
        emitEncoded("RecordingStopped", buffer, stopped.encodedLength(), fields()
            .put("recordingId", 4L).put("startPosition", 0L).put("stopPosition", 16_384L));
    }

    private static void emitEncoded(final String name, final DirectBuffer buffer, final int bodyLength, final Json fields)
    {
        final byte[] bytes = new byte[MessageHeaderEncoder.ENCODED_LENGTH + bodyLength];
        buffer.getBytes(0, bytes);
        golden(name, "archive->client", "1.15.1 generated encoder", bytes, fields).emit();
    }

    private static Json golden(
        final String name, final String direction, final String source, final byte[] bytes, final Json fields)
    {
        final MessageHeaderDecoder header = new MessageHeaderDecoder().wrap(new UnsafeBuffer(bytes), 0);
        final Map<String, Object> headerFields = new LinkedHashMap<>();
        headerFields.put("blockLength", header.blockLength());
        headerFields.put("templateId", header.templateId());
        headerFields.put("schemaId", header.schemaId());
        headerFields.put("version", header.version());
        return Json.event("golden")
            .put("name", name)
            .put("direction", direction)
            .put("source", source)
            .put("header", headerFields)
            .put("fields", fields)
            .put("length", bytes.length)
            .put("hex", Payloads.hex(bytes));
    }

    private static Json fields()
    {
        return new Json();
    }

    /** Receives exactly one fragment per request sent, in order. */
    private static final class Capture
    {
        private final Subscription subscription;
        private final ExclusivePublication subscriptionPublication;
        private final Deadline deadline;
        private byte[] received;

        Capture(final Subscription subscription, final ExclusivePublication publication, final Deadline deadline)
        {
            this.subscription = subscription;
            this.subscriptionPublication = publication;
            this.deadline = deadline;
        }

        void emit(final String name, final Json fields)
        {
            emit(name, fields, null);
        }

        void emit(final String name, final Json fields, final String note)
        {
            received = null;
            while (received == null)
            {
                if (subscription.poll((buffer, offset, length, header) ->
                {
                    received = new byte[length];
                    buffer.getBytes(offset, received);
                }, 1) == 0)
                {
                    deadline.pause("the captured " + name);
                }
            }
            final Json line = golden(name, "client->archive", "1.15.1 ArchiveProxy", received, fields);
            if (note != null)
            {
                line.put("note", note);
            }
            line.emit();
        }
    }
}
