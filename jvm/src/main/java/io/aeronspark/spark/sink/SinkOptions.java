package io.aeronspark.spark.sink;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import io.aeronspark.spark.AeronArchiveJvmProvider;
import io.aeronspark.spark.ArchiveSettings;
import io.aeronspark.spark.options.OptionError;
import io.aeronspark.spark.options.OptionSpecs;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The sink's options (side "jvm-sink" of connector/option_specs.json) and its input column,
 * checked on the driver when the query starts; serialisable, so the writer factory carries it to
 * the executors.
 */
final class SinkOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    static final String CHANNEL = "channel";
    static final String STREAM_ID = "streamId";
    static final String SOURCE_LOCATION = "sink.sourceLocation";
    static final String OFFER_TIMEOUT_MS = "sink.offerTimeoutMs";
    /**
     * writeStream options Spark reads itself and passes on to the sink too: async progress tracking's
     * (real-time mode needs _asyncProgressTrackingOverrideSinkSupportCheck=true for a sink Spark does
     * not list, see docs/exactly-once.md).
     */
    private static final Set<String> SPARK_STREAM_OPTIONS = Set.of("asyncprogresstrackingenabled",
        "asyncprogresstrackingcheckpointintervalms", "_asyncprogresstrackingoverridesinksupportcheck");
    /** The one input column, as Kafka's sink names it. */
    static final String VALUE_COLUMN = "value";

    final String channel;
    final int streamId;
    /** True: the archive records the channel on its own driver (IPC or spy); false: as a UDP subscriber. */
    final boolean localSource;
    final long offerTimeoutMs;
    final ArchiveSettings archive;
    final int valueOrdinal;
    final boolean valueIsString;

    private SinkOptions(final String channel, final int streamId, final boolean localSource, final long offerTimeoutMs,
                        final ArchiveSettings archive, final int valueOrdinal, final boolean valueIsString) {
        this.channel = channel;
        this.streamId = streamId;
        this.localSource = localSource;
        this.offerTimeoutMs = offerTimeoutMs;
        this.archive = archive;
        this.valueOrdinal = valueOrdinal;
        this.valueIsString = valueIsString;
    }

    static SinkOptions from(final Map<String, String> given, final StructType schema) {
        final OptionSpecs specs = OptionSpecs.get(OptionSpecs.SIDE_SINK);
        final Map<String, String> ours = new HashMap<>();
        given.forEach((key, value) -> {
            if (!SPARK_STREAM_OPTIONS.contains(key.toLowerCase(Locale.ROOT))) {
                ours.put(key, value);
            }
        });
        final Map<String, String> options = specs.canonical(
            ours, OptionSpecs.SIDE_SINK, "(\"" + AeronArchiveJvmProvider.SHORT_NAME + "\") (sink)");
        final String channel = specs.channel(options, CHANNEL);
        if (channel == null) {
            throw new OptionError("option " + CHANNEL + " is required: the channel the rows are published on and the "
                + "archive records; accepted: " + specs.spec(CHANNEL).accepted);
        }
        final Long streamId = specs.number(options, STREAM_ID);
        if (streamId == null) {
            throw new OptionError("option " + STREAM_ID + " is required: the stream id the rows are published on; "
                + "accepted: " + specs.spec(STREAM_ID).accepted);
        }
        final String location = specs.choice(options, SOURCE_LOCATION);
        final boolean local = location == null ? channel.startsWith("aeron:ipc") : "local".equals(location);
        final long offerTimeoutMs = specs.number(options, OFFER_TIMEOUT_MS);
        final ArchiveSettings archive = ArchiveSettings.from(options);
        final int ordinal = valueOrdinal(schema);
        return new SinkOptions(channel, streamId.intValue(), local, offerTimeoutMs, archive, ordinal,
            schema.fields()[ordinal].dataType().equals(DataTypes.StringType));
    }

    /** The value column: binary or string, matched case-insensitively; any other column is ignored. */
    static int valueOrdinal(final StructType schema) {
        final StructField[] fields = schema.fields();
        int found = -1;
        for (int i = 0; i < fields.length; i++) {
            if (fields[i].name().toLowerCase(Locale.ROOT).equals(VALUE_COLUMN)) {
                if (found >= 0) {
                    throw new IllegalArgumentException(prefix() + "the input has two columns named " + VALUE_COLUMN
                        + " (case-insensitively): " + fields[found].name() + " and " + fields[i].name());
                }
                found = i;
            }
        }
        if (found < 0) {
            throw new IllegalArgumentException(prefix() + "the input needs a column named " + VALUE_COLUMN
                + " of type binary or string (each row's value is published as one Aeron message); the input's "
                + "columns are " + describe(schema) + ". Select or alias one, e.g. df.selectExpr(\"CAST(x AS STRING) AS "
                + VALUE_COLUMN + "\")");
        }
        final DataType type = fields[found].dataType();
        if (!type.equals(DataTypes.BinaryType) && !type.equals(DataTypes.StringType)) {
            throw new IllegalArgumentException(prefix() + "column " + fields[found].name() + " has type "
                + type.simpleString() + "; accepted: binary or string (cast it, e.g. CAST(" + fields[found].name()
                + " AS STRING))");
        }
        return found;
    }

    private static String prefix() {
        return "format(\"" + AeronArchiveJvmProvider.SHORT_NAME + "\") sink: ";
    }

    private static String describe(final StructType schema) {
        final StringBuilder out = new StringBuilder("[");
        for (StructField field : schema.fields()) {
            out.append(out.length() > 1 ? ", " : "").append(field.name()).append(' ').append(field.dataType().simpleString());
        }
        return out.append(']').toString();
    }

    String describeStream() {
        return CHANNEL + "=" + channel + " " + STREAM_ID + "=" + streamId;
    }
}
