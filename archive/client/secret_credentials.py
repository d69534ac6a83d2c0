"""`SecretCredentials`: a principal and its shared secret, as a client authenticates with them.

``ArchiveClient.connect(credentials=c.connect_credentials(), on_challenge=c.on_challenge)``
sends only the principal and answers the archive's ``hmac-sha256:`` challenge with the HMAC of
the secret, so the secret never crosses the wire and works with an archive that refuses plain
credentials (``--auth-challenge-only``). An archive that accepts every client simply answers OK.
The secret is kept out of ``repr``/``str`` and out of every error this module raises.
"""

from __future__ import annotations

from aeron_spark.archive.codecs.secret_challenge import (
    CHALLENGE_PREFIX,
    answer_challenge,
    check_principal,
    encode_challenge_request,
    is_secret_challenge,
)


class UnsupportedChallenge(ValueError):
    """The archive sent a challenge these credentials cannot answer."""


class SecretCredentials:
    __slots__ = ("principal", "_secret")

    def __init__(self, principal: str, secret: str | bytes) -> None:
        check_principal(principal)
        if not secret:
            raise ValueError(f"the secret of principal {principal!r} is empty")
        self.principal = principal
        self._secret = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)

    def connect_credentials(self) -> bytes:
        return encode_challenge_request(self.principal)

    def on_challenge(self, encoded_challenge: bytes) -> bytes:
        if not is_secret_challenge(encoded_challenge):
            # The challenge is the archive's, not secret: its start says which scheme it wants.
            raise UnsupportedChallenge(
                f"the archive sent an authentication challenge this client cannot answer "
                f"({encoded_challenge[:24]!r}...); it answers {CHALLENGE_PREFIX.decode()} challenges only")
        return answer_challenge(self.principal, self._secret, encoded_challenge)

    def __repr__(self) -> str:
        return f"SecretCredentials(principal={self.principal!r}, secret=<redacted>)"

    __str__ = __repr__
