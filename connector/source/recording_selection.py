"""Which recordings a subscribing source reads, and finding new ones incrementally (Kafka's
``subscribe`` / ``subscribePattern``).

A ``RecordingSelection`` is ``channel`` (a fragment of the original channel, Aeron's
ListRecordingsForUri rule) or ``channelPattern`` (a Python regex, ``re.search`` over the
original channel), with ``streamId``: one or several stream ids (None: any, with a pattern only).

``RecordingDiscovery`` lists only what is new since its last listing, so no listing grows with
recordings it has already seen:

* ``channel``: one ListRecordingsForUri per stream id, each from its own cursor: where the
  archive's scan ended (the relevantId of the RECORDING_UNKNOWN that ends a listing, which every
  archive from 1.15.1 on sends; at least one past the newest recording returned). So each
  discovery makes the archive scan only recordings created since the last one, not every
  recording after the stream's newest. The archive filters, so only matches
  cross the wire. Cursors are per stream id because a shared one could skip a recording of one
  stream that started while another stream was being listed. With several stream ids, one
  ListRecordings of one record from the lowest cursor first asks whether any recording is new
  (``has_recording_from``); if none is, the listings per stream id are skipped, so a discovery that
  finds nothing costs one request, not one per stream id.
* ``channelPattern``: the archive cannot match a regex, so one ListRecordings from one past the
  newest recording seen, of any channel, filtered here. After the first listing only recordings
  created since cross the wire, matching or not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the options parser (every Spark worker) imports this module
    from aeron_spark.archive.client import RecordingDescriptor


class ListingAccess(Protocol):
    """What discovery lists with (a part of ``source.archive_access.ArchiveAccess``)."""

    def list_matching_since(self, channel_fragment: str, stream_id: int,
                            from_recording_id: int) -> tuple[list[RecordingDescriptor], int]:
        """The recordings ``ArchiveAccess.list_matching`` returns, and the id the next listing
        starts at: past the last match, or further, where the archive's scan ended."""
        ...

    def has_recording_from(self, from_recording_id: int) -> bool:
        """Whether any recording has an id >= ``from_recording_id``."""
        ...

    def list_from(self, from_recording_id: int) -> list[RecordingDescriptor]:
        ...


@dataclass(frozen=True)
class RecordingSelection:
    channel: str | None = None
    channel_pattern: str | None = None
    stream_ids: tuple[int, ...] | None = None  # None: any stream id (channelPattern only)

    def __post_init__(self) -> None:
        if (self.channel is None) == (self.channel_pattern is None):
            raise ValueError("a RecordingSelection has exactly one of channel and channel_pattern")
        if self.channel is not None and not self.stream_ids:
            raise ValueError("a channel selection needs stream ids")
        if self.channel_pattern is not None:
            re.compile(self.channel_pattern)  # a bad pattern fails here; re caches the compiled one

    def matches(self, descriptor: RecordingDescriptor) -> bool:
        if self.stream_ids is not None and descriptor.stream_id not in self.stream_ids:
            return False
        if self.channel_pattern is not None:
            return re.search(self.channel_pattern, descriptor.original_channel) is not None
        channel = self.channel
        assert channel is not None  # __post_init__: exactly one of channel and channel_pattern
        # As the archive's ListRecordingsForUri: a fragment of the original or the stripped channel.
        return channel in descriptor.original_channel or channel in descriptor.stripped_channel

    def describe(self) -> str:
        """For error messages, in the options' own terms."""
        what = (f"channel={self.channel!r}" if self.channel is not None
                else f"channelPattern={self.channel_pattern!r}")
        return f"{what} streamId={_stream_ids_text(self.stream_ids)}"


def _stream_ids_text(stream_ids: tuple[int, ...] | None) -> str:
    if stream_ids is None:
        return "any"
    return str(stream_ids[0]) if len(stream_ids) == 1 else json.dumps(list(stream_ids))


class RecordingDiscovery:
    """New recordings of a selection, listed incrementally (see the module docstring)."""

    def __init__(self, selection: RecordingSelection) -> None:
        self.selection = selection
        # channel: the next id to list per stream id (a channel selection has stream ids);
        # channelPattern: the next id of the one scan of every recording.
        self._cursors: dict[int, int] = {stream_id: 0 for stream_id in selection.stream_ids or ()} \
            if selection.channel is not None else {}
        self._scan_cursor = 0

    def discover(self, access: ListingAccess) -> list[RecordingDescriptor]:
        """Matching recordings not returned by an earlier call, in recording id order."""
        found: list[RecordingDescriptor] = []
        channel = self.selection.channel
        if channel is not None:
            if len(self._cursors) > 1 and not access.has_recording_from(min(self._cursors.values())):
                return []  # one request says no stream has a new recording: skip one listing per stream
            for stream_id, cursor in self._cursors.items():
                listed, scanned_to = access.list_matching_since(channel, stream_id, cursor)
                self._cursors[stream_id] = max(scanned_to, _next_cursor(cursor, listed))
                found.extend(listed)
        else:
            listed = access.list_from(self._scan_cursor)
            self._scan_cursor = _next_cursor(self._scan_cursor, listed)
            found.extend(d for d in listed if self.selection.matches(d))
        return sorted(found, key=lambda d: d.recording_id)


def _next_cursor(cursor: int, listed: Iterable[RecordingDescriptor]) -> int:
    return max([cursor, *(d.recording_id + 1 for d in listed)])
