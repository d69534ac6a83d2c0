package io.aeronspark.spark.source;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** failOnDataLoss: fail with a clear error, or skip the lost range with a warning (the Python source's wording). */
final class DataLossPolicy {
    private static final Logger LOG = LoggerFactory.getLogger(DataLossPolicy.class);

    private DataLossPolicy() {
    }

    static void report(final boolean failOnDataLoss, final String message) {
        if (failOnDataLoss) {
            throw new IllegalStateException(message + ". Data that the query has not read yet is no longer in the "
                + "archive. Set option failOnDataLoss=false to skip lost ranges with a warning instead.");
        }
        LOG.warn("aeron-archive-jvm source: {}; skipped (failOnDataLoss=false)", message);
    }
}
