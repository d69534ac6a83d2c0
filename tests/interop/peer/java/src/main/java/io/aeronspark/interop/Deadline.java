package io.aeronspark.interop;

/** A wall-clock limit for one subcommand's waits; running out raises {@link PeerTimeoutException}. */
final class Deadline
{
    private final long deadlineNs;
    private final long timeoutMs;

    Deadline(final long timeoutMs)
    {
        this.timeoutMs = timeoutMs;
        this.deadlineNs = System.nanoTime() + timeoutMs * 1_000_000L;
    }

    void check(final String waitingFor)
    {
        if (System.nanoTime() - deadlineNs > 0)
        {
            throw new PeerTimeoutException("timed out after " + timeoutMs + " ms waiting for " + waitingFor);
        }
    }

    /** Checks the deadline, then backs off briefly so polling loops do not burn a core. */
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
