package io.aeronspark.spark;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Instant;

/**
 * A debug timeline of what happens around real-time batch boundaries, for the latency bench
 * (bench/realtime_latency.py --boundary-report): one line per event, {@code <epoch µs> <event>
 * <detail>}, appended to the file named by the environment variable {@value #ENV} (or the system
 * property of the same name) of each JVM. Unset (the default): every call is one volatile read.
 * Events are a handful per batch and task, never per row.
 */
public final class BoundaryTimings {
    public static final String ENV = "AERON_SPARK_JVM_TIMINGS";
    private static final PrintWriter OUT = open();

    private BoundaryTimings() {
    }

    private static PrintWriter open() {
        String path = System.getProperty(ENV);
        if (path == null || path.isEmpty()) {
            path = System.getenv(ENV);
        }
        if (path == null || path.isEmpty()) {
            return null;
        }
        try {
            return new PrintWriter(new OutputStreamWriter(new FileOutputStream(path, true), StandardCharsets.UTF_8));
        } catch (IOException error) {
            System.err.println("aeron-spark-jvm: cannot open " + ENV + "=" + path + ": " + error);
            return null;
        }
    }

    public static boolean enabled() {
        return OUT != null;
    }

    /** Notes an event now (wall clock, microseconds: comparable with the bench's publish times). */
    public static void note(final String event, final String detail) {
        if (OUT == null) {
            return;
        }
        final Instant now = Instant.now();
        final long micros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
        synchronized (OUT) {
            OUT.print(micros);
            OUT.print(' ');
            OUT.print(event);
            OUT.print(' ');
            OUT.print(Thread.currentThread().getName().replace(' ', '_'));
            OUT.print(' ');
            OUT.println(detail);
            OUT.flush();
        }
    }
}
