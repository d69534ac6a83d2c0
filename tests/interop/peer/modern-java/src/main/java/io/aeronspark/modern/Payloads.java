package io.aeronspark.modern;

import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * The deterministic payloads both peers send, so Python can recompute every digest
 * ({@code tests.interop.peer.interop_peer.expected_digest}). In message {@code i}, byte
 * {@code j < 8} is byte {@code j} of {@code i} as a little-endian int64 and byte {@code j >= 8}
 * is {@code (i * 131 + j * 7) & 0xFF}. A digest is SHA-256 over the payloads in order.
 */
final class Payloads
{
    static final int INDEX_LENGTH = Long.BYTES;

    private Payloads()
    {
    }

    static void fill(final MutableDirectBuffer buffer, final int offset, final long index, final int length)
    {
        for (int j = 0; j < length; j++)
        {
            final byte value = j < INDEX_LENGTH ? (byte)(index >>> (8 * j)) : (byte)((index * 131 + j * 7L) & 0xFF);
            buffer.putByte(offset + j, value);
        }
    }

    /** The message index a payload starts with, or -1 when it is too short to carry one. */
    static long indexOf(final DirectBuffer buffer, final int offset, final int length)
    {
        return length < INDEX_LENGTH ? -1 : buffer.getLong(offset, ByteOrder.LITTLE_ENDIAN);
    }

    static MessageDigest newDigest()
    {
        try
        {
            return MessageDigest.getInstance("SHA-256");
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("this Java runtime has no SHA-256", ex);
        }
    }

    static String hex(final byte[] bytes)
    {
        return HexFormat.of().formatHex(bytes);
    }
}
