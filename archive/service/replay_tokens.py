"""Replay tokens: how a replay over a response channel finds the control session that asked.

With response channels (``control-mode=response``) a client cannot receive a replay on a port of
its own. So, as Aeron's archive does (since 1.45), it first asks a ReplayTokenRequest (105) on its
control session, then opens a *new* request publication to the archive's control channel
carrying ``response-correlation-id=<its replay subscription's registration id>`` and sends the
Replay/BoundedReplay request over it with ``replayToken``. That request arrives on another
request Image than the session's; the token names the session (and the recording) instead, and
the replay publication is created with ``response-correlation-id=<that Image's correlation id>``
so that the media driver sends the replay back over the connection the client opened.

A token is a random non-null int64, valid for the connect timeout, for one recording, and usable
while it is valid (Aeron's ArchiveConductor does not consume it either). The tokens of a session
end with it. A session holds at most `MAX_TOKENS_PER_SESSION`: a further request evicts its
oldest token, so a client that asks for tokens in a loop cannot grow the archive's memory.

Sans-IO: the clock (epoch ms, as the control sessions') and the random source are the caller's.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

NULL_TOKEN = -1
MAX_TOKENS_PER_SESSION = 16

SessionT = TypeVar("SessionT")


def random_token() -> int:
    """A random signed int64 (what Aeron's ``random.nextLong()`` gives)."""
    return secrets.randbits(64) - (1 << 63)


@dataclass(frozen=True, slots=True)
class _Token(Generic[SessionT]):
    session: SessionT
    control_session_id: int
    recording_id: int
    deadline_ms: int


class ReplayTokens(Generic[SessionT]):
    """Tokens issued to control sessions (see the module docstring)."""

    def __init__(self, *, validity_ms: int, random_source: Callable[[], int] = random_token) -> None:
        if validity_ms <= 0:
            raise ValueError(f"validity_ms must be > 0, got {validity_ms}")
        self.validity_ms = validity_ms
        self._random = random_source
        self._tokens: dict[int, _Token[SessionT]] = {}

    def __len__(self) -> int:
        return len(self._tokens)

    def issue(self, session: SessionT, control_session_id: int, recording_id: int, now_ms: int) -> int:
        """A new token for ``session`` to replay ``recording_id``, valid until now + validity."""
        own = [token for token, entry in self._tokens.items() if entry.control_session_id == control_session_id]
        while len(own) >= MAX_TOKENS_PER_SESSION:
            del self._tokens[own.pop(0)]  # dicts keep insertion order: the oldest first
        token = NULL_TOKEN
        while token == NULL_TOKEN or token in self._tokens:
            token = self._random()
        self._tokens[token] = _Token(session, control_session_id, recording_id, now_ms + self.validity_ms)
        return token

    def session_for(self, token: int, recording_id: int, now_ms: int) -> SessionT | None:
        """The session the token was issued to, if it is for ``recording_id`` and still valid."""
        entry = self._tokens.get(token)
        if entry is None or entry.recording_id != recording_id or now_ms >= entry.deadline_ms:
            return None
        return entry.session

    def remove_session(self, control_session_id: int) -> None:
        """Forgets every token of a closed session."""
        for token in [t for t, entry in self._tokens.items() if entry.control_session_id == control_session_id]:
            del self._tokens[token]

    def expire(self, now_ms: int) -> int:
        """Forgets tokens past their deadline; returns how many."""
        expired = [token for token, entry in self._tokens.items() if now_ms >= entry.deadline_ms]
        for token in expired:
            del self._tokens[token]
        return len(expired)
