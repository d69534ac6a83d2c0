"""The ``rec-pos`` counter (type id 100): the live recorded position of one active recording.

The archive allocates one per recording session (start or extend) through its Aeron client and
closes it when the recording stops; its value is the recorded position. Key layout (modern
Aeron's RecordingPos), little-endian::

    0        recordingId:i64
    8        sessionId:i32               the recorded Image's session id
    12       sourceIdentityLength:i32
    16       sourceIdentity ASCII        truncated to MAX_KEY_LENGTH(112) - 16 - 8 = 88 bytes
    16+len   archiveId:i64               unaligned

Label: ``"rec-pos: <recordingId> <sessionId> <streamId> <strippedChannel> - archiveId=<id>"``,
the channel cut so the whole label fits 380 bytes.

Clients find the counter by recording id or by session id (the publisher's session id); the
archive id is compared only when the caller passes one (not ``NULL_ARCHIVE_ID``), like Aeron's
``RecordingPos.findCounterIdBy*``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

from aeron_spark.archive.codecs.counter_layout import (  # NULL_COUNTER_ID: re-exported for clients
    MAX_LABEL_LENGTH, NULL_COUNTER_ID, RECORD_ALLOCATED, CounterAllocator, WritableCounter,  # noqa: F401
    archive_id_label_suffix, first_counter_id)

RECORDING_POSITION_TYPE_ID = 100
NAME = "rec-pos"
MAX_KEY_LENGTH = 112
RECORDING_ID_OFFSET = 0
SESSION_ID_OFFSET = 8
SOURCE_IDENTITY_LENGTH_OFFSET = 12
SOURCE_IDENTITY_OFFSET = 16
MAX_SOURCE_IDENTITY_LENGTH = MAX_KEY_LENGTH - SOURCE_IDENTITY_OFFSET - 8  # 88
NULL_ARCHIVE_ID = -1
NULL_RECORDING_ID = -1

_HEAD = struct.Struct("<qii")
_I64 = struct.Struct("<q")


class CountersView(Protocol):
    """What the lookups need of driver_integration's ``CountersReader``."""

    def value(self, counter_id: int) -> int: ...
    def type_id(self, counter_id: int) -> int: ...
    def key(self, counter_id: int) -> bytes: ...
    def state(self, counter_id: int) -> int: ...
    def find(self, type_id: int, key_predicate) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class RecordingPositionKey:
    recording_id: int
    session_id: int
    source_identity: str
    archive_id: int | None  # None: a 1.15.1-style key without the archive id


def encode_key(recording_id: int, session_id: int, source_identity: str, archive_id: int) -> bytes:
    identity = source_identity.encode("ascii", "replace")[:MAX_SOURCE_IDENTITY_LENGTH]
    return _HEAD.pack(recording_id, session_id, len(identity)) + identity + _I64.pack(archive_id)


def decode_key(key: bytes | bytearray | memoryview) -> RecordingPositionKey:
    key = bytes(key)
    if len(key) < SOURCE_IDENTITY_OFFSET:
        raise ValueError(f"rec-pos key of {len(key)} bytes is shorter than its "
                         f"{SOURCE_IDENTITY_OFFSET}-byte fixed part")
    recording_id, session_id, identity_length = _HEAD.unpack_from(key, 0)
    end = SOURCE_IDENTITY_OFFSET + identity_length
    if identity_length < 0 or end > len(key):
        raise ValueError(f"rec-pos key source identity length {identity_length} does not fit "
                         f"the {len(key)}-byte key")
    identity = key[SOURCE_IDENTITY_OFFSET:end].decode("ascii", "replace")
    archive_id = _I64.unpack_from(key, end)[0] if end + 8 <= len(key) else None
    return RecordingPositionKey(recording_id, session_id, identity, archive_id)


def label(recording_id: int, session_id: int, stream_id: int, stripped_channel: str,
          archive_id: int) -> str:
    head = f"{NAME}: {recording_id} {session_id} {stream_id} "
    suffix = archive_id_label_suffix(archive_id)
    room = max(0, MAX_LABEL_LENGTH - len(head) - len(suffix))
    return head + stripped_channel[:room] + suffix


def allocate(client: CounterAllocator, *, archive_id: int, recording_id: int, session_id: int,
             stream_id: int, stripped_channel: str, source_identity: str) -> WritableCounter:
    """A new rec-pos counter for a recording (the caller sets its value to the start position)."""
    return client.add_counter(
        RECORDING_POSITION_TYPE_ID,
        encode_key(recording_id, session_id, source_identity, archive_id),
        label(recording_id, session_id, stream_id, stripped_channel, archive_id))


def _matches_archive(key: RecordingPositionKey, archive_id: int) -> bool:
    return archive_id == NULL_ARCHIVE_ID or key.archive_id == archive_id


def _safe_decode(key) -> RecordingPositionKey | None:
    try:
        return decode_key(key)
    except ValueError:
        return None


def find_counter_id_by_recording(reader: CountersView, recording_id: int,
                                 archive_id: int = NULL_ARCHIVE_ID) -> int:
    """Counter id of the live rec-pos counter of ``recording_id``, else NULL_COUNTER_ID (-1)."""
    def wanted(key) -> bool:
        decoded = _safe_decode(key)
        return decoded is not None and decoded.recording_id == recording_id and \
            _matches_archive(decoded, archive_id)
    found = reader.find(RECORDING_POSITION_TYPE_ID, wanted)
    return first_counter_id(found)


def find_counter_id_by_session(reader: CountersView, session_id: int,
                               archive_id: int = NULL_ARCHIVE_ID) -> int:
    """Counter id of the live rec-pos counter recording session ``session_id``, else -1."""
    def wanted(key) -> bool:
        decoded = _safe_decode(key)
        return decoded is not None and decoded.session_id == session_id and \
            _matches_archive(decoded, archive_id)
    found = reader.find(RECORDING_POSITION_TYPE_ID, wanted)
    return first_counter_id(found)


def _is_live_rec_pos(reader: CountersView, counter_id: int) -> bool:
    return (counter_id >= 0 and reader.state(counter_id) == RECORD_ALLOCATED
            and reader.type_id(counter_id) == RECORDING_POSITION_TYPE_ID)


def get_recording_id(reader: CountersView, counter_id: int) -> int:
    """Recording id in the key of a live rec-pos counter, else NULL_RECORDING_ID."""
    if not _is_live_rec_pos(reader, counter_id):
        return NULL_RECORDING_ID
    decoded = _safe_decode(reader.key(counter_id))
    return NULL_RECORDING_ID if decoded is None else decoded.recording_id


def get_source_identity(reader: CountersView, counter_id: int) -> str | None:
    if not _is_live_rec_pos(reader, counter_id):
        return None
    decoded = _safe_decode(reader.key(counter_id))
    return None if decoded is None else decoded.source_identity


def is_active(reader: CountersView, counter_id: int, recording_id: int) -> bool:
    """True while ``counter_id`` is the live rec-pos counter of ``recording_id``."""
    return get_recording_id(reader, counter_id) == recording_id != NULL_RECORDING_ID


def recorded_position(reader: CountersView, counter_id: int) -> int:
    """Current value (recorded position) of a rec-pos counter."""
    return reader.value(counter_id)
