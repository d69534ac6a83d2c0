package io.aeronspark.spark;

import java.util.EnumSet;
import java.util.Set;

import io.aeronspark.spark.sink.AeronWriteBuilder;
import io.aeronspark.spark.source.AeronScanBuilder;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** One Aeron archive's recordings: read as a stream (source), written as a stream (sink). */
public final class AeronArchiveTable implements SupportsRead, SupportsWrite {
    private final StructType schema;

    public AeronArchiveTable(final StructType schema) {
        this.schema = schema;
    }

    @Override
    public String name() {
        return AeronArchiveJvmProvider.SHORT_NAME;
    }

    @Override
    public StructType schema() {
        return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
        final Set<TableCapability> capabilities = EnumSet.of(TableCapability.MICRO_BATCH_READ);
        capabilities.addAll(AeronWriteBuilder.CAPABILITIES);
        return capabilities;
    }

    @Override
    public ScanBuilder newScanBuilder(final CaseInsensitiveStringMap options) {
        return new AeronScanBuilder(schema, options);
    }

    @Override
    public WriteBuilder newWriteBuilder(final LogicalWriteInfo info) {
        return new AeronWriteBuilder(info);
    }
}
