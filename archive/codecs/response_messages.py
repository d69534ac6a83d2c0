"""The response and event dataclasses of schema 101 (archive -> client; 101-103 on the
recording-events stream), one frozen dataclass per template.

The template 22 wire message is :class:`RecordingDescriptorMessage` (SBE name
``RecordingDescriptor``), so that it does not shadow the shared
:class:`aeron_spark.archive.codecs.recording_descriptor.RecordingDescriptor` it converts to and from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from aeron_spark.archive.codecs.constants import ControlResponseCode, RecordingSignal
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

# The message and the shared descriptor carry the same fields under the same names (the message in
# wire order); the conversions copy them by name.
_DESCRIPTOR_FIELDS: tuple[str, ...] = tuple(field.name for field in fields(RecordingDescriptor))



@dataclass(frozen=True, slots=True)
class ControlResponse:
    TEMPLATE_ID: ClassVar[int] = 1
    control_session_id: int
    correlation_id: int
    relevant_id: int  # result for OK, ArchiveErrorCode for ERROR
    code: ControlResponseCode | int
    version: int  # v4+; 0 from a 1.15.x archive
    error_message: str


@dataclass(frozen=True, slots=True)
class Challenge:
    TEMPLATE_ID: ClassVar[int] = 59
    control_session_id: int
    correlation_id: int
    version: int  # the Java archive leaves it 0
    encoded_challenge: bytes


@dataclass(frozen=True, slots=True)
class RecordingDescriptorMessage:
    """Template 22 (SBE ``RecordingDescriptor``): one ListRecordings* answer."""

    TEMPLATE_ID: ClassVar[int] = 22
    control_session_id: int
    correlation_id: int
    recording_id: int
    start_timestamp: int
    stop_timestamp: int
    start_position: int
    stop_position: int
    initial_term_id: int
    segment_file_length: int
    term_buffer_length: int
    mtu_length: int
    session_id: int
    stream_id: int
    stripped_channel: str
    original_channel: str
    source_identity: str

    def to_descriptor(self) -> RecordingDescriptor:
        """The shared descriptor dataclass, keeping this message's session and correlation ids."""
        return RecordingDescriptor(**{name: getattr(self, name) for name in _DESCRIPTOR_FIELDS})

    @classmethod
    def from_descriptor(
        cls,
        descriptor: RecordingDescriptor,
        *,
        control_session_id: int | None = None,
        correlation_id: int | None = None,
    ) -> "RecordingDescriptorMessage":
        """The wire message for ``descriptor``; the archive overwrites the session and
        correlation ids with the requester's, so pass them here (default: the descriptor's)."""
        values = {name: getattr(descriptor, name) for name in _DESCRIPTOR_FIELDS}
        if control_session_id is not None:
            values["control_session_id"] = control_session_id
        if correlation_id is not None:
            values["correlation_id"] = correlation_id
        return cls(**values)


@dataclass(frozen=True, slots=True)
class RecordingSubscriptionDescriptor:
    TEMPLATE_ID: ClassVar[int] = 23
    control_session_id: int
    correlation_id: int
    subscription_id: int
    stream_id: int
    stripped_channel: str


@dataclass(frozen=True, slots=True)
class RecordingSignalEvent:
    TEMPLATE_ID: ClassVar[int] = 24
    control_session_id: int
    correlation_id: int
    recording_id: int
    subscription_id: int
    position: int
    signal: RecordingSignal | int


@dataclass(frozen=True, slots=True)
class Ping:
    TEMPLATE_ID: ClassVar[int] = 106
    control_session_id: int


@dataclass(frozen=True, slots=True)
class RecordingStarted:
    TEMPLATE_ID: ClassVar[int] = 101
    recording_id: int
    start_position: int
    session_id: int
    stream_id: int
    channel: str
    source_identity: str


@dataclass(frozen=True, slots=True)
class RecordingProgress:
    TEMPLATE_ID: ClassVar[int] = 102
    recording_id: int
    start_position: int
    position: int


@dataclass(frozen=True, slots=True)
class RecordingStopped:
    TEMPLATE_ID: ClassVar[int] = 103
    recording_id: int
    start_position: int
    stop_position: int


if {field.name for field in fields(RecordingDescriptorMessage)} != set(_DESCRIPTOR_FIELDS):
    raise TypeError("RecordingDescriptorMessage and RecordingDescriptor fields disagree")
