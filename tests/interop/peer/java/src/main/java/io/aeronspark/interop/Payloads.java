package io.aeronspark.interop;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * Deterministic message payloads, so any reader (Java or Python) can recompute what was sent.
 * Message {@code i} of length {@code n}: byte {@code j < 8} is byte {@code j} of {@code i} as a
 * little-endian int64; byte {@code j >= 8} is {@code (i * 131 + j * 7) & 0xFF}. The digest of a
 * run of messages is SHA-256 over their payloads in order. Mirrored by
 * {@code tests.interop.peer.interop_peer.expected_digest}.
 */
final class Payloads
{
    static final int INDEX_BYTES = Long.BYTES;

    private Payloads()
    {
    }

    static void fill(final MutableDirectBuffer buffer, final int offset, final long index, final int length)
    {
        for (int j = 0; j < length; j++)
        {
            buffer.putByte(offset + j, byteAt(index, j));
        }
    }

    static byte byteAt(final long index, final int j)
    {
        if (j < INDEX_BYTES)
        {
            return (byte)(index >>> (8 * j));
        }
        return (byte)((index * 131 + j * 7L) & 0xFF);
    }

    /** Reads back the message index from a payload of at least 8 bytes, else -1. */
    static long indexOf(final DirectBuffer buffer, final int offset, final int length)
    {
        if (length < INDEX_BYTES)
        {
            return -1;
        }
        return buffer.getLong(offset, java.nio.ByteOrder.LITTLE_ENDIAN);
    }

    static MessageDigest newDigest()
    {
        try
        {
            return MessageDigest.getInstance("SHA-256");
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("SHA-256 is missing from this Java runtime", ex);
        }
    }

    static String hex(final byte[] bytes)
    {
        final StringBuilder out = new StringBuilder(bytes.length * 2);
        for (final byte b : bytes)
        {
            out.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return out.toString();
    }
}
