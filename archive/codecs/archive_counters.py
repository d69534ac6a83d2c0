"""The archive's own counters besides rec-pos and the I/O counters: type ids, keys and labels.

Aeron 1.51's archive allocates these through its Aeron client (``Archive.Context.conclude``,
``ArchiveCounters``, ``ControlSessionCounter``); the type ids are ``AeronCounters``':

====  ====================================  ===============================================================
type  counts                                label (then ``" - archiveId=<id>"``; 101 then the version info)
====  ====================================  ===============================================================
101   errors the archive's handler recorded ``Archive Errors``
102   control sessions open now             ``Archive Control Sessions``
103   longest duty cycle, ns (per agent)    ``archive-conductor max cycle time in ns: DEDICATED``
104   duty cycles over the threshold        ``archive-conductor work cycle time exceeded count: threshold=100ms DEDICATED``
111   recording sessions now                ``Archive Recording Sessions``
112   replay sessions now                   ``Archive Replay Sessions``
113   one per control session               ``control-session: <clientInfo> sourceIdentity=<s> sessionId=<n>``
====  ====================================  ===============================================================

Every key is ``archiveId:i64`` (8 bytes, little-endian) except 113's, ``archiveId:i64,
controlSessionId:i64``. 103/104 exist for the conductor always and for the recorder and the
replayer in DEDICATED threading only (in SHARED one thread runs all three, and the conductor's
cycle covers them). Free of I/O: the service allocates them (``archive.service.archive_counters``),
tools and tests read them.
"""

from __future__ import annotations

import struct

from aeron_spark.archive.codecs.archive_io_counters import ARCHIVE_IO_COUNTER_TYPE_IDS, archive_id_key
from aeron_spark.archive.codecs.counter_layout import (
    MAX_LABEL_LENGTH,
    NULL_COUNTER_ID,
    CounterLookup,
    archive_id_label_suffix,
    first_counter_id,
)

ARCHIVE_ERROR_COUNT_TYPE_ID = 101
ARCHIVE_CONTROL_SESSIONS_TYPE_ID = 102
ARCHIVE_MAX_CYCLE_TIME_TYPE_ID = 103
ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID = 104
ARCHIVE_RECORDING_SESSION_COUNT_TYPE_ID = 111
ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID = 112
ARCHIVE_CONTROL_SESSION_TYPE_ID = 113

#: Every type id an archive allocates besides rec-pos (100): 101-113.
ARCHIVE_COUNTER_TYPE_IDS: tuple[int, ...] = tuple(sorted({
    ARCHIVE_ERROR_COUNT_TYPE_ID, ARCHIVE_CONTROL_SESSIONS_TYPE_ID, ARCHIVE_MAX_CYCLE_TIME_TYPE_ID,
    ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, *ARCHIVE_IO_COUNTER_TYPE_IDS,
    ARCHIVE_RECORDING_SESSION_COUNT_TYPE_ID, ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID,
    ARCHIVE_CONTROL_SESSION_TYPE_ID}))

ERROR_COUNTER_NAME = "Archive Errors"
#: The names of the archive-wide session counts (the label before the archive-id suffix).
SESSION_COUNT_NAMES: dict[int, str] = {
    ARCHIVE_CONTROL_SESSIONS_TYPE_ID: "Archive Control Sessions",
    ARCHIVE_RECORDING_SESSION_COUNT_TYPE_ID: "Archive Recording Sessions",
    ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID: "Archive Replay Sessions",
}
CONTROL_SESSION_COUNTER_NAME = "control-session"

#: The agents whose duty cycles are tracked, by their role names (the labels' first word).
CYCLE_TRACKED_ROLES = ("archive-conductor", "archive-recorder", "archive-replayer")
#: Aeron's ArchiveThreadingMode names our modes take in labels (INVOKER has no counterpart here).
THREADING_MODE_NAMES = {"dedicated": "DEDICATED", "shared": "SHARED"}

_CONTROL_SESSION_KEY = struct.Struct("<qq")
CONTROL_SESSION_KEY_LENGTH = _CONTROL_SESSION_KEY.size
#: Key offsets of 113's fields (Aeron's ControlSessionCounter constants).
ARCHIVE_ID_KEY_OFFSET = 0
CONTROL_SESSION_ID_KEY_OFFSET = 8

# Longest unit first: Agrona's SystemUtil.formatDuration picks the largest unit dividing exactly.
_DURATION_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us"))


def format_duration(duration_ns: int) -> str:
    """A duration as Aeron labels show it: ``100ms``, ``1500us``, ``2s``, ``1234ns``."""
    if duration_ns != 0:
        for unit_ns, suffix in _DURATION_UNITS:
            if duration_ns % unit_ns == 0:
                return f"{duration_ns // unit_ns}{suffix}"
    return f"{duration_ns}ns"


def threading_mode_name(threading_mode: str) -> str:
    try:
        return THREADING_MODE_NAMES[threading_mode.lower()]
    except KeyError:
        raise ValueError(f"unknown threading mode {threading_mode!r}: expected one of "
                         f"{', '.join(THREADING_MODE_NAMES)}") from None


