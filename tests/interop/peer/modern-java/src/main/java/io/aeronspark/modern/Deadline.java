package io.aeronspark.modern;

/** The wall-clock budget of one subcommand's waits; running out raises {@link PeerTimeoutException}. */
final class Deadline
{
    private final long timeoutMs;
    private final long expiresAtNs;

    Deadline(final long timeoutMs)
    {
        this.timeoutMs = timeoutMs;
        this.expiresAtNs = System.nanoTime() + timeoutMs * 1_000_000L;
    }

    void check(final String waitingFor)
    {
        if (System.nanoTime() - expiresAtNs > 0)
        {
            throw new PeerTimeoutException("timed out after " + timeoutMs + " ms waiting for " + waitingFor);
        }
    }

    /** Checks the budget, then sleeps a millisecond so polling loops leave the core to others. */
    void pause(final String waitingFor)
    {
        check(waitingFor);
        try
        {
            Thread.sleep(1);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for " + waitingFor, ex);
        }
    }
}
