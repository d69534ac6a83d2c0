"""Aeron counters: ``Counter`` (allocated by this client, writable) and ``CountersReader`` (any
counter of the driver, by id).

Values are read through an ``int64_t *`` into the driver's counters file, cached per counter id,
so reading a value is one memory load (no scan, no C call). ``CountersReader.columns()`` gives
numpy views over every counter at once, for reading many counters with one gather.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ._capi import (
    COUNTER_KEY_OFFSET,
    COUNTER_MAX_KEY_LENGTH,
    COUNTER_MAX_LABEL_LENGTH,
    COUNTER_METADATA_LENGTH,
    COUNTER_REGISTRATION_ID_OFFSET,
    COUNTER_TYPE_ID_OFFSET,
    COUNTER_VALUE_LENGTH,
    ffi,
    lib,
)
from .errors import check, closed_error
from .pending_adds import PendingAdd

if TYPE_CHECKING:
    from .client import AeronClient

#: The reference id's offset in a counter's value record (value, registration id, owner id,
#: reference id: aeron_counter_value_descriptor_t), in int64 words.
COUNTER_REFERENCE_ID_OFFSET = 24
_REFERENCE_ID_WORD = COUNTER_REFERENCE_ID_OFFSET // 8


class CounterState(enum.IntEnum):
    """State of a counter's metadata record."""

    UNUSED = 0
    ALLOCATED = 1
    RECLAIMED = -1


