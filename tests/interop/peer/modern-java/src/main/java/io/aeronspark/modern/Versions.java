package io.aeronspark.modern;

import io.aeron.archive.client.AeronArchive;
import org.agrona.SemanticVersion;

/** What the jar the peer was compiled against says about itself (the build rebuilds per jar). */
final class Versions
{
    static final String AERON = io.aeron.AeronVersion.VERSION;
    static final String ARCHIVE_PROTOCOL = SemanticVersion.toString(AeronArchive.Configuration.PROTOCOL_SEMANTIC_VERSION);

    private Versions()
    {
    }
}
