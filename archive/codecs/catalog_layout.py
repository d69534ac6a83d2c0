"""The byte layouts of ``archive.catalog``, sans-IO: the modern (3.x) header and entry frames, and
the old fixed 1 KiB slots (1.x/2.x and the 1.15-era version 0) that readers and migrate accept.

Modern catalog (archive file version 3.1.0, Aeron >= 1.32), little-endian:

* CatalogHeader at 0, 32 bytes: ``version:i32 @0`` (3.1.0 = 196864), ``length:i32 @4`` (32),
  ``nextRecordingId:i64 @8``, ``alignment:i32 @16`` (64), reserved to 32.
* Entries packed from offset 32 (the header length). Each frame: a 32-byte
  RecordingDescriptorHeader ``{length:i32 @0 = frameLength - 32, state:i32 @4 (INVALID 0, VALID 1,
  DELETED 2), checksum:i32 @8, reserved}`` then the RecordingDescriptor body
  (`descriptor_body`), zero-padded so that the frame length is a multiple of the alignment.
  ``length`` 0 ends the entries.

Old catalog (<= 1.31): ``version:i32 @0``, ``entryLength:i32 @4`` (1024); recording N's slot at
``(N+1)*1024``: ``{length:i32 @0 = exact body length (0 = empty), valid:i8 @4}``, body at +32.
A modern reader recognises it by its ``entryLength`` field (where the modern header has 32).
"""

from __future__ import annotations

import struct


def semantic_version(major: int, minor: int, patch: int) -> int:
    return (major << 16) | (minor << 8) | patch


def version_text(version: int) -> str:
    return f"{version >> 16}.{(version >> 8) & 0xFF}.{version & 0xFF}"


#: The archive file version this project writes (catalog and mark file), Aeron 1.32 to 1.52.
ARCHIVE_FILE_VERSION = semantic_version(3, 1, 0)  # 196864
ARCHIVE_FILE_MAJOR = 3

# ---- modern header and frames
HEADER_LENGTH = 32
DESCRIPTOR_HEADER_LENGTH = 32
DEFAULT_ALIGNMENT = 64  # Aeron's CACHE_LINE_LENGTH: new catalogs
DEFAULT_CAPACITY = 1024 * 1024  # Aeron's aeron.archive.catalog.capacity default (bytes)
MIN_CAPACITY = 32
MAX_CAPACITY = 2 ** 31 - 1
GROWTH_NUMERATOR, GROWTH_DENOMINATOR = 3, 2  # x1.5 per step, like Aeron's Catalog
#: A sane upper bound on one stored descriptor body (3.x has no per-entry limit; a listing
#: answer must still fit a control message).
MAX_DESCRIPTOR_BODY_LENGTH = 16 * 1024

CATALOG_HEADER = struct.Struct("<iiqi12x")  # version, length, nextRecordingId, alignment
DESCRIPTOR_HEADER = struct.Struct("<iii20x")  # length, state, checksum
NEXT_RECORDING_ID_OFFSET = 8
STATE_OFFSET = 4
CHECKSUM_OFFSET = 8

INVALID = 0
VALID = 1
DELETED = 2
STATE_NAMES = {INVALID: "INVALID", VALID: "VALID", DELETED: "DELETED"}

#: Present while `aeron-archive migrate` has not finished (storage.migration).
MIGRATION_JOURNAL_FILE_NAME = "archive.catalog.migration"

# ---- old (fixed slot) layout
OLD_ENTRY_LENGTH = 1024
OLD_HEADER = struct.Struct("<ii")  # version, entryLength
OLD_DESCRIPTOR_HEADER = struct.Struct("<ib")  # exact body length, valid flag
OLD_MAX_BODY_LENGTH = OLD_ENTRY_LENGTH - DESCRIPTOR_HEADER_LENGTH  # 992
OLD_VERSION_0 = 0  # 1.15-1.21: the SBE schema version; segments `<id>-<segmentIndex>.rec`
OLD_VERSION_1 = semantic_version(1, 0, 0)  # 1.22: `<id>-<base>.rec`, base a multiple of segment length
OLD_VERSION_2 = semantic_version(2, 0, 0)  # 1.23: bases relative to the start term
OLD_VERSION_2_1 = semantic_version(2, 1, 0)  # 1.24-1.31: mark file error log


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def frame_length(body_length: int, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """The frame a body of ``body_length`` bytes takes in a modern catalog."""
    return align(DESCRIPTOR_HEADER_LENGTH + body_length, alignment)


def encode_catalog_header(next_recording_id: int, alignment: int = DEFAULT_ALIGNMENT,
                          version: int = ARCHIVE_FILE_VERSION) -> bytes:
    return CATALOG_HEADER.pack(version, HEADER_LENGTH, next_recording_id, alignment)


def encode_frame(body: bytes, state: int, checksum: int, alignment: int = DEFAULT_ALIGNMENT) -> bytes:
    """A whole entry frame: descriptor header, body, zero padding to the alignment."""
    length = frame_length(len(body), alignment)
    return (DESCRIPTOR_HEADER.pack(length - DESCRIPTOR_HEADER_LENGTH, state, checksum) + body
            + bytes(length - DESCRIPTOR_HEADER_LENGTH - len(body)))


def is_old_layout(version: int, header_length_field: int) -> bool:
    """Whether a catalog header is the fixed 1 KiB slot layout (Aeron <= 1.31)."""
    return header_length_field == OLD_ENTRY_LENGTH and version >> 16 < ARCHIVE_FILE_MAJOR


def old_slot_offset(recording_id: int) -> int:
    return (recording_id + 1) * OLD_ENTRY_LENGTH
