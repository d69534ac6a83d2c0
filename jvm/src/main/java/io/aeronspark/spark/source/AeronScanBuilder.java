package io.aeronspark.spark.source;

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
        SourceOptions.parse(options.asCaseSensitiveMap());  // bad options fail when the query is defined
        return this;
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
