"""Authentication of archive control sessions (Aeron's Authenticator model, sans-IO).

The archive calls an `Authenticator` at four points of a control session's handshake (see
`control_session.py`): when the connect request arrives with the client's credentials, when the
response publication has connected (``on_connected_session``), while the session waits for a
challenge response (``on_challenged_session``), and when the challenge response arrives. The
authenticator decides through the `SessionProxy` it is handed: ``authenticate(principal)``,
``challenge(bytes)`` or ``reject()``; a session it never decides on times out after the connect
timeout. Authenticators run on the conductor thread only and never block.

Two implementations:

* `AcceptAllAuthenticator` - Aeron's default: every client is authenticated at once.
* `SecretAuthenticator` - principals with shared secrets (``principal:secret`` lines in a
  credentials file). A client sends ASCII credentials in one of two forms:

  ``principal``
      asks for a challenge: the archive sends ``hmac-sha256:<32 hex digits nonce>`` and the
      client answers ``principal:<hex HMAC-SHA256(secret, challenge bytes)>``; the secret never
      crosses the wire (`answer_challenge` computes the answer);
  ``principal:secret``
      plain credentials, checked at once (refused when ``allow_plain`` is off).

  Anything else - empty credentials, an unknown principal, a wrong secret or answer - is
  rejected: the client receives ``ERROR AUTHENTICATION_REJECTED`` and nothing else.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# The byte forms are shared with the client; re-exported as this module's API.
from aeron_spark.archive.codecs.secret_challenge import (  # noqa: F401
    CHALLENGE_PREFIX,
    answer_challenge,
    encode_challenge_request,
    encode_plain_credentials,
)

log = logging.getLogger(__name__)

NONCE_BYTES = 16
#: Undecided per-session state older than this is forgotten (sessions time out long before).
STATE_EXPIRY_MS = 60_000


class SessionProxy(Protocol):
    """What an authenticator may do to the session it is deciding on."""

    @property
    def session_id(self) -> int: ...

    def challenge(self, encoded_challenge: bytes) -> bool: ...

    def authenticate(self, encoded_principal: bytes) -> None: ...

    def reject(self) -> None: ...


class Authenticator(Protocol):
    def on_connect_request(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None: ...

    def on_challenge_response(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None: ...

    def on_connected_session(self, session: SessionProxy, now_ms: int) -> None: ...

    def on_challenged_session(self, session: SessionProxy, now_ms: int) -> None: ...


class AcceptAllAuthenticator:
    """Authenticates every session as soon as its response publication is connected."""

    def on_connect_request(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None:
        pass

    def on_challenge_response(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None:
        pass

    def on_connected_session(self, session: SessionProxy, now_ms: int) -> None:
        session.authenticate(b"")

    def on_challenged_session(self, session: SessionProxy, now_ms: int) -> None:
        session.authenticate(b"")


class CredentialsFileError(ValueError):
    """A credentials file that cannot be used (missing, unreadable or badly formed)."""


def load_credentials_file(path: str | os.PathLike) -> dict[str, bytes]:
    """``principal:secret`` per line; blank lines and lines starting with ``#`` are ignored."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise CredentialsFileError(f"cannot read credentials file {file}: {error.strerror}") from None
    credentials: dict[str, bytes] = {}
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        principal, colon, secret = line.partition(":")
        if not colon or not principal or not secret:
            raise CredentialsFileError(
                f"{file}:{number}: expected 'principal:secret' with both parts non-empty, "
                f"got {raw_line!r}")
        if not principal.isascii() or ":" in principal:
            raise CredentialsFileError(f"{file}:{number}: principal {principal!r} must be ASCII "
                                       f"without ':'")
        if principal in credentials:
            raise CredentialsFileError(f"{file}:{number}: principal {principal!r} is listed twice")
        credentials[principal] = secret.encode("utf-8")
    if not credentials:
        raise CredentialsFileError(f"credentials file {file} lists no 'principal:secret' lines")
    return credentials


