"""The SBE decoder's optional C helper (fixed_fields.c): many fixed-width fields of records at a fixed
stride (or at given starts) copied into contiguous columns in one pass over the records.

The package's build compiles it (setup.py, an optional extension). When it is missing, stale or
switched off with ``AERON_SPARK_SBE_NATIVE=0``, ``copier()`` returns None and the decoder reads each
field with numpy instead (the same values, a few ns a row more per field); a build that cannot be
loaded is logged once at debug level.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import pyarrow as pa

LOG = logging.getLogger(__name__)
SWITCH = "AERON_SPARK_SBE_NATIVE"  # "0" forces the numpy path (tests run both)
INTERFACE_VERSION = 4  # fixed_fields.c's INTERFACE_VERSION this module calls
NOT_BUILT = ("the SBE C helper is not built: `pip install -e .` (tools/ensure-venv) builds "
             "connector/sbe/fixed_fields.c with the machine's C compiler (cc)")


def _load() -> ModuleType | None:
    try:
        _fixed_fields = importlib.import_module("aeron_spark.connector.sbe._fixed_fields")
    except ImportError as error:
        LOG.debug("SBE C helper not loaded (%s): decoding fixed fields with numpy", error)
        return None
    if getattr(_fixed_fields, "INTERFACE_VERSION", None) != INTERFACE_VERSION:
        LOG.debug("SBE C helper %s is a stale build (interface %s, not %s): decoding fixed fields with numpy",
                  getattr(_fixed_fields, "__file__", "?"), getattr(_fixed_fields, "INTERFACE_VERSION", None), INTERFACE_VERSION)
        return None
    return _fixed_fields


_MODULE = _load()


def built() -> bool:
    """Whether the C helper is built and loadable (whatever the switch says)."""
    return _MODULE is not None


def copier() -> "NativeFields | None":
    """The C helper, or None when it is not built or ``AERON_SPARK_SBE_NATIVE=0`` (read on each call,
    so a test can switch it)."""
    if _MODULE is None or os.environ.get(SWITCH, "1").strip() == "0":
        return None
    return _COPIER


class NativeFields:
    """The C helper's calls, with numpy arrays in and out."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def copy(self, data: np.ndarray, first: int, stride: int, count: int, fields: Sequence[tuple[int, np.dtype]],
             starts: np.ndarray | None = None, expect: tuple[int, bytes] | None = None) -> list[np.ndarray] | None:
        """One native-order array per (offset, dtype) field: the field of record i, which starts at
        ``first + i * stride`` (or ``starts[i]`` when given). The dtypes' byte order must be one for
        all fields; values are swapped to the host's when it differs. ``expect``: (offset from each
        record's start, bytes) every record must hold, checked in the same pass: None when one does
        not. Raises ValueError when any byte would be read outside ``data``."""
        outputs = [_arrow_pool_array(count, dtype.newbyteorder("=")) for _, dtype in fields]
        orders = {_is_big(dtype) for _, dtype in fields if dtype.itemsize > 1}
        if len(orders) > 1:
            raise ValueError("the fields mix byte orders")
        swap = bool(orders) and orders.pop() != (sys.byteorder == "big")
        if starts is not None:
            starts = np.ascontiguousarray(starts, dtype=np.int64)
        specs = [(offset, out.itemsize, out) for (offset, _), out in zip(fields, outputs)]
        if expect is None:
            self._module.copy_fields(data, first, stride, count, starts, specs, swap)
        elif not self._module.copy_fields(data, first, stride, count, starts, specs, swap, expect[1], expect[0]):
            return None
        return outputs

    def same_bytes(self, data: np.ndarray, first: int, stride: int, count: int, width: int) -> bool:
        """Whether the ``width`` bytes at ``first + i * stride`` are alike for every i < count."""
        return self._module.same_bytes(data, first, stride, count, width)

    def offsets_layout(self, offsets: np.ndarray) -> tuple[int, int | None]:
        """(the shortest value's length, the fixed stride at which the values start or None) of an
        Arrow binary array's ``count + 1`` int32 or int64 offsets; one pass, no temporary arrays."""
        shortest, stride = self._module.offsets_layout(offsets, offsets.size - 1)
        return shortest, (None if stride < 0 else stride)

    def take_names(self, slots: np.ndarray, names: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(int32 offsets, uint8 characters) of the Arrow string column holding ``names[slot]`` per
        slot, an empty string where the slot is negative."""
        width = max(8, -(-max((len(name) for name in names), default=0) // 8) * 8)
        padded = b"".join(name.ljust(width, b"\0") for name in names)
        lengths = np.array([len(name) for name in names], dtype=np.int32)
        offsets = _arrow_pool_array(slots.size + 1, np.dtype(np.int32))
        # Each name is written as whole words of its padded width: room for the names plus that slack.
        characters = _arrow_pool_array(slots.size * int(lengths.max(initial=0)) + width, np.dtype(np.uint8))
        written = self._module.take_names(np.ascontiguousarray(slots, dtype=np.int32), lengths, padded, width,
                                     offsets, characters)
        return offsets, characters[:written]


def _arrow_pool_array(count: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialized array in Arrow's memory pool: it keeps freed memory mapped, where a fresh
    numpy array of a batch's size is a fresh mmap whose first touch costs a page fault per 4 KiB
    (measured: ~25 ns a row for a Tick's columns, more than the copy itself)."""
    return np.frombuffer(pa.allocate_buffer(count * dtype.itemsize), dtype=dtype)


def _is_big(dtype: np.dtype) -> bool:
    return dtype.byteorder == ">" or (dtype.byteorder in "=|" and sys.byteorder == "big")


_COPIER = NativeFields(_MODULE) if _MODULE is not None else None
