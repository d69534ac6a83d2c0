package io.aeronspark.modern;

import io.aeron.security.Authenticator;
import io.aeron.security.SessionProxy;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * {@code archive --credentials user:pass --challenge TEXT}: a connect request whose encoded
 * credentials are the principal ({@code user}) is answered with a Challenge carrying {@code TEXT};
 * a challenge response of exactly {@code user:pass} authenticates, anything else is rejected. Aeron
 * ships no challenging authenticator, and the ChallengeResponse request (60) needs one to be seen.
 * The archive calls an authenticator from its conductor thread only, so plain maps suffice.
 */
final class ChallengingAuthenticator implements Authenticator
{
    private enum State { CHALLENGE, REJECT, AWAIT_RESPONSE, ACCEPT }

    private final byte[] principal;
    private final byte[] credentials;
    private final byte[] challenge;
    private final Map<Long, State> sessions = new HashMap<>();

    ChallengingAuthenticator(final byte[] principal, final byte[] credentials, final byte[] challenge)
    {
        this.principal = principal;
        this.credentials = credentials;
        this.challenge = challenge;
    }

    public void onConnectRequest(final long sessionId, final byte[] encodedCredentials, final long nowMs)
    {
        sessions.put(sessionId, Arrays.equals(principal, encodedCredentials) ? State.CHALLENGE : State.REJECT);
    }

    public void onChallengeResponse(final long sessionId, final byte[] encodedCredentials, final long nowMs)
    {
        if (sessions.get(sessionId) == State.AWAIT_RESPONSE)
        {
            sessions.put(sessionId, Arrays.equals(credentials, encodedCredentials) ? State.ACCEPT : State.REJECT);
        }
    }

    public void onConnectedSession(final SessionProxy sessionProxy, final long nowMs)
    {
        final long sessionId = sessionProxy.sessionId();
        if (sessions.get(sessionId) == State.CHALLENGE)
        {
            if (sessionProxy.challenge(challenge))
            {
                sessions.put(sessionId, State.AWAIT_RESPONSE);
            }
        }
        else
        {
            sessions.remove(sessionId);
            sessionProxy.reject();
        }
    }

    public void onChallengedSession(final SessionProxy sessionProxy, final long nowMs)
    {
        final long sessionId = sessionProxy.sessionId();
        final State state = sessions.get(sessionId);
        if (state == State.ACCEPT)
        {
            if (sessionProxy.authenticate(principal))
            {
                sessions.remove(sessionId);
            }
        }
        else if (state == State.REJECT)
        {
            sessions.remove(sessionId);
            sessionProxy.reject();
        }
    }
}
