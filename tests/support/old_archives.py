"""Archive directories as older Aeron versions (and older versions of this project) left them:
fixed 1 KiB slot catalogs (file version 0, 1.0.0, 2.0.0, 2.1.0) for reading and migrate tests."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

V0 = 0
V1_0 = 1 << 16
V2_0 = 2 << 16
V2_1 = (2 << 16) | (1 << 8)


def old_descriptor(recording_id: int, **overrides: Any) -> RecordingDescriptor:
    fields: dict[str, Any] = dict(recording_id=recording_id, start_timestamp=1_700_000_000_000 + recording_id,
                  stop_timestamp=1_700_000_000_500, start_position=0, stop_position=0,
                  initial_term_id=7, segment_file_length=128 * 1024, term_buffer_length=64 * 1024,
                  mtu_length=1408, session_id=-12, stream_id=1001,
                  stripped_channel="aeron:udp?endpoint=localhost:40123",
                  original_channel="aeron:udp?endpoint=localhost:40123|term-length=64k",
                  source_identity="127.0.0.1:5555", control_session_id=0, correlation_id=0)
    fields.update(overrides)
    return RecordingDescriptor(**fields)


def write_old_catalog(directory: Path, version: int, entries: list[tuple[RecordingDescriptor, bool]],
                      max_entries: int = 16) -> Path:
    """A 1 KiB slot ``archive.catalog``: header ``{version, 1024}``, recording N at (N+1)*1024."""
    data = bytearray((max_entries + 1) * 1024)
    struct.pack_into("<ii", data, 0, version, 1024)
    for descriptor, valid in entries:
        body = descriptor_body.encode_descriptor_body(descriptor)
        at = (descriptor.recording_id + 1) * 1024
        struct.pack_into("<ib", data, at, len(body), 1 if valid else 0)
        data[at + 32:at + 32 + len(body)] = body
    path = directory / "archive.catalog"
    path.write_bytes(bytes(data))
    return path
