package io.aeronspark.modern;

/** A bad command line: the peer prints the message and exits with {@link ModernPeer#EXIT_USAGE}. */
final class UsageException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    UsageException(final String message)
    {
        super(message);
    }
}
