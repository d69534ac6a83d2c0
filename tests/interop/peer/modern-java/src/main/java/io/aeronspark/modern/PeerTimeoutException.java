package io.aeronspark.modern;

/** Something the peer waited for did not happen in time: exit code {@link ModernPeer#EXIT_TIMEOUT}. */
final class PeerTimeoutException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    PeerTimeoutException(final String message)
    {
        super(message);
    }
}
