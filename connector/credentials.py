"""Credentials for an archive with authentication: ``archive.credentials`` (``principal:secret``)
or ``archive.credentialsFile`` (a path or URI of a file holding that line, read by each process
when it connects, so the secret need not be in the Spark plan or options at all).

Either way the client sends only the principal and answers the archive's challenge with an
HMAC of the secret (archive/client/secret_credentials.py), unless ``archive.credentialsEncoding``
is ``plain``: then the connect request carries the line ``principal:secret`` itself (UTF-8), as
an Aeron Java archive with ``SimpleAuthenticator`` (or an authenticator comparing the credentials
bytes) expects, and no challenge is answered. ``ArchiveCredentials`` is part of
``ArchiveConnection`` (the connection cache's key, pickled to executors); its ``repr``/``str``
never show the secret, it is not a dataclass (``dataclasses.asdict`` cannot expand it), and no
error raised here quotes an option value or a file's content.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from aeron_spark.connector.option_spec import choices_of, default_str

if TYPE_CHECKING:  # the archive client is imported where credentials are read (every Spark worker imports this)
    from aeron_spark.archive.client import SecretCredentials

CREDENTIALS_OPTION = "archive.credentials"
CREDENTIALS_FILE_OPTION = "archive.credentialsFile"
CREDENTIALS_ENCODING_OPTION = "archive.credentialsEncoding"
#: challenge: send the principal, answer an hmac-sha256 challenge (our sidecar); plain: send
#: ``principal:secret`` as the credentials bytes (Aeron's SimpleAuthenticator).
CREDENTIALS_ENCODINGS = choices_of(CREDENTIALS_ENCODING_OPTION)
DEFAULT_CREDENTIALS_ENCODING = default_str(CREDENTIALS_ENCODING_OPTION)
ACCEPTED = "principal:secret (the principal ASCII without ':', the secret non-empty)"
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


class CredentialsUnavailable(ValueError):
    """The credentials cannot be read or are malformed (the message never holds the secret)."""


class ArchiveCredentials:
    """What ``archive.credentials`` / ``archive.credentialsFile`` said; ``load()`` gives the
    principal and secret where the connection is made."""

    __slots__ = ("_text", "file", "encoding")

    def __init__(self, *, text: str | None = None, file: str | None = None, encoding: str = DEFAULT_CREDENTIALS_ENCODING) -> None:
        if (text is None) == (file is None):
            raise ValueError("ArchiveCredentials takes exactly one of text and file")
        if encoding not in CREDENTIALS_ENCODINGS:
            raise ValueError(f"encoding {encoding!r} is not one of {CREDENTIALS_ENCODINGS}")
        self._text = text
        self.file = file
        self.encoding = encoding
        if text is not None:
            _split(text, f"option {CREDENTIALS_OPTION}")  # malformed: fails when the options are parsed

    def load(self) -> SecretCredentials | PlainCredentials:
        if self._text is not None:
            text, where = self._text, f"option {CREDENTIALS_OPTION}"
        else:
            assert self.file is not None  # __init__ takes exactly one of text and file
            text, where = _first_line(read_credentials_file(self.file), self.file), f"option {self.describe()}: its line"
        loaded = _split(text, where)
        return PlainCredentials(loaded.principal, text.strip()) if self.encoding == "plain" else loaded

    def describe(self) -> str:
        """Which option gave them, as an error message may say (never the secret)."""
        return CREDENTIALS_OPTION if self.file is None else f"{CREDENTIALS_FILE_OPTION}={self.file}"

    def _key(self) -> tuple[str | None, str | None, str]:
        return (self._text, self.file, self.encoding)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArchiveCredentials) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self._text is not None:
            return f"ArchiveCredentials({CREDENTIALS_OPTION}=<redacted>)"
        return f"ArchiveCredentials({CREDENTIALS_FILE_OPTION}={self.file!r})"

    __str__ = __repr__

    def __getstate__(self) -> tuple[str | None, str | None, str]:
        return self._key()

    def __setstate__(self, state: tuple[str | None, str | None, str]) -> None:
        self._text, self.file, self.encoding = state


class PlainCredentials:
    """``archive.credentialsEncoding=plain``: the connect request carries ``principal:secret`` (UTF-8)
    as its credentials; a challenge is not answered (it fails the connect, naming the option). The
    secret is kept out of ``repr``/``str`` and out of every error."""

    __slots__ = ("principal", "_line")

    def __init__(self, principal: str, line: str) -> None:
        self.principal = principal
        self._line = line.encode("utf-8")  # principal:secret, as given

    def connect_credentials(self) -> bytes:
        return self._line

    def on_challenge(self, encoded_challenge: bytes) -> bytes:
        raise CredentialsUnavailable(
            f"the archive sent an authentication challenge ({len(encoded_challenge)} bytes) to principal "
            f"{self.principal!r}, but {CREDENTIALS_ENCODING_OPTION}=plain answers none: the archive wants "
            f"another scheme (try {CREDENTIALS_ENCODING_OPTION}=challenge)")

    def __repr__(self) -> str:
        return f"PlainCredentials(principal={self.principal!r}, secret=<redacted>)"

    __str__ = __repr__


def _split(text: str, where: str) -> SecretCredentials:
    principal, colon, secret = text.strip().partition(":")
    if not colon or not principal or not secret or not principal.isascii():
        raise CredentialsUnavailable(f"{where} is not valid (its value is not shown: it holds a secret); "
                                     f"accepted: {ACCEPTED}")
    from aeron_spark.archive.client import SecretCredentials
    return SecretCredentials(principal, secret)


def _first_line(content: str, file: str) -> str:
    lines = [line.strip() for line in content.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if len(lines) != 1:
        raise CredentialsUnavailable(f"option {CREDENTIALS_FILE_OPTION}={file}: the file must hold exactly one "
                                     f"line {ACCEPTED} (blank lines and # comments aside); it holds {len(lines)}")
    return lines[0]


def read_credentials_file(file: str) -> str:
    """The file's text: a local path (or file: URI), else any URI pyarrow.fs opens (s3:, gs:,
    abfs:, hdfs:), so executors on other hosts read the same secret from shared storage."""
    try:
        if file.startswith("file:"):
            file_path = urlparse(file).path
        elif _URI.match(file):
            from pyarrow import fs  # imported late: only URIs need it
            filesystem, path = fs.FileSystem.from_uri(file)
            with filesystem.open_input_stream(path) as stream:
                return stream.read().decode("utf-8")
        else:
            file_path = file
        with open(file_path, encoding="utf-8") as local:
            return local.read()
    except (OSError, ValueError) as error:
        # OSError texts name the path, never the content.
        reason = error.strerror if isinstance(error, OSError) and error.strerror else type(error).__name__
        raise CredentialsUnavailable(f"option {CREDENTIALS_FILE_OPTION}={file}: cannot read it ({reason})") from None
