package io.aeronspark.spark.sink;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import io.aeronspark.spark.BoundaryTimings;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.internal.connector.SupportsStreamingUpdateAsAppend;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sink of format("aeron-archive-jvm"): each row's {@code value} (binary or string) is published
 * as one Aeron message on {@code channel}/{@code streamId} from the executor's media driver, and the
 * archive records that stream. Streaming only (append and update output modes; real-time mode
 * needs update). Options and the input column are checked here, on the driver, when the query starts.
 */
public final class AeronWriteBuilder implements WriteBuilder, SupportsStreamingUpdateAsAppend {
    /** What the table advertises for writing; the table adds these to its own capabilities. */
    public static final Set<TableCapability> CAPABILITIES =
        Collections.unmodifiableSet(EnumSet.of(TableCapability.STREAMING_WRITE));

    private static final Logger LOG = LoggerFactory.getLogger(AeronWriteBuilder.class);
    /** Query runs (Spark's queryId) whose sink stream the archive was asked to record. */
    private static final Set<String> RECORDING_ENSURED = ConcurrentHashMap.newKeySet();

    private final LogicalWriteInfo info;

    public AeronWriteBuilder(final LogicalWriteInfo info) {
        this.info = info;
    }

    @Override
    public Write build() {
        BoundaryTimings.note("sink.build", "");
        final SinkOptions options = SinkOptions.from(info.options().asCaseSensitiveMap(), info.schema());
        return new Write() {
            @Override
            public String description() {
                return "aeron-archive-jvm sink on " + options.describeStream();
            }

            @Override
            public StreamingWrite toStreaming() {
                // Spark builds the write again for every micro-batch: ask the archive once per query run.
                if (RECORDING_ENSURED.add(info.queryId() + "|" + options.describeStream())) {
                    final boolean started = SinkRecording.ensure(options);
                    LOG.info("{}: the archive at {} {}", description(), options.archive.describeEndpoint(),
                        started ? "now records it" : "records it already");
                }
                return new AeronStreamingWrite(options);
            }
        };
    }
}
