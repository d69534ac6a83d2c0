"""Reading one SBE field out of every record of a payload buffer, and the Arrow array of its values.

The decoder (``decoder.py``) walks messages, groups and var data; this module does the work per
field: where the field sits in each record (``Places``: a fixed stride, or explicit offsets), its
bytes or scalars gathered in one numpy pass (or checked in one C pass, ``native_fields``), and
those values turned into Arrow (nulls, enums, sets, constants, var data).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aeron_spark.connector.sbe import native_fields
from aeron_spark.connector.sbe.arrow_types import UINT64_TYPE, primitive_arrow_type, type_arrow_type
from aeron_spark.connector.sbe.schema_model import EncodedType, EnumType, Field, Presence, Primitive, SetType


def payload_buffers(payloads: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(data uint8, the Arrow offsets (count + 1, int32 or int64), valid bool or None when no payload
    is null) of the payloads, without copying."""
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks() if payloads.num_chunks != 1 else payloads.chunk(0)
    if pa.types.is_binary(payloads.type) or pa.types.is_string(payloads.type):
        offset_type: np.dtype = np.dtype(np.int32)
    elif pa.types.is_large_binary(payloads.type) or pa.types.is_large_string(payloads.type):
        offset_type = np.dtype(np.int64)
    else:
        raise TypeError(f"SBE payloads must be binary, not {payloads.type}")
    count = len(payloads)
    _validity, offsets_buffer, data_buffer = payloads.buffers()
    if count == 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), None
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type, count=count + 1, offset=payloads.offset * offset_type.itemsize)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    valid = None if payloads.null_count == 0 else payloads.is_valid().to_numpy(zero_copy_only=False)
    return data, offsets, valid


def uniform_stride(positions: np.ndarray) -> int | None:
    """The fixed distance between consecutive positions, 0 for a single one, None when not fixed."""
    if positions.size < 2:
        return 0 if positions.size == 1 else None
    stride = int(positions[1] - positions[0])
    if stride <= 0 or int(positions[-1]) != int(positions[0]) + stride * (positions.size - 1):
        return None
    return stride if bool((np.diff(positions) == stride).all()) else None


@dataclass(frozen=True)
class Places:
    """The byte offset of one field in each record: ``first + i * stride`` when the records sit at
    a fixed stride (no per-record array is built), else ``explicit``."""

    count: int
    first: int = 0
    stride: int | None = None
    explicit: np.ndarray | None = None
    origin: tuple[int, int] | None = None  # explicit places: (id of the level's starts, offset from them)

    @classmethod
    def of(cls, positions: "Places | np.ndarray") -> "Places":
        if isinstance(positions, Places):
            return positions
        stride = uniform_stride(positions)
        if stride is not None:
            return cls(int(positions.size), int(positions[0]), stride)
        return cls(int(positions.size), explicit=positions)

    def shifted(self, delta: int) -> "Places":
        if self.explicit is not None:
            origin = None if self.origin is None else (self.origin[0], self.origin[1] + delta)
            return Places(self.count, explicit=self.explicit + delta, origin=origin)
        return Places(self.count, self.first + delta, self.stride)

    def key(self, dtype: np.dtype) -> tuple | None:
        """What identifies these places and a type among the values the C helper copied; None for
        explicit places of unknown origin (never copied)."""
        if self.explicit is None:
            return (self.count, self.first, self.stride, dtype.str)
        return None if self.origin is None else (self.count, "starts", self.origin, dtype.str)

    def array_key(self, dtype: np.dtype) -> tuple:
        """``key`` of places the C helper copies: at a fixed stride, or explicit with an origin."""
        key = self.key(dtype)
        if key is None:
            raise ValueError("explicit places without an origin have no key")
        return key

    @property
    def fixed_stride(self) -> int | None:
        """The stride when the places are ``first + i * stride``, None when they are explicit."""
        return self.stride if self.explicit is None else None

    def array(self) -> np.ndarray:
        if self.explicit is not None:
            return self.explicit
        return self.first + np.arange(self.count, dtype=np.int64) * (self.stride or 0)


def same_bytes_everywhere(data: np.ndarray, places: Places, width: int) -> bool:
    """Whether the ``width`` bytes at every place equal those at the first (one strided pass when
    the places are at a fixed stride and ``width`` is 1, 2, 4 or 8; otherwise not checked: False)."""
    stride = places.fixed_stride
    if places.count == 0 or stride is None or width not in (1, 2, 4, 8) or stride < width:
        return False
    native = native_fields.copier()
    if native is not None:  # stops at the first difference, no temporary array
        return native.same_bytes(data, places.first, stride, places.count, width)
    view = np.ndarray(shape=(places.count,), dtype=f"u{width}", buffer=data, offset=places.first,
                      strides=(max(stride, 1),))
    return bool((view == view[0]).all())


def scalars_at(data: np.ndarray, places: Places, dtype: np.dtype) -> np.ndarray:
    """data viewed as ``dtype`` at each place (native byte order copy)."""
    count = places.count
    if count == 0:
        return np.empty(0, dtype=dtype.newbyteorder("="))
    stride = places.fixed_stride
    if stride is not None and stride >= dtype.itemsize:
        # Blocks at a fixed stride: a strided (unaligned) view of the buffer, one field wide.
        view = np.ndarray(shape=(count,), dtype=dtype, buffer=data, offset=places.first, strides=(max(stride, 1),))
        return view.astype(dtype.newbyteorder("="))
    raw = bytes_at(data, places, dtype.itemsize)
    return raw.view(dtype).reshape(count).astype(dtype.newbyteorder("="), copy=False)


