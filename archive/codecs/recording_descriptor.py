"""The RecordingDescriptor: what the catalog stores and ListRecordings returns for one recording.

Field names follow Aeron's RecordingDescriptor (SBE template 22), snake_cased; JSON output of
the archive tool uses Aeron's camelCase names via ``to_aeron_dict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

NULL_POSITION = -1
NULL_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class RecordingDescriptor:
    recording_id: int
    start_timestamp: int
    stop_timestamp: int
    start_position: int
    stop_position: int  # NULL_POSITION (-1) while the recording is active
    initial_term_id: int
    segment_file_length: int
    term_buffer_length: int
    mtu_length: int
    session_id: int
    stream_id: int
    stripped_channel: str
    original_channel: str
    source_identity: str
    control_session_id: int = 0
    correlation_id: int = 0

    @property
    def is_active(self) -> bool:
        return self.stop_position == NULL_POSITION

    def with_changes(self, **changes) -> "RecordingDescriptor":
        return replace(self, **changes)

    def to_aeron_dict(self) -> dict:
        """Aeron's camelCase field names, in the SBE declaration order."""
        fields = asdict(self)
        order = [
            "control_session_id", "correlation_id", "recording_id", "start_timestamp",
            "stop_timestamp", "start_position", "stop_position", "initial_term_id",
            "segment_file_length", "term_buffer_length", "mtu_length", "session_id", "stream_id",
            "stripped_channel", "original_channel", "source_identity",
        ]
        return {_camel(name): fields[name] for name in order}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)
