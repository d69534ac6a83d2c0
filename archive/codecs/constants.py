"""Identity, versions, null conventions and enums of the archive control protocol (SBE schema 101).

Values are restated from the Aeron sources (see docs/protocol.md). Enum-typed message fields
decode to the enum member when the value is known and to the plain ``int`` otherwise, so an
unexpected value on the wire never stops a decode.
"""

from __future__ import annotations

from enum import IntEnum

from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, NULL_TIMESTAMP

SCHEMA_ID = 101

#: The schema version our encoder writes by default: the layout of Aeron 1.49.0 - 1.52.2.
#: It is the newest version that still has ConnectRequest (2), which our server also accepts.
SCHEMA_VERSION = 13
#: The newest schema version whose layouts this package knows (1.53.0-SNAPSHOT, no ConnectRequest).
MAX_KNOWN_SCHEMA_VERSION = 14
#: Aeron 1.15.x: no version fields, one-byte SourceLocation.
LEGACY_SCHEMA_VERSION = 0
#: Up to this schema version (Aeron <= 1.21) SourceLocation and BooleanType were uint8 enums.
LAST_NARROW_ENUM_SCHEMA_VERSION = 2

NULL_VALUE = -1
NULL_LENGTH = -1
#: version_t is an optional int32 whose null value is 0 (1.15.x sends no version at all).
NULL_VERSION = 0
REPLAY_ALL_AND_FOLLOW = -1
REPLAY_ALL_AND_STOP = -2

__all__ = [
    "SCHEMA_ID", "SCHEMA_VERSION", "MAX_KNOWN_SCHEMA_VERSION", "LEGACY_SCHEMA_VERSION",
    "LAST_NARROW_ENUM_SCHEMA_VERSION", "NULL_VALUE", "NULL_POSITION", "NULL_LENGTH",
    "NULL_TIMESTAMP", "NULL_VERSION", "REPLAY_ALL_AND_FOLLOW", "REPLAY_ALL_AND_STOP",
    "PROTOCOL_MAJOR_VERSION", "PROTOCOL_MINOR_VERSION", "PROTOCOL_PATCH_VERSION",
    "PROTOCOL_SEMANTIC_VERSION", "semantic_version", "semantic_version_parts",
    "format_semantic_version", "ControlResponseCode", "SourceLocation", "BooleanType",
    "RecordingSignal", "ArchiveErrorCode", "TemplateId",
]


def semantic_version(major: int, minor: int, patch: int) -> int:
    """Aeron's SemanticVersion.compose: ``(major << 16) | (minor << 8) | patch``, each 0..255."""
    for part_name, part in (("major", major), ("minor", minor), ("patch", patch)):
        if not 0 <= part <= 255:
            raise ValueError(f"semantic version {part_name}={part} is outside 0..255")
    return (major << 16) | (minor << 8) | patch


def semantic_version_parts(version: int) -> tuple[int, int, int]:
    """(major, minor, patch) of an encoded semantic version."""
    return (version >> 16) & 0xFF, (version >> 8) & 0xFF, version & 0xFF


def format_semantic_version(version: int) -> str:
    """``"1.12.0"`` for 68608, as Aeron prints it in "invalid client version" errors."""
    return "%d.%d.%d" % semantic_version_parts(version)


PROTOCOL_MAJOR_VERSION = 1
PROTOCOL_MINOR_VERSION = 12
PROTOCOL_PATCH_VERSION = 0
#: What our archive reports in ControlResponse.version and what our client sends when connecting.
PROTOCOL_SEMANTIC_VERSION = semantic_version(
    PROTOCOL_MAJOR_VERSION, PROTOCOL_MINOR_VERSION, PROTOCOL_PATCH_VERSION)


class ControlResponseCode(IntEnum):
    OK = 0
    ERROR = 1
    RECORDING_UNKNOWN = 2
    SUBSCRIPTION_UNKNOWN = 3  # not in 1.15.x


class SourceLocation(IntEnum):
    LOCAL = 0
    REMOTE = 1


