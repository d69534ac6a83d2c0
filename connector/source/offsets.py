"""The source's offset: one Aeron stream position per recording.

Spark stores an offset as the ``json.dumps`` of the dict the source returns and gives it back
through ``json.loads``, so recording ids are *string* keys on the wire (``{"7": 4096}``) and ints
in memory. A recording id missing from an offset is a recording the query has not met yet
(a newly discovered recording of a channel subscription); it is read from its start position.

Every position in an offset is a frame boundary of its recording (a rec-pos or stop position, a
term boundary, a resolved start position or a user-given one), because replays can only start
on a frame. It need not be a message boundary: see partition_reader for how a message cut by a
batch end is still delivered exactly once.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from aeron_spark.connector.options import INT64_MAX

# Kafka-style per-recording markers accepted in startingPositions / endingPositions JSON.
EARLIEST = -2
LATEST = -1


class OffsetFormatError(ValueError):
    """An offset (from Spark's log or from an option) is not a valid {recordingId: position}."""


@dataclass(frozen=True)
class RecordingPositions(Mapping[int, int]):
    """Immutable mapping recordingId -> position, sorted by recording id.

    Built once per trigger over every recording the query reads, so the common steps cost
    C-level copies rather than Python work per recording: `updated` with positions of known
    recordings keeps the order without sorting again, and the offset dict for Spark is made once
    and then patched by `updated` (`to_offset` hands out that one dict: do not change it).
    """

    positions: dict[int, int] = field(default_factory=dict)
    _offset: dict[str, int] | None = field(default=None, init=False, repr=False, compare=False, hash=False)
    # (weak reference to the positions `updated` made this from, the entries it changed)
    _derived: tuple[weakref.ref, dict[int, int]] | None = field(default=None, init=False, repr=False,
                                                                 compare=False, hash=False)

    def __post_init__(self) -> None:
        ordered = dict(sorted(self.positions.items()))
        object.__setattr__(self, "positions", ordered)

    @classmethod
    def _ordered(cls, positions: dict[int, int], offset: dict[str, int] | None = None) -> "RecordingPositions":
        """One of ``positions``, already sorted by recording id (with its offset dict, if known)."""
        made = object.__new__(cls)
        object.__setattr__(made, "positions", positions)
        object.__setattr__(made, "_offset", offset)
        object.__setattr__(made, "_derived", None)
        return made

    def __getitem__(self, recording_id: int) -> int:
        return self.positions[recording_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self.positions)

    def __len__(self) -> int:
        return len(self.positions)

    def __contains__(self, recording_id: object) -> bool:
        return recording_id in self.positions

    def get(self, recording_id: int, default=None):
        return self.positions.get(recording_id, default)

    def updated(self, changes: Mapping[int, int]) -> "RecordingPositions":
        positions = self.positions
        changed = {recording_id: position for recording_id, position in changes.items()
                   if positions.get(recording_id) != position}
        if not changed:
            return self
        if not all(recording_id in positions for recording_id in changed):
            made = RecordingPositions({**positions, **changed})  # a new recording: sorted again
        else:
            merged = dict(positions)
            merged.update(changed)
            offset = None
            if self._offset is not None:
                offset = dict(self._offset)
                offset.update({str(recording_id): position for recording_id, position in changed.items()})
            made = RecordingPositions._ordered(merged, offset)
        # weak: a chain of strong references would keep every trigger's positions alive
        object.__setattr__(made, "_derived", (weakref.ref(self), changed))
        return made

    def without(self, recording_ids: set[int]) -> "RecordingPositions":
        if not any(recording_id in self.positions for recording_id in recording_ids):
            return self
        return RecordingPositions._ordered({k: v for k, v in self.positions.items() if k not in recording_ids})

    def changed_since(self, earlier: "RecordingPositions") -> "RecordingPositions":
        """The recordings whose position differs from ``earlier``'s, or that ``earlier`` lacks."""
        if self._derived is not None and self._derived[0]() is earlier:  # made by earlier.updated()
            return RecordingPositions(self._derived[1])
        moved = self.positions.items() - earlier.positions.items()  # set difference in C
        if len(moved) == len(self.positions):
            return self
        return RecordingPositions(dict(moved))

    def to_offset(self) -> dict[str, int]:
        """The dict handed to Spark (string keys, ints); one dict per instance, not to be changed."""
        if self._offset is None:
            object.__setattr__(self, "_offset", {str(recording_id): position
                                                 for recording_id, position in self.positions.items()})
        return self._offset  # type: ignore[return-value]

    def to_json(self) -> str:
        return json.dumps(self.to_offset())

    @classmethod
    def from_offset(cls, offset: Mapping[str, object], what: str = "offset") -> "RecordingPositions":
        """Parse Spark's offset dict (or a parsed option), validating every entry."""
        if not isinstance(offset, Mapping):
            raise OffsetFormatError(
                f"{what} must be a JSON object {{\"<recordingId>\": <position>}}, got {offset!r}")
        positions: dict[int, int] = {}
        for key, value in offset.items():
            recording_id = _parse_recording_id(key, what)
            positions[recording_id] = _parse_position(value, recording_id, what, markers_allowed=False)
        return cls(positions)

    @classmethod
    def from_json(cls, text: str, what: str = "offset") -> "RecordingPositions":
        return cls.from_offset(_load_json_object(text, what), what)


def parse_position_spec(text: str, what: str) -> dict[int, int]:
    """A JSON {recordingId: position} where a position may also be -2 (earliest) or -1 (latest)."""
    raw = _load_json_object(text, what)
    return {
        (recording_id := _parse_recording_id(key, what)):
            _parse_position(value, recording_id, what, markers_allowed=True)
        for key, value in raw.items()
    }


def is_frame_aligned(position: int) -> bool:
    # Imported here: the options parser (every Spark Python worker) imports this module, and the
    # Aeron binding's import costs ~0.1-0.2 s that a planning worker never needs.
    from aeron_spark.driver_integration.frame import FRAME_ALIGNMENT
    return position % FRAME_ALIGNMENT == 0


def _load_json_object(text: str, what: str) -> dict:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise OffsetFormatError(
            f"{what} is not valid JSON ({error.msg} at char {error.pos}): {text!r}; "
            "expected {\"<recordingId>\": <position>, ...}") from None
    if not isinstance(raw, dict):
        raise OffsetFormatError(
            f"{what} must be a JSON object {{\"<recordingId>\": <position>}}, got {text!r}")
    return raw


def _parse_recording_id(key: object, what: str) -> int:
    try:
        recording_id = int(str(key), 10)
    except ValueError:
        raise OffsetFormatError(
            f"{what}: key {key!r} is not a recording id (a non-negative integer)") from None
    if not 0 <= recording_id <= INT64_MAX:  # an int64 in every request
        raise OffsetFormatError(f"{what}: recording id {recording_id} is out of range: must be >= 0 and <= {INT64_MAX}")
    return recording_id


def _parse_position(value: object, recording_id: int, what: str, *, markers_allowed: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OffsetFormatError(
            f"{what}: position of recording {recording_id} must be an integer, got {value!r}")
    if markers_allowed and value in (EARLIEST, LATEST):
        return value
    if value < 0:
        accepted = "a position >= 0, -2 (earliest) or -1 (latest)" if markers_allowed else "a position >= 0"
        raise OffsetFormatError(f"{what}: position {value} of recording {recording_id} is not {accepted}")
    if value > INT64_MAX:
        raise OffsetFormatError(f"{what}: position {value} of recording {recording_id} is out of range; "
                                f"accepted: at most {INT64_MAX}")
    if not is_frame_aligned(value):
        from aeron_spark.driver_integration.frame import FRAME_ALIGNMENT
        raise OffsetFormatError(
            f"{what}: position {value} of recording {recording_id} is not a frame boundary "
            f"(positions are multiples of {FRAME_ALIGNMENT})")
    return value
