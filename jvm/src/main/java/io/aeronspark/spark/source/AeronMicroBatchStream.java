package io.aeronspark.spark.source;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

import io.aeronspark.spark.BoundaryTimings;
import io.aeronspark.spark.options.OptionError;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxBytes;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver side of readStream.format("aeron-archive-jvm"): a micro-batch stream with admission
 * control (maxBytesPerTrigger) that also runs in real-time mode (one open-ended partition per
 * recording, the batch's end merged from where each partition got to), and reports how far it is
 * behind each recording's latest position, in bytes, as Kafka's source does in offsets.
 */
public final class AeronMicroBatchStream implements MicroBatchStream, SupportsAdmissionControl, SupportsTriggerAvailableNow,
        SupportsRealTimeMode, ReportsSourceMetrics {
    private static final Logger LOG = LoggerFactory.getLogger(AeronMicroBatchStream.class);
    static final String INITIAL_OFFSET_FILE = "aeron-archive-jvm-initial-offset.json";

    private final SourceOptions options;
    private final String checkpointLocation;
    private final ArchiveCatalog catalog;
    private boolean realTime;
    /** Real-time mode: the archive as a background refresh last saw it (no archive I/O at a boundary). */
    private RealTimeCatalogView realTimeView;
    private Map<Long, Long> availableNowTarget;
    private volatile Map<Long, Long> latestSeen;
    /** Real-time mode: the start of the running batch, onto which the partitions' offsets merge. */
    private SortedMap<Long, Long> realTimeStart;

    AeronMicroBatchStream(final SourceOptions options, final String checkpointLocation) {
        this.options = options;
        this.checkpointLocation = checkpointLocation;
        this.catalog = new ArchiveCatalog(options);
    }

    // --- offsets ------------------------------------------------------------------------------

    @Override
    public Offset initialOffset() {
        final Path file = initialOffsetFile();
        if (file != null && Files.exists(file)) {
            try {
                return AeronOffset.parse(Files.readString(file, StandardCharsets.UTF_8), "initial offset in " + file);
            } catch (IOException error) {
                throw new IllegalStateException("cannot read the initial offset " + file + ": " + error, error);
            }
        }
        final AeronOffset initial = new AeronOffset(resolveStartingPositions());
        if (file != null) {  // a restart before batch 0 committed starts where this run did (Kafka does the same)
            try {
                Files.createDirectories(file.getParent());
                final Path temporary = file.resolveSibling(file.getFileName() + ".tmp");
                Files.writeString(temporary, initial.json(), StandardCharsets.UTF_8);
                Files.move(temporary, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException error) {
                throw new IllegalStateException("cannot write the initial offset " + file + ": " + error, error);
            }
        }
        return initial;
    }

    private Path initialOffsetFile() {
        if (checkpointLocation == null) {
            return null;
        }
        try {
            final URI uri = new URI(checkpointLocation);
            if (uri.getScheme() == null) {
                return Paths.get(checkpointLocation, INITIAL_OFFSET_FILE);
            }
            if ("file".equals(uri.getScheme())) {
                return Paths.get(uri).resolve(INITIAL_OFFSET_FILE);
            }
        } catch (Exception error) {
            LOG.warn("aeron-archive-jvm source: checkpoint location {} is not a local path ({}); the initial offset "
                + "is resolved again if the query restarts before its first batch commits", checkpointLocation, error.toString());
            return null;
        }
        LOG.warn("aeron-archive-jvm source: checkpoint location {} is not a local path; the initial offset is resolved "
            + "again if the query restarts before its first batch commits", checkpointLocation);
        return null;
    }

    private Map<Long, Long> resolveStartingPositions() {
        final Map<Long, Long> positions = new TreeMap<>();
        final SortedMap<Long, RecordingInfo> recordings = catalog.recordings(true);
        for (RecordingInfo recording : recordings.values()) {
            final Long explicit = options.startingKeyword == null ? options.startingPositions.get(recording.recordingId) : null;
            final boolean latest = "latest".equals(options.startingKeyword)
                || (explicit != null && explicit == SourceOptions.LATEST);
            if (explicit != null && explicit >= 0) {
                positions.put(recording.recordingId, explicit);
            } else if (latest) {
                final Long position = catalog.latestPosition(recording.recordingId);
                if (position != null) {
                    positions.put(recording.recordingId, position);
                }
            } else {
                positions.put(recording.recordingId, recording.startPosition);
            }
        }
        if (options.startingKeyword == null) {
            for (Map.Entry<Long, Long> entry : options.startingPositions.entrySet()) {
                if (!recordings.containsKey(entry.getKey()) && entry.getValue() >= 0) {
                    positions.put(entry.getKey(), entry.getValue());
                }
            }
        }
        return positions;
    }

    @Override
    public Offset deserializeOffset(final String json) {
        return AeronOffset.parse(json, "offset");
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return options.maxBytesPerTrigger != null ? ReadLimit.maxBytes(options.maxBytesPerTrigger) : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) should be called instead of this method");
    }

    @Override
    public Offset latestOffset(final Offset start, final ReadLimit limit) {
        BoundaryTimings.note("source.latestOffset.start", "");
        final Offset latestOffset = realTime ? realTimeLatestOffset(((AeronOffset) start).positions())
            : latestOffsetNow(start, limit);
        BoundaryTimings.note("source.latestOffset.end", "");
        return latestOffset;
    }

    private Offset latestOffsetNow(final Offset start, final ReadLimit limit) {
        final SortedMap<Long, Long> startPositions = ((AeronOffset) start).positions();
        final Map<Long, RecordingInfo> candidates = new TreeMap<>();
        if (availableNowTarget != null) {
            for (Long recordingId : availableNowTarget.keySet()) {
                final RecordingInfo info = catalog.describe(recordingId);
                if (info != null) {
                    candidates.put(recordingId, info);
                }
            }
        } else {
            candidates.putAll(catalog.recordings(false));
        }
        final Map<Long, Long> ends = new TreeMap<>(startPositions);
        final Map<Long, Long> latest = new TreeMap<>();
        final List<AdmissionControl.Backlog> backlogs = new ArrayList<>();
        final List<Long> ids = new ArrayList<>(candidates.keySet());
        for (Long recordingId : startPositions.keySet()) {
            if (!candidates.containsKey(recordingId)) {
                ids.add(recordingId);
            }
        }
        for (Long recordingId : ids) {
            Long position = catalog.latestPosition(recordingId);
            if (position == null) {
                if (startPositions.containsKey(recordingId)) {
                    DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId
                        + " is no longer in the archive (read up to " + startPositions.get(recordingId) + ")");
                    ends.remove(recordingId);
                }
                continue;
            }
            RecordingInfo info = candidates.get(recordingId);
            if (info == null) {
                info = catalog.describe(recordingId);
                if (info == null) {
                    continue;
                }
            }
            if (availableNowTarget != null) {
                position = Math.min(position, availableNowTarget.getOrDefault(recordingId, position));
            }
            latest.put(recordingId, position);
            final long first = startPositions.getOrDefault(recordingId, info.startPosition);
            if (position < first) {
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId + " was truncated to "
                    + position + ", before the query's position " + first);
                position = first;
            }
            ends.putIfAbsent(recordingId, first);
            backlogs.add(new AdmissionControl.Backlog(recordingId, first, position, info.termBufferLength));
        }
        latestSeen = latest;
        if (limit instanceof ReadMaxBytes && !realTime) {
            ends.putAll(AdmissionControl.capByBytes(backlogs, ((ReadMaxBytes) limit).maxBytes()));
        } else if (limit instanceof ReadAllAvailable || realTime) {
            backlogs.forEach(backlog -> ends.put(backlog.recordingId, backlog.latest));
        } else {
            throw new IllegalArgumentException("aeron-archive-jvm source: unsupported read limit " + limit
                + "; accepted: ReadAllAvailable, ReadMaxBytes");
        }
        return new AeronOffset(ends);
    }

    /**
     * Real-time mode: the batch's end comes from its partitions (mergeOffsets), so this offset only
     * reports the latest positions; it and its data-loss checks use the background view.
     */
    private Offset realTimeLatestOffset(final SortedMap<Long, Long> startPositions) {
        final RealTimeCatalogView.Snapshot view = realTimeView.current(startPositions.keySet());
        final Map<Long, Long> ends = new TreeMap<>(startPositions);
        final Map<Long, Long> latest = new TreeMap<>();
        final SortedSet<Long> ids = new TreeSet<>(view.discovered.keySet());
        ids.addAll(startPositions.keySet());
        for (Long recordingId : ids) {
            final RecordingInfo info = view.described.get(recordingId);
            Long position = view.latest.get(recordingId);
            if (info == null || position == null) {
                if (startPositions.containsKey(recordingId)) {
                    DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId
                        + " is no longer in the archive (read up to " + startPositions.get(recordingId) + ")");
                    ends.remove(recordingId);
                }
                continue;
            }
            latest.put(recordingId, position);
            final long first = startPositions.getOrDefault(recordingId, info.startPosition);
            // A live recording's position in the view may be behind what the query read already (the view
            // is up to one refresh old); only a stopped recording's stop before the query's position is lost.
            if (!info.isActive() && info.stopPosition < first) {
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId + " was truncated to "
                    + info.stopPosition + ", before the query's position " + first);
            }
            ends.put(recordingId, Math.max(position, first));
        }
        latestSeen = latest;
        return new AeronOffset(ends);
    }

    @Override
    public Offset reportLatestOffset() {
        final Map<Long, Long> latest = latestSeen;
        return latest == null || latest.isEmpty() ? null : new AeronOffset(latest);
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        final Map<Long, Long> target = new HashMap<>();
        for (Long recordingId : catalog.recordings(true).keySet()) {
            final Long position = catalog.latestPosition(recordingId);
            if (position != null) {
                target.put(recordingId, position);
            }
        }
        availableNowTarget = target;
    }

    // --- micro-batch partitions ------------------------------------------------------------------

    @Override
    public InputPartition[] planInputPartitions(final Offset start, final Offset end) {
        final SortedMap<Long, Long> from = ((AeronOffset) start).positions();
        final List<InputPartition> partitions = new ArrayList<>();
        for (Map.Entry<Long, Long> entry : ((AeronOffset) end).positions().entrySet()) {
            final long recordingId = entry.getKey();
            long last = entry.getValue();
            final Long known = from.get(recordingId);
            if (known != null && known == last) {
                continue;
            }
            final RecordingInfo info = catalog.describe(recordingId);
            if (info == null) {
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId + " is no longer in the archive");
                continue;
            }
            long first = known != null ? known : info.startPosition;
            if (first < info.startPosition) {
                final long lostTo = Math.min(last, info.startPosition);
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId + ": [" + first + ", " + lostTo
                    + ") was purged or detached (the recording now starts at " + info.startPosition + ")");
                first = lostTo;
            }
            if (!info.isActive() && last > info.stopPosition) {
                final long lostFrom = Math.max(first, info.stopPosition);
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId + ": [" + lostFrom + ", " + last
                    + ") was truncated (the recording now stops at " + info.stopPosition + ")");
                last = lostFrom;
            }
            if (first < last) {
                partitions.add(new AeronInputPartition(info, first, last, options));
            }
        }
        return partitions.toArray(new InputPartition[0]);
    }

    // --- real-time mode ---------------------------------------------------------------------------

    @Override
    public void prepareForRealTimeMode() {
        if (options.maxBytesPerTrigger != null) {
            throw new OptionError("option " + SourceOptions.MAX_BYTES_PER_TRIGGER + " is not supported in real-time mode "
                + "(trigger(realTime=...)): a real-time batch reads every row as it arrives; remove the option or use "
                + "a micro-batch trigger");
        }
        realTime = true;
        realTimeView = new RealTimeCatalogView(catalog, options.discoveryIntervalMs);
    }

    @Override
    public InputPartition[] planInputPartitions(final Offset start) {
        BoundaryTimings.note("source.planRealTime.start", "");
        final InputPartition[] planned = planRealTimePartitions(start);
        BoundaryTimings.note("source.planRealTime.end", planned.length + " partitions");
        return planned;
    }

    private InputPartition[] planRealTimePartitions(final Offset start) {
        final SortedMap<Long, Long> from = new TreeMap<>(((AeronOffset) start).positions());
        // Planning is a stall between two batches' rows: recordings and their descriptors come from the
        // background view (at most one refresh interval old), not from archive requests here.
        final RealTimeCatalogView.Snapshot view = realTimeView.current(from.keySet());
        final List<Long> ids = new ArrayList<>(view.discovered.keySet());
        for (Long recordingId : from.keySet()) {
            if (!view.discovered.containsKey(recordingId)) {
                ids.add(recordingId);
            }
        }
        final List<InputPartition> partitions = new ArrayList<>();
        for (Long recordingId : ids) {
            final RecordingInfo info = view.described.get(recordingId);
            if (info == null) {
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId
                    + " is no longer in the archive (read up to " + from.get(recordingId) + ")");
                from.remove(recordingId);
                continue;
            }
            long first = from.getOrDefault(recordingId, info.startPosition);
            if (first < info.startPosition) {
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId + ": [" + first + ", "
                    + info.startPosition + ") was purged or detached (the recording now starts at " + info.startPosition + ")");
                first = info.startPosition;
            }
            if (!info.isActive() && first > info.stopPosition) {
                DataLossPolicy.report(options.failOnDataLoss, "recording " + recordingId + ": [" + info.stopPosition
                    + ", " + first + ") was truncated (the recording now stops at " + info.stopPosition + ")");
                first = info.stopPosition;
            }
            from.put(recordingId, first);
            if (info.isActive() || first < info.stopPosition) {
                partitions.add(new AeronInputPartition(info, first, AeronInputPartition.OPEN_END, options));
            }
        }
        realTimeStart = from;
        if (partitions.isEmpty()) {
            // Nothing to follow yet: a batch without partitions would end at once and the next one start
            // at once, a busy loop of empty batches; this partition waits out the batch instead.
            partitions.add(AeronInputPartition.idle(options));
        }
        return partitions.toArray(new InputPartition[0]);
    }

    @Override
    public Offset mergeOffsets(final PartitionOffset[] offsets) {
        final SortedMap<Long, Long> merged = new TreeMap<>(realTimeStart == null ? Map.of() : realTimeStart);
        for (PartitionOffset offset : offsets) {
            final AeronPartitionOffset position = (AeronPartitionOffset) offset;
            if (position.recordingId < 0) {
                continue;  // the idle partition's
            }
            merged.merge(position.recordingId, position.position, Math::max);
        }
        BoundaryTimings.note("source.mergeOffsets", merged.toString());
        return new AeronOffset(merged);
    }

    // --- metrics, reading, life cycle -----------------------------------------------------------

    /** Bytes behind each recording's latest position, as Kafka's offsetsBehindLatest (in offsets). */
    @Override
    public Map<String, String> metrics(final Optional<Offset> latestConsumedOffset) {
        BoundaryTimings.note("source.metrics.start", "");
        final Map<String, String> metrics = metricsNow(latestConsumedOffset);
        BoundaryTimings.note("source.metrics.end", "");
        return metrics;
    }

    private Map<String, String> metricsNow(final Optional<Offset> latestConsumedOffset) {
        if (latestConsumedOffset.isEmpty()) {
            return Map.of();
        }
        final SortedMap<Long, Long> consumed = ((AeronOffset) latestConsumedOffset.get()).positions();
        Map<Long, Long> latest = new TreeMap<>();
        if (realTime) {  // the background view's positions: no archive request while the next batch waits
            latest = realTimeView.latestPositions();
        } else {
            try {
                for (Long recordingId : consumed.keySet()) {
                    final Long position = catalog.latestPosition(recordingId);
                    if (position != null) {
                        latest.put(recordingId, position);
                    }
                }
            } catch (RuntimeException error) {  // metrics never fail a query; fall back to the last trigger's view
                LOG.warn("aeron-archive-jvm source: latest positions for metrics unavailable: {}", error.toString());
                latest = latestSeen == null ? Map.of() : latestSeen;
            }
        }
        final List<Long> behind = new ArrayList<>();
        for (Map.Entry<Long, Long> entry : latest.entrySet()) {
            final Long position = consumed.get(entry.getKey());
            if (position != null) {
                behind.add(Math.max(0, entry.getValue() - position));
            }
        }
        if (behind.isEmpty()) {
            return Map.of();
        }
        long sum = 0;
        long max = Long.MIN_VALUE;
        long min = Long.MAX_VALUE;
        for (long value : behind) {
            sum += value;
            max = Math.max(max, value);
            min = Math.min(min, value);
        }
        final Map<String, String> metrics = new HashMap<>();
        metrics.put("avgOffsetsBehindLatest", Double.toString((double) sum / behind.size()));
        metrics.put("maxOffsetsBehindLatest", Long.toString(max));
        metrics.put("minOffsetsBehindLatest", Long.toString(min));
        return metrics;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new AeronReaderFactory();
    }

    @Override
    public void commit(final Offset end) {
        // Nothing to acknowledge: the archive keeps recordings whatever the query has read.
    }

    @Override
    public void stop() {
        if (realTimeView != null) {
            realTimeView.close();
        }
        catalog.close();
    }

    @Override
    public String toString() {
        return "AeronArchiveJvm[" + options.describeSelection() + " at " + options.archive.describeEndpoint() + "]";
    }
}
