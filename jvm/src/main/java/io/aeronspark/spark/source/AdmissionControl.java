package io.aeronspark.spark.source;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * maxBytesPerTrigger, as the Python source does it (connector/source/admission_control.py): the
 * driver can only name frame boundaries at a recording's latest position and at term boundaries,
 * so a capped end is rounded down to a term boundary; the budget is shared in proportion to each
 * recording's backlog, then what rounding left goes a step at a time to the recordings furthest
 * below their share; when nothing fits, one step is taken anyway so a query always progresses.
 */
final class AdmissionControl {
    private AdmissionControl() {
    }

    static final class Backlog {
        final long recordingId;
        final long start;
        final long latest;
        final long termLength;

        Backlog(final long recordingId, final long start, final long latest, final long termLength) {
            this.recordingId = recordingId;
            this.start = start;
            this.latest = latest;
            this.termLength = termLength;
        }

        long available() {
            return Math.max(0, latest - start);
        }

        long furthestEndWithin(final long budget) {
            if (budget >= available()) {
                return latest;
            }
            if (termLength <= 0) {
                return start;
            }
            final long boundary = (start + budget) / termLength * termLength;
            return Math.max(boundary, start);
        }

        long nextStepAfter(final long position) {
            if (position >= latest) {
                return position;
            }
            if (termLength <= 0) {
                return latest;
            }
            return Math.min(latest, (position / termLength + 1) * termLength);
        }
    }

    /** The end position per recording so that the batch reads about maxBytes in total. */
    static Map<Long, Long> capByBytes(final List<Backlog> backlogs, final long maxBytes) {
        long total = 0;
        for (Backlog backlog : backlogs) {
            total += backlog.available();
        }
        final Map<Long, Long> ends = new HashMap<>();
        if (total <= maxBytes) {
            backlogs.forEach(b -> ends.put(b.recordingId, b.latest));
            return ends;
        }
        final Map<Long, Long> shares = new HashMap<>();
        long used = 0;
        for (Backlog backlog : backlogs) {
            final long share = (long) ((double) maxBytes * backlog.available() / total);
            shares.put(backlog.recordingId, share);
            final long end = backlog.furthestEndWithin(share);
            ends.put(backlog.recordingId, end);
            used += end - backlog.start;
        }
        long left = maxBytes - used;
        boolean stepped = true;
        while (stepped) {
            stepped = false;
            final List<Backlog> byShortfall = new ArrayList<>(backlogs);
            byShortfall.sort(Comparator.<Backlog>comparingLong(
                b -> -(shares.get(b.recordingId) - (ends.get(b.recordingId) - b.start))).thenComparingLong(b -> b.recordingId));
            for (Backlog backlog : byShortfall) {
                final long current = ends.get(backlog.recordingId);
                final long step = backlog.nextStepAfter(current);
                if (step > current && step - current <= left) {
                    ends.put(backlog.recordingId, step);
                    left -= step - current;
                    stepped = true;
                    break;
                }
            }
        }
        if (left == maxBytes) {  // nothing fitted: one step, so the query progresses
            final List<Backlog> byId = new ArrayList<>(backlogs);
            byId.sort(Comparator.comparingLong(b -> b.recordingId));
            for (Backlog backlog : byId) {
                if (backlog.available() > 0) {
                    ends.put(backlog.recordingId, backlog.nextStepAfter(backlog.start));
                    break;
                }
            }
        }
        return ends;
    }
}