@dataclass(slots=True)
class _Pending:
    created_ms: int
    principal: str | None
    decision: bool | None = None  # True accept, False reject, None: challenge outstanding
    challenge: bytes | None = None
    challenge_sent: bool = False


class SecretAuthenticator:
    """Shared-secret authentication with an HMAC-SHA256 challenge (see the module docstring)."""

    def __init__(self, credentials: Mapping[str, bytes | str], *, allow_plain: bool = True) -> None:
        if not credentials:
            raise ValueError("SecretAuthenticator needs at least one principal")
        self._secrets = {principal: secret.encode("utf-8") if isinstance(secret, str) else secret
                         for principal, secret in credentials.items()}
        self._allow_plain = allow_plain
        self._pending: dict[int, _Pending] = {}

    @classmethod
    def from_file(cls, path: str | os.PathLike, *, allow_plain: bool = True) -> "SecretAuthenticator":
        return cls(load_credentials_file(path), allow_plain=allow_plain)

    def on_connect_request(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None:
        self._expire(now_ms)
        text = _ascii(encoded_credentials)
        if text is None or not text:
            log.info("control session %d: rejected, credentials empty or not ASCII", session_id)
            self._pending[session_id] = _Pending(now_ms, None, decision=False)
            return
        principal, colon, secret = text.partition(":")
        known = self._secrets.get(principal)
        if known is None:
            log.info("control session %d: rejected, unknown principal %r", session_id, principal)
            self._pending[session_id] = _Pending(now_ms, principal, decision=False)
        elif colon:
            accepted = self._allow_plain and hmac.compare_digest(secret.encode("ascii"), known)
            if not accepted:
                log.info("control session %d: rejected, %s", session_id,
                         "wrong secret" if self._allow_plain else "plain credentials not allowed")
            self._pending[session_id] = _Pending(now_ms, principal, decision=accepted)
        else:
            nonce = secrets.token_hex(NONCE_BYTES).encode("ascii")
            self._pending[session_id] = _Pending(now_ms, principal, challenge=CHALLENGE_PREFIX + nonce)

    def on_challenge_response(self, session_id: int, encoded_credentials: bytes, now_ms: int) -> None:
        pending = self._pending.get(session_id)
        if pending is None or pending.challenge is None or pending.decision is not None \
                or pending.principal is None:  # a challenge always names a principal
            return
        expected = answer_challenge(pending.principal, self._secrets[pending.principal], pending.challenge)
        pending.decision = hmac.compare_digest(encoded_credentials, expected)
        if not pending.decision:
            log.info("control session %d: rejected, wrong challenge response for %r",
                     session_id, pending.principal)

    def on_connected_session(self, session: SessionProxy, now_ms: int) -> None:
        pending = self._pending.get(session.session_id)
        if pending is None:
            session.reject()
        elif pending.decision is not None:
            self._decide(session, pending)
        elif not pending.challenge_sent and pending.challenge is not None:  # undecided: challenged
            pending.challenge_sent = session.challenge(pending.challenge)

    def on_challenged_session(self, session: SessionProxy, now_ms: int) -> None:
        pending = self._pending.get(session.session_id)
        if pending is None:
            session.reject()
        elif pending.decision is not None:
            self._decide(session, pending)

    def _decide(self, session: SessionProxy, pending: _Pending) -> None:
        del self._pending[session.session_id]
        if pending.decision and pending.principal is not None:  # accepted: the principal is known
            session.authenticate(pending.principal.encode("ascii"))
        else:
            session.reject()

    def _expire(self, now_ms: int) -> None:
        stale = [sid for sid, p in self._pending.items() if now_ms - p.created_ms > STATE_EXPIRY_MS]
        for session_id in stale:
            del self._pending[session_id]


def _ascii(data: bytes) -> str | None:
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        return None