def bytes_at(data: np.ndarray, places: "Places | np.ndarray", width: int) -> np.ndarray:
    """(count, width) uint8: the bytes at each place (a copy)."""
    places = Places.of(places)
    count = places.count
    stride = places.fixed_stride
    if count and stride is not None and stride >= width:
        view = np.lib.stride_tricks.as_strided(data[places.first:], shape=(count, width), strides=(stride, 1))
        return np.ascontiguousarray(view)
    return data[places.array()[:, None] + np.arange(width, dtype=np.int64)]


def binary_array(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, nulls: np.ndarray) -> pa.Array:
    count = starts.size
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
        values = data[index]
    else:
        values = np.zeros(0, np.uint8)
    large = total >= (1 << 31) - 1
    offset_array = offsets if large else offsets.astype(np.int32)
    validity = None
    if nulls.any():
        validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    array = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), count,
                                  [validity, pa.py_buffer(offset_array), pa.py_buffer(values)])
    return array.cast(pa.binary()) if large else array


def is_null(values: np.ndarray, null_value: int | float | None) -> np.ndarray:
    if null_value is None:  # the schema model gives every optional scalar one (the spec's default)
        raise ValueError("an optional field without a null value")
    if isinstance(null_value, float) and null_value != null_value:
        return np.isnan(values)
    return values == values.dtype.type(null_value)


def to_arrow(values: np.ndarray, primitive: Primitive, nulls: np.ndarray | None) -> pa.Array:
    target = primitive_arrow_type(primitive)
    mask = nulls if nulls is not None and nulls.any() else None
    if target == UINT64_TYPE:
        return pa.array(values, type=pa.uint64(), mask=mask).cast(UINT64_TYPE)
    wanted = np.dtype(target.to_pandas_dtype())
    if mask is None or wanted.kind not in "iuf":
        return pa.array(values.astype(wanted, copy=False), type=target, mask=mask)
    # The validity bitmap packed by numpy: pa.array's mask conversion costs ~10x more (~0.9 ns a row).
    data = np.ascontiguousarray(values.astype(wanted, copy=False))
    validity = pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(target, data.size, [validity, pa.py_buffer(data)])


def enum_names(raw: np.ndarray, enum: EnumType, absent: np.ndarray) -> pa.Array:
    """Each raw value's validValue name; NULL for the null value and for values the schema lacks."""
    slot = enum_slots(raw, enum)
    missing = (slot < 0) | absent
    native = native_fields.copier()
    if native is not None:  # one pass in C rather than a string take (~9 ns a row)
        any_missing = bool(missing.any())
        offsets, characters = native.take_names(np.where(missing, -1, slot) if any_missing else slot,
                                                [name.encode() for name, _ in enum.values])
        validity = pa.py_buffer(np.packbits(~missing, bitorder="little")) if any_missing else None
        return pa.Array.from_buffers(pa.string(), slot.size, [validity, pa.py_buffer(offsets), pa.py_buffer(characters)])
    names = pa.array([name for name, _ in enum.values], type=pa.string())
    if not missing.any():
        return pc.take(names, pa.array(slot))
    return pc.take(names, pa.array(np.where(missing, 0, slot), mask=missing))


def enum_slots(raw: np.ndarray, enum: EnumType) -> np.ndarray:
    """Each raw value's index among the enum's validValues, -1 when it is none of them."""
    known = np.array([value for _, value in enum.values], dtype=np.int64)
    if raw.dtype.itemsize <= 2:
        # One lookup in a table indexed by the value's bits (uint8/char/uint16 encodings: the usual).
        unsigned = np.dtype(f"u{raw.dtype.itemsize}")
        bits = known.astype(raw.dtype).view(unsigned).astype(np.int64)
        table = np.full(1 << (8 * raw.dtype.itemsize), -1, dtype=np.int32)
        table[bits[::-1]] = np.arange(known.size, dtype=np.int32)[::-1]  # the first of duplicate values wins
        return table[raw.view(unsigned)]
    order = np.argsort(known, kind="stable")
    sorted_values = known[order]
    raw64 = raw.astype(np.int64)
    slot = np.clip(np.searchsorted(sorted_values, raw64), 0, len(known) - 1)
    return np.where(sorted_values[slot] == raw64, order[slot], -1).astype(np.int32)


def set_names(raw: np.ndarray, choices: SetType, absent: np.ndarray) -> pa.Array:
    """The names of the set's choices whose bits are set, in the schema's order."""
    bits = np.array([bit for _, bit in choices.choices], dtype=np.uint64)
    matrix = ((raw.astype(np.uint64)[:, None] >> bits[None, :]) & np.uint64(1)).astype(bool)
    matrix[absent] = False
    counts = matrix.sum(axis=1)
    offsets = np.zeros(raw.size + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    _rows, columns = np.nonzero(matrix)
    names = pc.take(pa.array([name for name, _ in choices.choices], type=pa.string()), pa.array(columns))
    return pa.ListArray.from_arrays(pa.array(offsets), names, type=type_arrow_type(choices),
                                    mask=pa.array(absent) if absent.any() else None)


def constant_value(field_type: EncodedType) -> int | float | str:
    text = field_type.constant or ""
    if field_type.is_string:
        return text
    if field_type.primitive.name in ("float", "double"):
        return float(text)
    return int(text, 0)


def constant_array(field: Field, arrow_type: pa.DataType, count: int) -> pa.Array:
    value: object
    if isinstance(field.type, EnumType):
        value = field.constant
    elif isinstance(field.type, EncodedType):
        value = constant_value(EncodedType(field.type.name, field.type.primitive, field.type.length,
                                           Presence.CONSTANT, None, field.constant))
    else:
        raise TypeError(f"constant field {field.name} of type {field.type!r}")
    return pa.array([value] * count, type=arrow_type)
