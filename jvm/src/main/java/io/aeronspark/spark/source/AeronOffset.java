package io.aeronspark.spark.source;

import java.util.Collections;
import java.util.Iterator;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * The source's offset: recording id -> Aeron position, the same JSON as the Python source's
 * (connector/source/offsets.py): {"7": 4096, "9": 0}, keys in recording id order, Python's
 * json.dumps separators. A recording missing from an offset has not been met yet: it is read from
 * its start position.
 */
public final class AeronOffset extends Offset {
    /** Frame alignment: every position in an offset is a frame boundary. */
    public static final int FRAME_ALIGNMENT = 32;

    private final SortedMap<Long, Long> positions;

    public AeronOffset(final Map<Long, Long> positions) {
        this.positions = Collections.unmodifiableSortedMap(new TreeMap<>(positions));
    }

    public SortedMap<Long, Long> positions() {
        return positions;
    }

    @Override
    public String json() {
        final StringBuilder out = new StringBuilder("{");
        final Iterator<Map.Entry<Long, Long>> entries = positions.entrySet().iterator();
        while (entries.hasNext()) {
            final Map.Entry<Long, Long> entry = entries.next();
            out.append('"').append(entry.getKey()).append("\": ").append(entry.getValue());
            if (entries.hasNext()) {
                out.append(", ");
            }
        }
        return out.append('}').toString();
    }

    /** An offset from Spark's log, checked as the Python source checks it. */
    public static AeronOffset parse(final String json, final String what) {
        final JsonNode root;
        try {
            root = new ObjectMapper().readTree(json);
        } catch (Exception error) {
            throw new IllegalArgumentException(what + " is not valid JSON: " + json
                + "; expected {\"<recordingId>\": <position>, ...}");
        }
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException(what + " must be a JSON object {\"<recordingId>\": <position>}, got " + json);
        }
        final Map<Long, Long> positions = new TreeMap<>();
        final Iterator<Map.Entry<String, JsonNode>> fields = root.fields();
        while (fields.hasNext()) {
            final Map.Entry<String, JsonNode> field = fields.next();
            final long recordingId = recordingId(field.getKey(), what);
            final JsonNode value = field.getValue();
            if (!value.isIntegralNumber() || !value.canConvertToLong()) {
                throw new IllegalArgumentException(what + ": position of recording " + recordingId
                    + " must be an integer, got " + value);
            }
            final long position = value.asLong();
            if (position < 0 || position % FRAME_ALIGNMENT != 0) {
                throw new IllegalArgumentException(what + ": position " + position + " of recording " + recordingId
                    + " is not a position >= 0 on a frame boundary (a multiple of " + FRAME_ALIGNMENT + ")");
            }
            positions.put(recordingId, position);
        }
        return new AeronOffset(positions);
    }

    static long recordingId(final String key, final String what) {
        final long recordingId;
        try {
            recordingId = Long.parseLong(key);
        } catch (NumberFormatException error) {
            throw new IllegalArgumentException(what + ": key '" + key + "' is not a recording id (a non-negative integer)");
        }
        if (recordingId < 0) {
            throw new IllegalArgumentException(what + ": key '" + key + "' is not a recording id (a non-negative integer)");
        }
        return recordingId;
    }
}
