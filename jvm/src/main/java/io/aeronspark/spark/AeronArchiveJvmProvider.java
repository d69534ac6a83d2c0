package io.aeronspark.spark;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * format("aeron-archive-jvm"): the JVM DataSource V2 source (real-time mode and micro-batches) and
 * sink. format("aeron-archive") stays the Python Data Source; the two names never collide.
 */
public final class AeronArchiveJvmProvider implements TableProvider, DataSourceRegister {
    public static final String SHORT_NAME = "aeron-archive-jvm";

    @Override
    public String shortName() {
        return SHORT_NAME;
    }

    @Override
    public StructType inferSchema(final CaseInsensitiveStringMap options) {
        return SourceSchema.of(options);
    }

    @Override
    public Table getTable(final StructType schema, final Transform[] partitioning, final Map<String, String> properties) {
        return new AeronArchiveTable(schema);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;  // a writer's schema is the DataFrame's, not the source's
    }
}
