package io.aeronspark.spark;

import java.util.Map;

import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** The source's rows: the Python source's default (no SBE) columns, in its order and types. */
public final class SourceSchema {
    public static final String TIMESTAMP_OPTION = "includeTimestamp";

    private static final StructType WITHOUT_TIME = new StructType(new StructField[] {
        DataTypes.createStructField("recording_id", DataTypes.LongType, false),
        DataTypes.createStructField("position", DataTypes.LongType, false),
        DataTypes.createStructField("payload", DataTypes.BinaryType, false),
        DataTypes.createStructField("session_id", DataTypes.IntegerType, false),
        DataTypes.createStructField("stream_id", DataTypes.IntegerType, false),
        DataTypes.createStructField("reserved_value", DataTypes.LongType, false),
    });
    private static final StructType WITH_TIME =
        WITHOUT_TIME.add(DataTypes.createStructField("timestamp", DataTypes.TimestampType, false));

    private SourceSchema() {
    }

    public static StructType of(final boolean includeTimestamp) {
        return includeTimestamp ? WITH_TIME : WITHOUT_TIME;
    }

    /** Only the one option matters for the schema; its value is checked with the others later. */
    public static StructType of(final Map<String, String> options) {
        String value = null;
        for (Map.Entry<String, String> entry : options.entrySet()) {
            if (entry.getKey().equalsIgnoreCase(TIMESTAMP_OPTION)) {
                value = entry.getValue();
            }
        }
        return of(value != null && value.trim().equalsIgnoreCase("true"));
    }
}
