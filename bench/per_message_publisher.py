"""A message-by-message publisher for the fair recording benchmark (our archive, IPC).

A user's application offers one message at a time; so does the Java 1.15.1 bench client. Our bench
client does the same through ``bench/c/per_message_offer.c``: a loop in C calling Aeron's
``aeron_exclusive_publication_offer`` once per message, with the Java client's payload and
back-pressure handling (retry after ``sched_yield``). It is C because a Python loop makes only
~1-3 M offers/s, which would measure Python rather than the archive.

The C file is built here, with ``cc`` (``$CC``), into ``.cache/bench/`` at the repository root (a
file named by the source's hash, so an edit rebuilds it and concurrent builds do not clash) and
loaded with cffi's ABI mode: no Python headers or Aeron headers are needed, the offer function's
address comes from the pyaeron library this process already loaded. Without a compiler (or with
``AERON_SPARK_BENCH_OFFER_LOOP=python``) the same loop runs in Python; ``implementation`` says
which one ran, and the benchmark prints it next to its figures.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import cffi
from aeron_spark.driver_integration import _capi
from aeron_spark.driver_integration.publication import ExclusivePublication, OfferResult

SOURCE = Path(__file__).resolve().parent / "c" / "per_message_offer.c"
CACHE_DIR = Path(__file__).resolve().parents[1] / ".cache" / "bench"
IMPLEMENTATION_ENV = "AERON_SPARK_BENCH_OFFER_LOOP"  # "c" (default, falls back to python) | "python"
PUBLISH_TIMED_OUT = -100  # bench/c/per_message_offer.c

_CDEF = """
typedef int64_t (*offer_function_t)(void *publication, const uint8_t *buffer, size_t length,
                                    void *reserved_value_supplier, void *clientd);
int64_t offer_messages(offer_function_t offer, void *publication, uint8_t *payload, size_t size,
                       int64_t first_index, int64_t count, int64_t deadline_ns,
                       int64_t *offered, int64_t *back_pressured, int64_t *back_pressured_ns);
"""

_ffi = cffi.FFI()
_ffi.cdef(_CDEF)


class OfferLoopUnavailable(RuntimeError):
    """The C loop could not be built (no compiler, or it failed); the text says why."""


def build_offer_loop(cache_dir: Path = CACHE_DIR, source: Path = SOURCE) -> Path:
    """Compiles the C loop into ``cache_dir`` unless a build of this exact source is there."""
    code = source.read_bytes()
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OfferLoopUnavailable("no C compiler (cc, gcc or $CC) on PATH")
    target = cache_dir / f"per_message_offer-{hashlib.sha256(code).hexdigest()[:16]}.so"
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Build under a temporary name and rename: another benchmark may build the same file meanwhile.
    handle, partial = tempfile.mkstemp(prefix=target.stem + "-", suffix=".so.partial", dir=cache_dir)
    os.close(handle)
    try:
        completed = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", partial, str(source)],
                                   capture_output=True, text=True, check=False, timeout=120)
        if completed.returncode != 0:
            raise OfferLoopUnavailable(f"{compiler} failed ({completed.returncode}): {completed.stderr.strip()[-2000:]}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


@functools.cache
def _offer_loop_library() -> object:
    return _ffi.dlopen(str(build_offer_loop()))


def _address(pointer: object) -> int:
    return int(_capi.ffi.cast("uintptr_t", pointer))


class PerMessagePublisher:
    """Offers unfragmented messages one by one on an exclusive publication.

    ``implementation`` is ``"c"`` (the compiled loop) or ``"python"`` (the fallback, when the loop
    cannot be built or ``AERON_SPARK_BENCH_OFFER_LOOP=python``); ``fallback_reason`` says why.
    ``back_pressured`` counts refused offers, as the Java client's ``backPressuredOffers``;
    ``back_pressured_seconds`` is the time spent retrying them (the archive holding the publisher back).
    """

    def __init__(self, publication: ExclusivePublication, size: int, *, implementation: str | None = None) -> None:
        if not 0 <= size <= publication.max_payload_length:
            raise ValueError(f"size {size} is invalid: unfragmented messages need 0..{publication.max_payload_length}")
        requested = implementation or os.environ.get(IMPLEMENTATION_ENV, "c")
        if requested not in ("c", "python"):
            raise ValueError(f"offer loop {requested!r} is invalid: 'c' or 'python'")
        self.publication = publication
        self.size = size
        self.back_pressured = 0
        self.back_pressured_seconds = 0.0
        self.fallback_reason: str | None = None
        self._library: object | None = None
        if requested == "c":
            try:
                self._library = _offer_loop_library()
            except (OfferLoopUnavailable, OSError) as error:
                self.fallback_reason = str(error)
        else:
            self.fallback_reason = f"{IMPLEMENTATION_ENV}=python"
        self.implementation = "c" if self._library is not None else "python"
        # Byte j of every payload is j * 7, as the Java client's; bytes 0..7 carry the message index.
        self._pattern = bytes((j * 7) & 0xFF for j in range(size))

    def publish(self, messages: int, deadline: float) -> None:
        """Offers ``messages`` messages; ``deadline`` (time.monotonic) bounds a back-pressured wait."""
        if self._library is not None:
            self._publish_in_c(messages, deadline)
        else:
            self._publish_in_python(messages, deadline)

    def _publish_in_c(self, messages: int, deadline: float) -> None:
        payload = _ffi.new("uint8_t[]", max(1, self.size))
        _ffi.memmove(payload, self._pattern, self.size)
        offered, refused, refused_ns = _ffi.new("int64_t *"), _ffi.new("int64_t *"), _ffi.new("int64_t *")
        offer = _ffi.cast("offer_function_t", _address(_capi.function_pointer("aeron_exclusive_publication_offer")))
        publication = _ffi.cast("void *", _address(self.publication._live()))
        deadline_ns = time.monotonic_ns() + max(0, int((deadline - time.monotonic()) * 1e9))
        status = self._library.offer_messages(offer, publication, payload, self.size, 0, messages,  # type: ignore[attr-defined]
                                              deadline_ns, offered, refused, refused_ns)
        self.back_pressured += refused[0]
        self.back_pressured_seconds += refused_ns[0] / 1e9
        if status == PUBLISH_TIMED_OUT:
            raise TimeoutError(f"publisher back-pressured until the deadline at message {offered[0]}")
        if status != 0:
            raise RuntimeError(f"offer of message {offered[0]} failed: {OfferResult(status).name}")

    def _publish_in_python(self, messages: int, deadline: float) -> None:
        publication = self.publication
        payload = bytearray(self._pattern)
        index_field = struct.Struct("<q")
        stamp = self.size >= 8
        for index in range(messages):
            if stamp:
                index_field.pack_into(payload, 0, index)
            refused_since = 0.0
            while (result := publication.offer(payload)) < 0:
                if not OfferResult(result).is_retryable:
                    raise RuntimeError(f"offer of message {index} failed: {OfferResult(result).name}")
                refused_since = refused_since or time.perf_counter()
                self.back_pressured += 1
                if self.back_pressured & 0xFFFF == 0 and time.monotonic() > deadline:
                    raise TimeoutError(f"publisher back-pressured until the deadline at message {index}")
                os.sched_yield()
            if refused_since:
                self.back_pressured_seconds += time.perf_counter() - refused_since
