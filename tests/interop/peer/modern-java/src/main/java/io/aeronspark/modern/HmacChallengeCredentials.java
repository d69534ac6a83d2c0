package io.aeronspark.modern;

import io.aeron.security.CredentialsSupplier;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * {@code --hmac-credentials principal:secret}: what a Java user writes to log in to our sidecar's
 * shared-secret authenticator without sending the secret: the connect carries the principal, and
 * the archive's challenge is answered with {@code principal:<hex HMAC-SHA256(secret, challenge)>}.
 */
final class HmacChallengeCredentials implements CredentialsSupplier
{
    private final String principal;
    private final byte[] secret;

    HmacChallengeCredentials(final String credentials)
    {
        final int colon = credentials.indexOf(':');
        if (colon <= 0 || colon == credentials.length() - 1)
        {
            throw new UsageException("--hmac-credentials must be principal:secret");
        }
        this.principal = credentials.substring(0, colon);
        this.secret = credentials.substring(colon + 1).getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public byte[] encodedCredentials()
    {
        return principal.getBytes(StandardCharsets.US_ASCII);
    }

    @Override
    public byte[] onChallenge(final byte[] encodedChallenge)
    {
        try
        {
            final Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            final byte[] digest = mac.doFinal(encodedChallenge);
            final StringBuilder answer = new StringBuilder(principal).append(':');
            for (final byte b : digest)
            {
                answer.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
            }
            return answer.toString().getBytes(StandardCharsets.US_ASCII);
        }
        catch (final GeneralSecurityException ex)
        {
            throw new IllegalStateException("HMAC-SHA256 unavailable", ex);
        }
    }
}
