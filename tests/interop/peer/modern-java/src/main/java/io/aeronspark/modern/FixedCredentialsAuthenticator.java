package io.aeronspark.modern;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

import io.aeron.security.Authenticator;
import io.aeron.security.AuthenticatorSupplier;
import io.aeron.security.SessionProxy;

/**
 * The archive's {@code --credentials user:pass}: a session is authenticated when the encoded
 * credentials of its connect request are exactly those UTF-8 bytes, and rejected otherwise (also
 * when it sends none). No challenge. The principal given to the archive is the part before ':'.
 */
final class FixedCredentialsAuthenticator implements Authenticator
{
    private final byte[] expected;
    private final byte[] principal;
    private final Map<Long, Boolean> accepted = new HashMap<>();

    private FixedCredentialsAuthenticator(final String credentials)
    {
        this.expected = credentials.getBytes(StandardCharsets.UTF_8);
        final int colon = credentials.indexOf(':');
        this.principal = (colon < 0 ? credentials : credentials.substring(0, colon)).getBytes(StandardCharsets.UTF_8);
    }

    static AuthenticatorSupplier supplier(final String credentials)
    {
        if (credentials.isEmpty())
        {
            throw new UsageException("archive: --credentials must not be empty (user:pass)");
        }
        return () -> new FixedCredentialsAuthenticator(credentials);
    }

    @Override
    public void onConnectRequest(final long sessionId, final byte[] encodedCredentials, final long nowMs)
    {
        accepted.put(sessionId, Arrays.equals(expected, encodedCredentials));
    }

    @Override
    public void onChallengeResponse(final long sessionId, final byte[] encodedCredentials, final long nowMs)
    {
        accepted.put(sessionId, Arrays.equals(expected, encodedCredentials));
    }

    @Override
    public void onConnectedSession(final SessionProxy sessionProxy, final long nowMs)
    {
        decide(sessionProxy);
    }

    @Override
    public void onChallengedSession(final SessionProxy sessionProxy, final long nowMs)
    {
        decide(sessionProxy);
    }

    private void decide(final SessionProxy sessionProxy)
    {
        final Boolean ok = accepted.get(sessionProxy.sessionId());
        if (Boolean.TRUE.equals(ok))
        {
            if (sessionProxy.authenticate(principal))
            {
                accepted.remove(sessionProxy.sessionId());
            }
        }
        else
        {
            accepted.remove(sessionProxy.sessionId());
            sessionProxy.reject();
        }
    }
}