class BooleanType(IntEnum):
    FALSE = 0
    TRUE = 1


class RecordingSignal(IntEnum):
    START = 0
    STOP = 1
    EXTEND = 2
    REPLICATE = 3
    MERGE = 4
    SYNC = 5
    DELETE = 6
    REPLICATE_END = 7


class ArchiveErrorCode(IntEnum):
    """``ControlResponse.relevantId`` when the code is ERROR (the C client adds 200)."""

    GENERIC = 0
    ACTIVE_LISTING = 1
    ACTIVE_RECORDING = 2
    ACTIVE_SUBSCRIPTION = 3
    UNKNOWN_SUBSCRIPTION = 4
    UNKNOWN_RECORDING = 5
    UNKNOWN_REPLAY = 6
    MAX_REPLAYS = 7
    MAX_RECORDINGS = 8
    INVALID_EXTENSION = 9
    AUTHENTICATION_REJECTED = 10
    STORAGE_SPACE = 11
    UNKNOWN_REPLICATION = 12
    UNAUTHORISED_ACTION = 13
    REPLICATION_CONNECTION_FAILURE = 14
    EMPTY_RECORDING = 15
    INVALID_POSITION = 16


class TemplateId(IntEnum):
    """Every wire template of schema 101 (catalog-only templates 20 and 21 are not wire messages)."""

    CONTROL_RESPONSE = 1
    CONNECT_REQUEST = 2
    CLOSE_SESSION_REQUEST = 3
    START_RECORDING_REQUEST = 4
    STOP_RECORDING_REQUEST = 5
    REPLAY_REQUEST = 6
    STOP_REPLAY_REQUEST = 7
    LIST_RECORDINGS_REQUEST = 8
    LIST_RECORDINGS_FOR_URI_REQUEST = 9
    LIST_RECORDING_REQUEST = 10
    EXTEND_RECORDING_REQUEST = 11
    RECORDING_POSITION_REQUEST = 12
    TRUNCATE_RECORDING_REQUEST = 13
    STOP_RECORDING_SUBSCRIPTION_REQUEST = 14
    STOP_POSITION_REQUEST = 15
    FIND_LAST_MATCHING_RECORDING_REQUEST = 16
    LIST_RECORDING_SUBSCRIPTIONS_REQUEST = 17
    BOUNDED_REPLAY_REQUEST = 18
    STOP_ALL_REPLAYS_REQUEST = 19
    RECORDING_DESCRIPTOR = 22
    RECORDING_SUBSCRIPTION_DESCRIPTOR = 23
    RECORDING_SIGNAL_EVENT = 24
    REPLICATE_REQUEST = 50
    STOP_REPLICATION_REQUEST = 51
    START_POSITION_REQUEST = 52
    DETACH_SEGMENTS_REQUEST = 53
    DELETE_DETACHED_SEGMENTS_REQUEST = 54
    PURGE_SEGMENTS_REQUEST = 55
    ATTACH_SEGMENTS_REQUEST = 56
    MIGRATE_SEGMENTS_REQUEST = 57
    AUTH_CONNECT_REQUEST = 58
    CHALLENGE = 59
    CHALLENGE_RESPONSE = 60
    KEEP_ALIVE_REQUEST = 61
    TAGGED_REPLICATE_REQUEST = 62
    START_RECORDING_REQUEST2 = 63
    EXTEND_RECORDING_REQUEST2 = 64
    STOP_RECORDING_BY_IDENTITY_REQUEST = 65
    REPLICATE_REQUEST2 = 66
    MAX_RECORDED_POSITION_REQUEST = 67
    ARCHIVE_ID_REQUEST = 68
    RECORDING_STARTED = 101
    RECORDING_PROGRESS = 102
    RECORDING_STOPPED = 103
    PURGE_RECORDING_REQUEST = 104
    REPLAY_TOKEN_REQUEST = 105
    PING = 106
    UPDATE_CHANNEL_REQUEST = 107
