package io.aeronspark.spark.source;

import io.aeronspark.spark.SourceSchema;
import io.aeronspark.spark.options.OptionError;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** readStream.format("aeron-archive-jvm"): a micro-batch stream that also runs in real-time mode. */
public final class AeronScanBuilder implements ScanBuilder, Scan {
    private final StructType schema;
    private final CaseInsensitiveStringMap options;

    public AeronScanBuilder(final StructType schema, final CaseInsensitiveStringMap options) {
        this.schema = schema;
        this.options = options;
    }

    @Override
    public Scan build() {
        final SourceOptions parsed = SourceOptions.parse(options.asCaseSensitiveMap());  // bad options fail here
        final StructType own = SourceSchema.of(parsed.includeTimestamp);
        if (!sameColumns(own, schema)) {
            throw new OptionError("format(\"aeron-archive-jvm\") reads its own columns (" + own.simpleString()
                + "); a user schema (.schema(...)) is not supported: select or cast the columns after load()");
        }
        return this;
    }

    /** Names and types (nullability aside: no value is ever null either way). */
    private static boolean sameColumns(final StructType a, final StructType b) {
        if (a.fields().length != b.fields().length) {
            return false;
        }
        for (int i = 0; i < a.fields().length; i++) {
            if (!a.fields()[i].name().equals(b.fields()[i].name())
                || !a.fields()[i].dataType().equals(b.fields()[i].dataType())) {
                return false;
            }
        }
        return true;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return "aeron-archive-jvm";
    }

    @Override
    public MicroBatchStream toMicroBatchStream(final String checkpointLocation) {
        return new AeronMicroBatchStream(SourceOptions.parse(options.asCaseSensitiveMap()), checkpointLocation);
    }

}
