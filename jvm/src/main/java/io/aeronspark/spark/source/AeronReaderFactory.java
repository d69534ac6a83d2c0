package io.aeronspark.spark.source;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;

/** Executor side: one replay reader per partition. */
final class AeronReaderFactory implements PartitionReaderFactory {
    /** The idle partition's reader: no rows; each wait lasts its whole timeout. */
    static final class IdleReader implements SupportsRealTimeRead<InternalRow> {
        @Override
        public boolean next() {
            return false;
        }

        @Override
        public RecordStatus nextWithTimeout(final Long timeoutMs) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(Math.max(0L, timeoutMs)));
            return RecordStatus.newStatusWithoutArrivalTime(false);
        }

        @Override
        public InternalRow get() {
            throw new IllegalStateException("the idle partition has no rows");
        }

        @Override
        public PartitionOffset getOffset() {
            return new AeronPartitionOffset(-1, 0);
        }

        @Override
        public void close() {
        }
    }

    private static final long serialVersionUID = 1L;

    @Override
    public PartitionReader<InternalRow> createReader(final InputPartition partition) {
        final AeronInputPartition aeronPartition = (AeronInputPartition) partition;
        return aeronPartition.idle() ? new IdleReader() : new AeronPartitionReader(aeronPartition);
    }
}