class Counter:
    """A counter allocated through ``AeronClient.add_counter``; ``value`` is read/written in place."""

    def __init__(self, client: AeronClient, pointer: object) -> None:
        self._client = client
        self._pointer = pointer
        self._closed = False
        self._lock = threading.Lock()
        constants = ffi.new("aeron_counter_constants_t *")
        check(lib.aeron_counter_constants(pointer, constants), "aeron_counter_constants")
        self.counter_id: int = constants.counter_id
        self.registration_id: int = constants.registration_id
        self._address = lib.aeron_counter_addr(pointer)

    @property
    def value(self) -> int:
        if self._closed:
            raise closed_error(f"counter {self.counter_id}")
        return self._address[0]

    @value.setter
    def value(self, new_value: int) -> None:
        if self._closed:
            raise closed_error(f"counter {self.counter_id}")
        self._address[0] = new_value  # aligned 64-bit store: atomic on x86-64 and arm64

    def set_reference_id(self, reference_id: int) -> None:
        """Store the value record's reference id (what the counter is about, e.g. the registration
        id of a publication; Aeron's ``AeronCounters.setReferenceId``)."""
        if self._closed:
            raise closed_error(f"counter {self.counter_id}")
        self._address[_REFERENCE_ID_WORD] = reference_id

    @property
    def is_closed(self) -> bool:
        return self._closed or bool(lib.aeron_counter_is_closed(self._pointer))

    def close(self) -> None:
        """Free the counter in the driver (asynchronously); harmless when repeated."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            lib.aeron_counter_close(self._pointer, ffi.NULL, ffi.NULL)
            self._client._forget(self)

    def __enter__(self) -> Counter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Counter(counter_id={self.counter_id}, registration_id={self.registration_id})"


class PendingCounter(PendingAdd[Counter]):
    """A counter the media driver is still allocating (``AeronClient.async_add_counter``, the C
    client's ``aeron_async_add_counter``): ``poll()`` never blocks; ``discard()`` when unwanted."""

    def __init__(self, client: AeronClient, async_op: object, what: str, timeout: float) -> None:
        super().__init__(client, async_op, what, timeout, c_poll=lib.aeron_async_add_counter_poll,
                         out_type="aeron_counter_t **", wrap=Counter)


class CounterColumns:
    """Read-only numpy views over the client's mapping of the driver's counters, indexed by counter
    id: ``values``, ``registration_ids``, ``reference_ids`` (int64, one per 128-byte value record), ``states`` and
    ``type_ids`` (int32, one per 512-byte metadata record) and ``key_int64(offset)``.

    Each element is an aligned 8- or 4-byte word the driver or its owner stores with one
    instruction, so reading it through numpy is never torn on x86-64 or arm64 (the cffi loads in
    `CountersReader` are no stronger). The views alias memory the client unmaps when it closes:
    take them from `CountersReader.columns` for each use rather than keeping them.
    """

    def __init__(self, values: memoryview, metadata: memoryview) -> None:
        count = min(len(values) // COUNTER_VALUE_LENGTH, len(metadata) // COUNTER_METADATA_LENGTH)
        self.count = count
        self._values = values
        self._metadata = metadata
        self.values = self._column(values, 0, COUNTER_VALUE_LENGTH, np.int64)
        self.registration_ids = self._column(values, COUNTER_REGISTRATION_ID_OFFSET, COUNTER_VALUE_LENGTH, np.int64)
        self.reference_ids = self._column(values, COUNTER_REFERENCE_ID_OFFSET, COUNTER_VALUE_LENGTH, np.int64)
        self.states = self._column(metadata, 0, COUNTER_METADATA_LENGTH, np.int32)
        self.type_ids = self._column(metadata, COUNTER_TYPE_ID_OFFSET, COUNTER_METADATA_LENGTH, np.int32)
        self._keys: dict[int, np.ndarray] = {}

    def _column(self, buffer: memoryview, offset: int, stride: int, dtype: type) -> np.ndarray:
        column = np.ndarray(shape=(self.count,), dtype=np.dtype(dtype).newbyteorder("<"), buffer=buffer,
                            offset=offset, strides=(stride,))
        column.flags.writeable = False
        return column

    def key_int64(self, key_offset: int) -> np.ndarray:
        """The little-endian int64 at ``key_offset`` (a multiple of 8 below 112) of every key."""
        if key_offset % 8 or not 0 <= key_offset <= COUNTER_MAX_KEY_LENGTH - 8:
            raise ValueError(f"key offset {key_offset} is not a multiple of 8 in 0..{COUNTER_MAX_KEY_LENGTH - 8}")
        column = self._keys.get(key_offset)
        if column is None:
            column = self._keys[key_offset] = self._column(self._metadata, COUNTER_KEY_OFFSET + key_offset,
                                                           COUNTER_METADATA_LENGTH, np.int64)
        return column


class CountersReader:
    """Read-only view of every counter of the driver the client is connected to."""

    def __init__(self, client: AeronClient, pointer: object) -> None:
        self._client = client
        self._pointer = pointer
        self._addresses: dict[int, object] = {}
        self._int32 = ffi.new("int32_t *")
        self._int64 = ffi.new("int64_t *")
        self._key = ffi.new("uint8_t **")
        self._label = ffi.new("char[]", COUNTER_MAX_LABEL_LENGTH + 1)
        self._columns: CounterColumns | None = None

    def _live(self) -> object:
        if self._client.is_closed:
            raise closed_error("counters reader (its client)")
        return self._pointer

    @property
    def max_counter_id(self) -> int:
        return lib.aeron_counters_reader_max_counter_id(self._live())

    def columns(self) -> CounterColumns:
        """Numpy views over every counter (see `CounterColumns`); the client must be open."""
        pointer = self._live()
        if self._columns is None:  # the CnC file stays mapped, at one address, while the client is open
            buffers = ffi.new("aeron_counters_reader_buffers_t *")
            check(lib.aeron_counters_reader_get_buffers(pointer, buffers), "counters buffers")
            self._columns = CounterColumns(
                memoryview(ffi.buffer(buffers.values, buffers.values_length)),
                memoryview(ffi.buffer(buffers.metadata, buffers.metadata_length)))
        return self._columns

    def _check_id(self, counter_id: int) -> object:
        pointer = self._live()
        if not 0 <= counter_id <= lib.aeron_counters_reader_max_counter_id(pointer):
            raise ValueError(f"counter id {counter_id} is out of range: must be 0.."
                             f"{lib.aeron_counters_reader_max_counter_id(pointer)}")
        return pointer

    def value(self, counter_id: int) -> int:
        """The counter's current value: one load through a cached address."""
        address = self._addresses.get(counter_id)
        if address is None:
            address = lib.aeron_counters_reader_addr(self._check_id(counter_id), counter_id)
            self._addresses[counter_id] = address
        elif self._client.is_closed:
            raise closed_error("counters reader (its client)")
        return address[0]  # type: ignore[index]

    def state(self, counter_id: int) -> CounterState:
        check(lib.aeron_counters_reader_counter_state(self._check_id(counter_id), counter_id, self._int32),
              f"state of counter {counter_id}")
        return CounterState(self._int32[0])

    def type_id(self, counter_id: int) -> int:
        check(lib.aeron_counters_reader_counter_type_id(self._check_id(counter_id), counter_id, self._int32),
              f"type id of counter {counter_id}")
        return self._int32[0]

    def registration_id(self, counter_id: int) -> int:
        check(lib.aeron_counters_reader_counter_registration_id(self._check_id(counter_id), counter_id,
                                                                 self._int64),
              f"registration id of counter {counter_id}")
        return self._int64[0]

    def reference_id(self, counter_id: int) -> int:
        """The counter's reference id (0 unless its owner set one, see `Counter.set_reference_id`)."""
        self._check_id(counter_id)
        return int(self.columns().reference_ids[counter_id])

    def key(self, counter_id: int) -> bytes:
        """The whole 112-byte key area (Aeron stores no key length; unused bytes are zero)."""
        check(lib.aeron_counters_reader_metadata_key(self._check_id(counter_id), counter_id, self._key),
              f"key of counter {counter_id}")
        return bytes(ffi.buffer(self._key[0], COUNTER_MAX_KEY_LENGTH))

    def label(self, counter_id: int) -> str:
        length = check(lib.aeron_counters_reader_counter_label(self._check_id(counter_id), counter_id,
                                                               self._label, COUNTER_MAX_LABEL_LENGTH),
                       f"label of counter {counter_id}")
        return ffi.buffer(self._label, length)[:].decode("utf-8", "replace")

    def find(self, type_id: int, key_predicate: Callable[[bytes], bool] | None = None) -> list[int]:
        """Ids of ALLOCATED counters of ``type_id`` whose key satisfies ``key_predicate``.

        Scans metadata like Aeron's clients do: stops at the first UNUSED record.
        """
        pointer = self._live()
        found = []
        for counter_id in range(lib.aeron_counters_reader_max_counter_id(pointer) + 1):
            check(lib.aeron_counters_reader_counter_state(pointer, counter_id, self._int32), "counter state")
            state = self._int32[0]
            if state == CounterState.UNUSED:
                break
            if state != CounterState.ALLOCATED:
                continue
            check(lib.aeron_counters_reader_counter_type_id(pointer, counter_id, self._int32), "type id")
            if self._int32[0] != type_id:
                continue
            if key_predicate is None or key_predicate(self.key(counter_id)):
                found.append(counter_id)
        return found

    def find_by_type_id_and_key_prefix(self, type_id: int, prefix: bytes) -> int | None:
        """The first ALLOCATED counter of ``type_id`` whose key starts with ``prefix``."""
        if len(prefix) > COUNTER_MAX_KEY_LENGTH:
            raise ValueError(f"key prefix of {len(prefix)} bytes is longer than the "
                             f"{COUNTER_MAX_KEY_LENGTH}-byte counter key")
        matches = self.find(type_id, lambda key: key.startswith(prefix))
        return matches[0] if matches else None