def _ascii(text: str) -> str:
    """Aeron writes labels with putStringWithoutLengthAscii: a character outside ASCII becomes '?'."""
    return text.encode("ascii", "replace").decode("ascii")


def _fit(name: str, suffix: str) -> str:
    """``name + suffix`` within the label limit: the name is cut, the archive-id suffix kept."""
    return _ascii(name)[:max(0, MAX_LABEL_LENGTH - len(suffix))] + suffix


def error_counter_label(archive_id: int, version: str, commit: str) -> str:
    """101: ``Archive Errors - archiveId=<id> version=<version> commit=<commit>`` (Aeron appends the
    version info after the archive id, as AeronCounters.appendVersionInfo)."""
    return _fit(ERROR_COUNTER_NAME + archive_id_label_suffix(archive_id), f" version={version} commit={commit}")


def session_count_label(type_id: int, archive_id: int) -> str:
    """102, 111 or 112: the count's name then the archive-id suffix."""
    try:
        name = SESSION_COUNT_NAMES[type_id]
    except KeyError:
        raise ValueError(f"counter type {type_id} is not an archive session count: accepted types are "
                         f"{sorted(SESSION_COUNT_NAMES)}") from None
    return name + archive_id_label_suffix(archive_id)


def _role(role: str) -> str:
    if role not in CYCLE_TRACKED_ROLES:
        raise ValueError(f"unknown archive agent {role!r}: expected one of {', '.join(CYCLE_TRACKED_ROLES)}")
    return role


def max_cycle_time_label(role: str, threading_mode: str, archive_id: int) -> str:
    """103: ``<role> max cycle time in ns: <MODE> - archiveId=<id>``."""
    return (f"{_role(role)} max cycle time in ns: {threading_mode_name(threading_mode)}"
            + archive_id_label_suffix(archive_id))


def cycle_threshold_exceeded_label(role: str, threshold_ns: int, threading_mode: str, archive_id: int) -> str:
    """104: ``<role> work cycle time exceeded count: threshold=<duration> <MODE> - archiveId=<id>``."""
    return (f"{_role(role)} work cycle time exceeded count: threshold={format_duration(threshold_ns)} "
            f"{threading_mode_name(threading_mode)}" + archive_id_label_suffix(archive_id))


def control_session_key(archive_id: int, control_session_id: int) -> bytes:
    """113's 16-byte key: archiveId then controlSessionId."""
    return _CONTROL_SESSION_KEY.pack(archive_id, control_session_id)


def decode_control_session_key(key: bytes) -> tuple[int, int]:
    """(archiveId, controlSessionId) from a 113 key (at least 16 bytes)."""
    if len(key) < CONTROL_SESSION_KEY_LENGTH:
        raise ValueError(f"a control-session counter key has {CONTROL_SESSION_KEY_LENGTH} bytes, got {len(key)}")
    archive_id, control_session_id = _CONTROL_SESSION_KEY.unpack_from(key)
    return archive_id, control_session_id


def control_session_label(archive_id: int, client_info: str, source_identity: str, image_session_id: int) -> str:
    """113: ``control-session: [<clientInfo> ]sourceIdentity=<s> sessionId=<n> - archiveId=<id>``
    (the request Image's source identity and session id, after the connect's clientInfo if any)."""
    image_info = f"sourceIdentity={source_identity} sessionId={image_session_id}"
    described = f"{client_info} {image_info}" if client_info else image_info
    return _fit(f"{CONTROL_SESSION_COUNTER_NAME}: {described}", archive_id_label_suffix(archive_id))


def find_control_session_counter(reader: CounterLookup, archive_id: int, control_session_id: int) -> int:
    """Id of the live 113 counter of that archive and control session, else NULL_COUNTER_ID."""
    wanted = control_session_key(archive_id, control_session_id)
    return first_counter_id(reader.find(ARCHIVE_CONTROL_SESSION_TYPE_ID,
                                        lambda key: bytes(key[:CONTROL_SESSION_KEY_LENGTH]) == wanted))


def find_archive_wide_counters(reader: CounterLookup, type_id: int, archive_id: int) -> list[int]:
    """Ids of every live counter of ``type_id`` keyed by ``archive_id`` (103/104 have three each)."""
    wanted = archive_id_key(archive_id)
    return list(reader.find(type_id, lambda key: bytes(key[:8]) == wanted))


__all__ = [
    "ARCHIVE_CONTROL_SESSIONS_TYPE_ID", "ARCHIVE_CONTROL_SESSION_TYPE_ID", "ARCHIVE_COUNTER_TYPE_IDS",
    "ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID", "ARCHIVE_ERROR_COUNT_TYPE_ID", "ARCHIVE_MAX_CYCLE_TIME_TYPE_ID",
    "ARCHIVE_RECORDING_SESSION_COUNT_TYPE_ID", "ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID", "CYCLE_TRACKED_ROLES",
    "NULL_COUNTER_ID", "control_session_key", "control_session_label", "cycle_threshold_exceeded_label",
    "decode_control_session_key", "error_counter_label", "find_archive_wide_counters",
    "find_control_session_counter", "format_duration", "max_cycle_time_label", "session_count_label",
    "threading_mode_name",
]
