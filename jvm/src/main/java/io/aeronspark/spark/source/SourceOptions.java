package io.aeronspark.spark.source;

import java.io.Serializable;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.aeronspark.spark.AeronArchiveJvmProvider;
import io.aeronspark.spark.ArchiveSettings;
import io.aeronspark.spark.options.OptionError;
import io.aeronspark.spark.options.OptionSpecs;

/** readStream.format("aeron-archive-jvm")'s options, parsed once on the driver (the spec: OptionSpecs). */
public final class SourceOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    /** startingPositions JSON markers, as Kafka's startingOffsets: -2 earliest, -1 latest. */
    public static final long EARLIEST = -2;
    public static final long LATEST = -1;
    /** The admission-control options real-time mode refuses (as Kafka refuses maxOffsetsPerTrigger there). */
    public static final String MAX_BYTES_PER_TRIGGER = "maxBytesPerTrigger";

    public final ArchiveSettings archive;
    public final long[] recordingIds;
    public final String channel;
    public final String channelPatternText;
    public final int[] streamIds;
    /** "earliest", "latest", or null with {@link #startingPositions} given. */
    public final String startingKeyword;
    public final Map<Long, Long> startingPositions;
    public final boolean failOnDataLoss;
    public final Long maxBytesPerTrigger;
    public final long discoveryIntervalMs;
    public final boolean includeTimestamp;
    /** aeron.host / aeron.bindAddress: null resolves on each executor (ReplayEndpoint). */
    public final String aeronHost;
    public final String aeronBindAddress;
    /** The options as given (canonical names), for messages. */
    public final Map<String, String> given;

    private transient Pattern channelPattern;

    private SourceOptions(final Map<String, String> options) {
        final OptionSpecs specs = OptionSpecs.get(OptionSpecs.SIDE_SOURCE);
        given = options;
        archive = ArchiveSettings.from(options);
        final long[] ids = specs.numberList(options, "recordingIds");
        final String channelText = options.get("channel");
        final String pattern = options.get("channelPattern");
        final long[] streams = specs.numberList(options, "streamId");
        if (ids != null && (channelText != null || pattern != null || streams != null)) {
            throw new OptionError("set either recordingIds or channel/channelPattern + streamId, not both");
        }
        if (ids == null) {
            if (channelText != null && pattern != null) {
                throw new OptionError("options channel and channelPattern are exclusive; set one: channel matches a "
                    + "fragment of the original channel (Aeron ListRecordingsForUri), channelPattern a regular expression");
            }
            if (channelText == null && pattern == null && streams == null) {
                throw new OptionError("nothing to read: set recordingIds (e.g. 1,2 or [1,2]) or channel + streamId "
                    + "(every recording of that stream whose original channel contains the fragment) or channelPattern "
                    + "(+ streamId: every recording whose original channel matches the regular expression)");
            }
            if (channelText == null && pattern == null) {
                throw new OptionError("option streamId needs channel (a channel fragment; \"\" matches every channel) "
                    + "or channelPattern (a regular expression) too");
            }
            if (channelText != null && streams == null) {
                throw new OptionError("option channel needs streamId too (an int, or a list like 1001,1002)");
            }
        }
        if (pattern != null) {
            channelPattern = specs.regex(options, "channelPattern");
        }
        recordingIds = ids;
        channel = channelText;
        channelPatternText = pattern;
        if (streams == null) {
            streamIds = null;
        } else {
            streamIds = new int[streams.length];
            for (int i = 0; i < streams.length; i++) {
                streamIds[i] = (int) streams[i];
            }
        }
        final String starting = options.get("startingPositions");
        if (starting == null || starting.equalsIgnoreCase("latest")) {
            startingKeyword = "latest";  // a stream's default, as the Python source's
            startingPositions = Map.of();
        } else if (starting.equalsIgnoreCase("earliest")) {
            startingKeyword = "earliest";
            startingPositions = Map.of();
        } else {
            startingKeyword = null;
            startingPositions = parsePositions(starting, specs);
        }
        failOnDataLoss = specs.bool(options, "failOnDataLoss");
        maxBytesPerTrigger = specs.size(options, MAX_BYTES_PER_TRIGGER);
        discoveryIntervalMs = specs.number(options, "discoveryIntervalMs");
        includeTimestamp = specs.bool(options, "includeTimestamp");
        aeronHost = nonEmpty(specs, options, ReplayEndpoint.AERON_HOST);
        aeronBindAddress = nonEmpty(specs, options, ReplayEndpoint.AERON_BIND_ADDRESS);
    }

    private static String nonEmpty(final OptionSpecs specs, final Map<String, String> options, final String name) {
        final String value = options.get(name);
        if (value != null && (value.isEmpty() || value.contains(" "))) {
            throw specs.spec(name).invalid(value);
        }
        return value;
    }

    /** Parses the options a source was given (unknown ones fail, naming the nearest accepted names). */
    public static SourceOptions parse(final Map<String, String> raw) {
        final OptionSpecs specs = OptionSpecs.get(OptionSpecs.SIDE_SOURCE);
        final Map<String, String> canonical = specs.canonical(raw, OptionSpecs.SIDE_SOURCE,
            AeronArchiveJvmProvider.SHORT_NAME);
        for (String name : canonical.keySet()) {
            if (!specs.spec(name).modes.contains("stream")) {
                throw new OptionError("option " + name + " only applies to spark.read (batch), not to spark.readStream");
            }
        }
        return new SourceOptions(canonical);
    }

    private static Map<Long, Long> parsePositions(final String text, final OptionSpecs specs) {
        final OptionSpecs.Spec spec = specs.spec("startingPositions");
        final JsonNode root;
        try {
            root = new ObjectMapper().readTree(text);
        } catch (Exception error) {
            throw spec.invalid(text);
        }
        if (root == null || !root.isObject()) {
            throw spec.invalid(text);
        }
        final Map<Long, Long> positions = new LinkedHashMap<>();
        final Iterator<Map.Entry<String, JsonNode>> fields = root.fields();
        while (fields.hasNext()) {
            final Map.Entry<String, JsonNode> field = fields.next();
            final long recordingId;
            try {
                recordingId = AeronOffset.recordingId(field.getKey(), "option startingPositions");
            } catch (IllegalArgumentException error) {
                throw new OptionError(error.getMessage());
            }
            final JsonNode value = field.getValue();
            if (!value.isIntegralNumber() || !value.canConvertToLong()) {
                throw new OptionError("option startingPositions: position of recording " + recordingId
                    + " must be an integer, got " + value);
            }
            final long position = value.asLong();
            if (position != EARLIEST && position != LATEST
                && (position < 0 || position % AeronOffset.FRAME_ALIGNMENT != 0)) {
                throw new OptionError("option startingPositions: position " + position + " of recording " + recordingId
                    + " is not a position >= 0 on a frame boundary (a multiple of " + AeronOffset.FRAME_ALIGNMENT
                    + "), -2 (earliest) or -1 (latest)");
            }
            positions.put(recordingId, position);
        }
        return positions;
    }

    public Pattern channelPattern() {
        if (channelPattern == null && channelPatternText != null) {
            channelPattern = Pattern.compile(channelPatternText);
        }
        return channelPattern;
    }

    public boolean matches(final RecordingInfo recording) {
        if (streamIds != null) {
            boolean found = false;
            for (int streamId : streamIds) {
                found |= streamId == recording.streamId;
            }
            if (!found) {
                return false;
            }
        }
        if (channelPatternText != null) {
            return channelPattern().matcher(recording.originalChannel).find();
        }
        if (channel != null) {
            return recording.originalChannel.contains(channel) || recording.strippedChannel.contains(channel);
        }
        for (long id : recordingIds) {
            if (id == recording.recordingId) {
                return true;
            }
        }
        return false;
    }

    /** For messages: the selection in the options' own terms. */
    public String describeSelection() {
        if (recordingIds != null) {
            return "recordingIds=" + given.get("recordingIds");
        }
        final String what = channel != null ? "channel='" + channel + "'" : "channelPattern='" + channelPatternText + "'";
        return what + " streamId=" + (streamIds == null ? "any" : given.get("streamId"));
    }
}
