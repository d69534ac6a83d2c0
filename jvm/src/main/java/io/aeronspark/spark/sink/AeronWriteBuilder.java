package io.aeronspark.spark.sink;

import java.util.EnumSet;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;

/** The sink side of format("aeron-archive-jvm"): builds the streaming write (publishing rows onto an Aeron stream). */
public final class AeronWriteBuilder implements WriteBuilder {
    /** What the table advertises for writing; the table adds these to its own capabilities. */
    public static final Set<TableCapability> CAPABILITIES =
        java.util.Collections.unmodifiableSet(EnumSet.of(TableCapability.STREAMING_WRITE));

    private final LogicalWriteInfo info;

    public AeronWriteBuilder(final LogicalWriteInfo info) {
        this.info = info;
    }

    LogicalWriteInfo info() {
        return info;
    }
}
