package io.aeronspark.spark.sink;

import java.util.HashMap;
import java.util.Map;

import io.aeron.Aeron;
import io.aeron.Publication;
import io.aeron.archive.client.AeronArchive;
import io.aeronspark.spark.AeronConnections;
import io.aeronspark.spark.ArchiveSettings;

/**
 * What the sink's writers of one JVM share: one concurrent {@link Publication} per channel and
 * stream (so every task of an executor publishes in one session, hence one recording, across
 * batches and query restarts), and one archive client per archive (for the recorded position a
 * commit waits for). Both live until the JVM exits (AeronConnections closes the Aeron client).
 */
final class SinkPublications {
    private static final Map<String, Publication> PUBLICATIONS = new HashMap<>();
    private static final Map<ArchiveSettings, AeronArchive> ARCHIVES = new HashMap<>();

    private SinkPublications() {
    }

    static synchronized Publication publication(final SinkOptions options) {
        final String key = options.archive.aeronDir + "|" + options.streamId + "|" + options.channel;
        final Publication existing = PUBLICATIONS.get(key);
        if (existing != null && !existing.isClosed()) {
            return existing;
        }
        final Aeron aeron = AeronConnections.aeron(options.archive.aeronDir);
        final Publication publication = aeron.addPublication(options.channel, options.streamId);
        PUBLICATIONS.put(key, publication);
        return publication;
    }

    /** The shared archive client (reconnected when the previous one closed). */
    static synchronized AeronArchive archive(final ArchiveSettings settings) {
        final AeronArchive existing = ARCHIVES.get(settings);
        if (existing != null && !existing.context().aeron().isClosed() && existing.controlResponsePoller()
            .subscription().isConnected()) {
            return existing;
        }
        if (existing != null) {
            existing.close();
        }
        final AeronArchive archive = AeronConnections.connectArchive(settings);
        ARCHIVES.put(settings, archive);
        return archive;
    }

    /** Forget a client whose request failed, so the next commit connects afresh. */
    static synchronized void discard(final ArchiveSettings settings, final AeronArchive archive) {
        if (ARCHIVES.get(settings) == archive) {
            ARCHIVES.remove(settings);
            try {
                archive.close();
            } catch (RuntimeException ignored) {
                // it is being replaced because it failed already
            }
        }
    }
}
