"""Archive directories with many recordings for bench/scaling.py, written straight to disk.

Recording 10,000 streams through the control protocol would take longer than the rest of the
benchmark, so the catalog and segment files are written directly, in each archive's own format:

* ours: by our own ``storage.catalog.Catalog`` (catalog 3.1.0, variable-length entries);
* the Java 1.15.1 archive: the same descriptor bodies in 1 KiB slots with the header version 0,
  the only layout 1.15.1 opens (its ``Catalog`` throws "catalog file version … does not match
  software:0" otherwise). Segment file names (``<id>-0.rec`` for a recording starting at position
  0: base position and segment index are both 0) are the same in both layouts.

Every recording has one segment file holding a few frames (as a real archive has at least one
file per recording). Most are stopped; the last ``active`` ones are left active (stop position -1),
as a crash leaves them: starting an archive on such a directory recovers each from its segment file.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.archive.storage.catalog import CATALOG_FILE_NAME, Catalog

TERM_LENGTH = 64 * 1024
SEGMENT_LENGTH = 64 * 1024
MTU = 1408
STREAM_COUNT = 100  # background recordings cycle over this many stream ids / endpoints
BACKGROUND_STREAM_BASE = 1000
EARLY_STREAM_ID = 777  # a few recordings at the start of the catalog only (the discovery case)
EARLY_CHANNEL = "aeron:ipc?alias=early"
EARLY_RECORDINGS = 5
NEEDLE_STREAM_ID = 999  # one recording just before the active tail (a match near the end)
NEEDLE_CHANNEL = "aeron:udp?endpoint=localhost:29999|alias=needle"
FRAMES_PER_RECORDING = 10
_FRAME_HEADER = struct.Struct("<iBBHiiiiq")  # frameLength, version, flags, type, termOffset, session, stream, term, reserved
_PAYLOAD_LENGTH = 32
RECORDED_BYTES = FRAMES_PER_RECORDING * (_FRAME_HEADER.size + _PAYLOAD_LENGTH)


@dataclass(frozen=True)
class CatalogShape:
    recordings: int
    active: int

    @property
    def needle_id(self) -> int:
        return self.recordings - self.active - 1


def background_channel(recording_id: int) -> str:
    return f"aeron:udp?endpoint=localhost:{20000 + recording_id % STREAM_COUNT}"


def build_our_archive_dir(directory: Path, shape: CatalogShape) -> None:
    """A fresh directory with ``shape.recordings`` catalog entries, the last ``shape.active`` active."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with Catalog.open(directory) as catalog:
        for recording_id in range(shape.recordings):
            active = recording_id >= shape.recordings - shape.active
            if recording_id < EARLY_RECORDINGS:
                stream_id, channel = EARLY_STREAM_ID, EARLY_CHANNEL
            elif recording_id == shape.needle_id:
                stream_id, channel = NEEDLE_STREAM_ID, NEEDLE_CHANNEL
            else:
                stream_id = BACKGROUND_STREAM_BASE + recording_id % STREAM_COUNT
                channel = background_channel(recording_id)
            session_id = 100_000 + recording_id
            added = catalog.add_recording(
                start_position=0, initial_term_id=0, segment_file_length=SEGMENT_LENGTH,
                term_buffer_length=TERM_LENGTH, mtu_length=MTU, session_id=session_id, stream_id=stream_id,
                stripped_channel=channel.split("|")[0], original_channel=channel, source_identity="bench",
                start_timestamp=1_700_000_000_000 + recording_id,
                stop_timestamp=-1 if active else 1_700_000_000_000 + recording_id,
                stop_position=NULL_POSITION if active else RECORDED_BYTES)
            assert added == recording_id
            _write_segment(directory / f"{recording_id}-0.rec", session_id, stream_id)


def _write_segment(path: Path, session_id: int, stream_id: int) -> None:
    frame_length = _FRAME_HEADER.size + _PAYLOAD_LENGTH
    frames = bytearray()
    for index in range(FRAMES_PER_RECORDING):
        frames += _FRAME_HEADER.pack(frame_length, 0, 0xC0, 1, index * frame_length, session_id, stream_id, 0, 0)
        frames += bytes(_PAYLOAD_LENGTH)
    with open(path, "wb") as segment:
        segment.write(frames)
        segment.truncate(SEGMENT_LENGTH)  # a preallocated segment, as both archives leave one


def copy_as_java_1_15_archive_dir(ours: Path, java: Path) -> None:
    """The same recordings in the layout the Java 1.15.1 archive opens (catalog version 0)."""
    shutil.rmtree(java, ignore_errors=True)
    java.mkdir(parents=True)
    for entry in os.scandir(ours):
        if entry.name.endswith(".rec"):
            shutil.copyfile(entry.path, java / entry.name)
    with Catalog.open(ours, read_only=True) as catalog:
        entries = list(catalog.entries())
    slots = max(8192, len(entries))  # 1.15.1's default max entries
    with open(java / CATALOG_FILE_NAME, "wb") as old:
        old.truncate((slots + 1) * layout.OLD_ENTRY_LENGTH)
        old.write(layout.OLD_HEADER.pack(layout.OLD_VERSION_0, layout.OLD_ENTRY_LENGTH))
        for entry in entries:
            body = descriptor_body.encode_descriptor_body(entry.descriptor)
            old.seek(layout.old_slot_offset(entry.descriptor.recording_id))
            old.write(layout.OLD_DESCRIPTOR_HEADER.pack(len(body), 1 if entry.valid else 0))
            old.seek(layout.old_slot_offset(entry.descriptor.recording_id) + layout.DESCRIPTOR_HEADER_LENGTH)
            old.write(body)


def fresh_copy(template: Path, destination: Path) -> Path:
    """A copy to start an archive on: starting one repairs and rewrites its directory."""
    shutil.rmtree(destination, ignore_errors=True)
    shutil.copytree(template, destination)
    return destination
