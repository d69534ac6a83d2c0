"""Durable, write-once store of a stream's resolved starting positions, used only when the
``checkpointLocation`` option is given to the source (it was required before the start travelled
in Spark's own offset log: first_batch_start.py). Kept so that a query which sets it resumes as it
did, from a file its checkpoint may already hold.

Why a store at all: Spark does not journal the start of batch 0 and calls ``initialOffset()`` again
(twice per run, and again after a restart before batch 0 committed). "latest" or "earliest"
resolved at call time would give a different batch 0 each time. The file is

    <checkpointLocation>/aeron-archive-source/initial-positions-<key>.json

``key`` hashes what the source reads (recordingIds or channel + streamId, and
startingPositions), so several aeron-archive sources of one query do not collide. Living inside
the query's checkpoint, the file shares its lifetime: deleting the checkpoint to start afresh also
forgets the resolved positions. The first resolution wins; later calls read the file.

Local paths and ``file:`` URIs are written with write-to-temp, fsync, rename; other URIs (s3:,
hdfs:, gs:, ...) go through ``pyarrow.fs``, whose single-object writes are atomic.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING
from datetime import datetime, timezone

from aeron_spark.connector.source.offsets import RecordingPositions

if TYPE_CHECKING:  # imported when a remote URI is used: local checkpoints never load pyarrow.fs
    from pyarrow import fs as pafs

FORMAT_VERSION = 1
SUBDIRECTORY = "aeron-archive-source"


class InitialOffsetStoreError(RuntimeError):
    pass


class InitialOffsetStore:
    def __init__(self, location: str, source_identity: str) -> None:
        self.location = location
        self.source_identity = source_identity
        key = hashlib.sha256(source_identity.encode()).hexdigest()[:16]
        self.file_name = f"initial-positions-{key}.json"

    def get_or_create(self, resolve: Callable[[], RecordingPositions]) -> RecordingPositions:
        existing = self.read()
        if existing is not None:
            return existing
        positions = resolve()
        document = {
            "version": FORMAT_VERSION,
            "source": json.loads(self.source_identity),
            "resolvedAt": datetime.now(timezone.utc).isoformat(),
            "positions": positions.to_offset(),
        }
        self._write(json.dumps(document, indent=1, sort_keys=True).encode())
        return positions

    def read(self) -> RecordingPositions | None:
        raw = self._read()
        if raw is None:
            return None
        where = self.describe()
        try:
            document = json.loads(raw)
            if document.get("version") != FORMAT_VERSION:
                raise InitialOffsetStoreError(
                    f"{where}: unsupported format version {document.get('version')!r} (expected {FORMAT_VERSION})")
            if document.get("source") != json.loads(self.source_identity):
                raise InitialOffsetStoreError(
                    f"{where} belongs to source {document.get('source')}, not {self.source_identity}")
            return RecordingPositions.from_offset(document["positions"], where)
        except (ValueError, KeyError, TypeError) as error:
            raise InitialOffsetStoreError(f"{where} is corrupt ({error}); delete it only together with the "
                                          "query's checkpoint") from None

    def describe(self) -> str:
        return f"initial positions file {self.location.rstrip('/')}/{SUBDIRECTORY}/{self.file_name}"

    # --- storage ---

    def _local_directory(self) -> str | None:
        location = self.location
        if location.startswith("file://"):
            return location[len("file://"):]
        if location.startswith("file:"):
            return location[len("file:"):]
        if "://" in location:
            return None
        return os.path.abspath(location)

    def _read(self) -> bytes | None:
        directory = self._local_directory()
        if directory is not None:
            path = os.path.join(directory, SUBDIRECTORY, self.file_name)
            try:
                with open(path, "rb") as handle:
                    return handle.read()
            except FileNotFoundError:
                return None
        filesystem, path = self._remote()
        from pyarrow import fs as pafs
        if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with filesystem.open_input_stream(path) as stream:
            return stream.read()

    def _write(self, content: bytes) -> None:
        directory = self._local_directory()
        if directory is None:
            filesystem, path = self._remote()
            filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
            with filesystem.open_output_stream(path) as stream:
                stream.write(content)
            return
        target_directory = os.path.join(directory, SUBDIRECTORY)
        os.makedirs(target_directory, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=".tmp-", dir=target_directory)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, os.path.join(target_directory, self.file_name))
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
        directory_handle = os.open(target_directory, os.O_RDONLY)
        try:
            os.fsync(directory_handle)
        finally:
            os.close(directory_handle)

    def _remote(self) -> tuple["pafs.FileSystem", str]:
        from pyarrow import fs as pafs
        try:
            filesystem, root = pafs.FileSystem.from_uri(self.location)
        except Exception as error:  # pyarrow raises ArrowInvalid / OSError variants
            raise InitialOffsetStoreError(
                f"checkpointLocation {self.location!r} cannot be opened ({error}); accepted: a local path, "
                "file:, s3:, gs:, hdfs: or abfs: URI") from None
        return filesystem, f"{root.rstrip('/')}/{SUBDIRECTORY}/{self.file_name}"
