"""Exceptions of the control-protocol codecs.

Decoding raises only :class:`CodecError` (or a subclass), whatever the bytes, so a server can
answer a malformed request with an error response and keep the session. Encoding a message
that the chosen schema version cannot carry raises :class:`EncodeError` (a programming error
on the sending side, never caused by received bytes).
"""

from __future__ import annotations


class CodecError(ValueError):
    """A received control message could not be decoded.

    Attributes hold whatever could be read before the problem was found (``None`` if unknown):
    the header's ``template_id``, ``schema_id``, ``block_length`` and ``version``, and the
    message's ``control_session_id`` and ``correlation_id``.
    """

    def __init__(
        self,
        reason: str,
        *,
        template_id: int | None = None,
        schema_id: int | None = None,
        block_length: int | None = None,
        version: int | None = None,
        control_session_id: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        self.reason = reason
        self.template_id = template_id
        self.schema_id = schema_id
        self.block_length = block_length
        self.version = version
        self.control_session_id = control_session_id
        self.correlation_id = correlation_id
        super().__init__(self._describe())

    def _describe(self) -> str:
        context = [
            f"{name}={value}"
            for name, value in (
                ("templateId", self.template_id),
                ("schemaId", self.schema_id),
                ("blockLength", self.block_length),
                ("version", self.version),
                ("controlSessionId", self.control_session_id),
                ("correlationId", self.correlation_id),
            )
            if value is not None
        ]
        return f"{self.reason} ({', '.join(context)})" if context else self.reason


class UnknownTemplateError(CodecError):
    """The header is valid but its template id is not a schema-101 wire message.

    ``control_session_id`` and ``correlation_id`` are read on the assumption that the block
    starts like every request since 1.15 (controlSessionId i64 @0, correlationId i64 @8),
    when the block is long enough; treat them as a best guess.
    """


class SchemaIdMismatchError(CodecError):
    """The header's schema id is not 101 (the Java archive logs these and sends no response)."""


class EncodeError(ValueError):
    """A message cannot be encoded as asked (value out of range, non-ASCII text, or a field or
    template that the requested schema version does not have)."""
