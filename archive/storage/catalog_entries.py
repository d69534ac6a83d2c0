"""What a catalog entry holds: the stored descriptor body (encode, decode, the string bound), the
entry and problem records a `Catalog` reports, the argument checks of a new entry, and the
catalog's errors. No file access here: `catalog` reads and writes the frames.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.errors import CodecError, EncodeError
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

log = logging.getLogger(__name__)

MIN_DESCRIPTOR_LENGTH = descriptor_body.MIN_BODY_LENGTH  # 92
MAX_DESCRIPTOR_LENGTH = layout.MAX_DESCRIPTOR_BODY_LENGTH
MAX_STRINGS_LENGTH = MAX_DESCRIPTOR_LENGTH - MIN_DESCRIPTOR_LENGTH
INVALID, VALID, DELETED = layout.INVALID, layout.VALID, layout.DELETED


class DescriptorChecksum(Protocol):
    """The record checksum (`checksum.FrameChecksum`): a signed int32 over bytes."""

    @property
    def name(self) -> str: ...

    def compute(self, data: bytes) -> int: ...


class CatalogError(Exception):
    """A catalog file that cannot be used as asked, or a request the catalog cannot serve."""


class OldCatalogVersionError(CatalogError):
    """A 1 KiB slot catalog (archive file version 0, 1.x or 2.x) opened for writing."""


class UnknownRecordingError(CatalogError, LookupError):
    def __init__(self, recording_id: int, why: str = "no valid recording with this id") -> None:
        super().__init__(f"unknown recording {recording_id}: {why}")
        self.recording_id = recording_id


class DescriptorEncodingError(CatalogError, ValueError):
    """A descriptor that cannot be stored (non-ASCII text, strings over the catalog's bound)."""


class DescriptorDecodingError(CatalogError, ValueError):
    """Bytes that are not a well-formed RecordingDescriptor body."""


def encode_recording_descriptor(descriptor: RecordingDescriptor) -> bytes:
    """The RecordingDescriptor SBE body the catalog stores (`codecs.descriptor_body`)."""
    try:
        return descriptor_body.encode_descriptor_body(descriptor)
    except EncodeError as error:
        raise DescriptorEncodingError(f"recording {descriptor.recording_id}: {error}") from None


def decode_recording_descriptor(buffer: bytes | bytearray | memoryview, offset: int = 0,
                                length: int | None = None) -> tuple[RecordingDescriptor, int]:
    """Decodes a body written by `encode_recording_descriptor`; returns (descriptor, bytes used).

    ``length`` bounds the body (e.g. the frame's descriptor length); by default the rest of the
    buffer. Bytes after the body (a frame's padding) are ignored.
    """
    end = len(buffer) if length is None else offset + length
    if end > len(buffer) or end - offset < MIN_DESCRIPTOR_LENGTH:
        raise DescriptorDecodingError(
            f"descriptor body at offset {offset} is {max(0, min(end, len(buffer)) - offset)} bytes, "
            f"needs at least {MIN_DESCRIPTOR_LENGTH}")
    try:
        return descriptor_body.decode_descriptor_body(buffer, offset, end - offset)
    except CodecError as error:
        raise DescriptorDecodingError(str(error)) from None


def fit_source_identity(stripped_channel: str, original_channel: str, source_identity: str,
                        recording_id: int | None = None) -> str:
    """Returns the source identity, cut so that the three strings stay within the catalog's
    per-descriptor bound (`MAX_STRINGS_LENGTH`, 16 KiB less the fixed part).

    Channels are never cut (they identify the recording); channels that alone exceed the bound
    are rejected.
    """
    label = "new recording" if recording_id is None else f"recording {recording_id}"
    channels = len(stripped_channel) + len(original_channel)
    if channels > MAX_STRINGS_LENGTH:
        raise DescriptorEncodingError(
            f"{label}: strippedChannel ({len(stripped_channel)} bytes) + originalChannel "
            f"({len(original_channel)} bytes) exceed the catalog's {MAX_STRINGS_LENGTH}-byte limit "
            f"for the three descriptor strings")
    room = MAX_STRINGS_LENGTH - channels
    if len(source_identity) > room:
        log.warning("%s: sourceIdentity of %d bytes truncated to %d to fit the catalog's bound",
                    label, len(source_identity), room)
        return source_identity[:room]
    return source_identity


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One entry: the descriptor and its state (INVALID and DELETED entries keep their id)."""

    descriptor: RecordingDescriptor
    valid: bool
    state: int = VALID
    checksum: int = 0

    @property
    def deleted(self) -> bool:
        return self.state == DELETED

    @property
    def state_name(self) -> str:
        return layout.STATE_NAMES.get(self.state, str(self.state))


@dataclass(frozen=True, slots=True)
class CatalogProblem:
    """Something wrong found in the file; the entry is treated as unusable (never as valid)."""

    recording_id: int | None
    message: str

    def __str__(self) -> str:
        where = "catalog header" if self.recording_id is None else f"recording {self.recording_id}"
        return f"{where}: {self.message}"


def check_lengths(term_length: int, segment_length: int, mtu_length: int) -> None:
    if not is_power_of_two(term_length) or not 64 * 1024 <= term_length <= 1024 ** 3:
        raise ValueError(f"term buffer length {term_length} must be a power of two in [64 KiB, 1 GiB]")
    if not is_power_of_two(segment_length) or segment_length < term_length:
        raise ValueError(f"segment file length {segment_length} must be a power of two >= the term "
                         f"length {term_length}")
    if mtu_length <= 32 or mtu_length % 32:
        raise ValueError(f"mtu length {mtu_length} must be a multiple of 32 above 32")


def check_position(name: str, position: int) -> None:
    if position < 0 or position % 32:
        raise ValueError(f"{name} {position} must be >= 0 and a multiple of 32 (frame alignment)")


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0
