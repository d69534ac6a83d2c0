"""The shared-secret credentials both ends of a control session agree on (sans-IO).

The sidecar's ``SecretAuthenticator`` (archive/service/authenticator.py) checks them and the
client (archive/client/secret_credentials.py) produces them, so their byte forms live here, once:

``principal``
    connect credentials asking for a challenge; the archive answers
    ``hmac-sha256:<32 hex digits nonce>`` and the client sends back
    ``principal:<hex HMAC-SHA256(secret, challenge bytes)>`` (the secret never crosses the wire);
``principal:secret``
    plain connect credentials, checked at once.
"""

from __future__ import annotations

import hashlib
import hmac

CHALLENGE_PREFIX = b"hmac-sha256:"


def check_principal(principal: str) -> None:
    if not principal or not principal.isascii() or ":" in principal:
        # The principal is not secret; naming it helps find the typo.
        raise ValueError(f"principal must be non-empty ASCII without ':', got {principal!r}")


def encode_challenge_request(principal: str) -> bytes:
    """Connect credentials asking the archive for a challenge."""
    check_principal(principal)
    return principal.encode("ascii")


def encode_plain_credentials(principal: str, secret: str | bytes) -> bytes:
    check_principal(principal)
    raw = secret.encode("utf-8") if isinstance(secret, str) else secret
    return principal.encode("ascii") + b":" + raw


def is_secret_challenge(encoded_challenge: bytes) -> bool:
    return encoded_challenge.startswith(CHALLENGE_PREFIX)


def answer_challenge(principal: str, secret: str | bytes, encoded_challenge: bytes) -> bytes:
    """The challenge response a client sends back for ``encoded_challenge``."""
    check_principal(principal)
    if not is_secret_challenge(encoded_challenge):
        raise ValueError(f"not a {CHALLENGE_PREFIX.decode()} challenge: {encoded_challenge[:40]!r}")
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    digest = hmac.new(key, encoded_challenge, hashlib.sha256).hexdigest()
    return principal.encode("ascii") + b":" + digest.encode("ascii")
