/*
 * The SBE decoder's one native step: copy fixed-width fields of records laid out in a byte buffer
 * into one contiguous column per field, in one pass over the records.
 *
 * numpy reads each field through its own strided view: one pass over every record per field, each a
 * few ns a row. Here the records are taken a tile at a time (a tile fits in L1), and every field is
 * copied out of the tile before the next one, so each record's cache lines come from memory once.
 *
 * A minimal CPython extension (buffer protocol only, no numpy headers) rather than cffi: setuptools
 * builds it as an optional Extension in both editable and wheel installs with nothing else at build
 * time, and the SBE package stays free of cffi (an import contract keeps it sans-IO).
 *
 *   copy_fields(data, first, stride, count, starts, fields, swap[, expect, expect_offset]) -> bool
 *
 * data    any buffer of bytes (read only)
 * first, stride, count
 *         record i starts at first + i * stride (when starts is None)
 * starts  None, or a buffer of count int64 record starts (then first and stride are ignored)
 * fields  a sequence of (offset, width, out): the field's offset in each record, its width in bytes
 *         and a writable buffer of at least count * width bytes receiving record i's bytes at i * width
 * swap    reverse the bytes of every value (a big-endian schema on a little-endian host); only for
 *         widths 1, 2, 4 and 8
 * expect, expect_offset
 *         bytes every record must hold at expect_offset from its start (may be negative: the message
 *         header before a root block), checked in the same pass; False as soon as a record does not
 *         (the outputs are then incomplete), else True
 *
 * Every byte read is checked to lie inside data before anything is copied (ValueError otherwise).
 *
 *   same_bytes(data, first, stride, count, width) -> bool
 *
 * Whether the width bytes at first + i * stride are alike for every i < count (one message header
 * repeated: one template and version in the batch); it stops at the first difference.
 *
 *   offsets_layout(offsets, count) -> (shortest, stride)
 *
 * For the count + 1 int32 or int64 offsets of an Arrow binary array: the shortest value's length
 * (every payload holds a header when it is at least the header's size) and the fixed stride at which
 * the values start (all but the last of equal positive length), or -1; one pass, no temporaries.
 *
 *   take_names(slots, name_lengths, padded_names, width, out_offsets, out_bytes) -> int
 *
 * An Arrow string column of names chosen by index (an enum's validValue names): slots holds count
 * int32 indices into the names (negative: an empty string, the caller marks it NULL), name i is the
 * first name_lengths[i] bytes of padded_names[i * width : (i + 1) * width] (width a multiple of 8);
 * out_offsets (count + 1 int32) and out_bytes (room for the names plus width bytes of slack) receive
 * the column's offsets and characters; returns the number of characters written.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <limits.h>

#define INTERFACE_VERSION 4  /* native_fields.py refuses a build of another interface (a stale build) */
#define TILE_RECORDS 256     /* 256 records of 64 B: 16 KiB, well inside L1 */

typedef struct {
    Py_ssize_t offset;
    Py_ssize_t width;
    Py_buffer out;
} FieldSpec;

static inline uint16_t swapped16(uint16_t v) { return (uint16_t)((v >> 8) | (v << 8)); }
static inline uint32_t swapped32(uint32_t v) { return __builtin_bswap32(v); }
static inline uint64_t swapped64(uint64_t v) { return __builtin_bswap64(v); }

/* Copies one field of the records [begin, end) whose starts are given by base(i). */
#define COPY_LOOP(WIDTH_T, CONVERT)                                                       \
    do {                                                                                  \
        WIDTH_T *target = (WIDTH_T *)out;                                                 \
        for (Py_ssize_t i = begin; i < end; i++) {                                        \
            WIDTH_T value;                                                                \
            memcpy(&value, bytes + RECORD_START(i) + offset, sizeof(WIDTH_T));            \
            value = CONVERT(value);                                                       \
            memcpy(target + i, &value, sizeof(WIDTH_T));                                  \
        }                                                                                 \
    } while (0)

#define AS_IS(v) (v)

#define COPY_TILE()                                                                       \
    for (Py_ssize_t k = 0; k < field_count; k++) {                                        \
        const Py_ssize_t offset = specs[k].offset, width = specs[k].width;                \
        char *out = (char *)specs[k].out.buf;                                             \
        switch (width) {                                                                  \
        case 1: COPY_LOOP(uint8_t, AS_IS); break;                                         \
        case 2: if (swap) COPY_LOOP(uint16_t, swapped16); else COPY_LOOP(uint16_t, AS_IS); break; \
        case 4: if (swap) COPY_LOOP(uint32_t, swapped32); else COPY_LOOP(uint32_t, AS_IS); break; \
        case 8: if (swap) COPY_LOOP(uint64_t, swapped64); else COPY_LOOP(uint64_t, AS_IS); break; \
        default:                                                                          \
            for (Py_ssize_t i = begin; i < end; i++)                                      \
                memcpy(out + i * width, bytes + RECORD_START(i) + offset, (size_t)width); \
        }                                                                                 \
    }

/* The expected bytes (a message header) at expect_offset of every record of the tile; 0 at the
 * first that differs. The tile's lines are then in L1 for the copies. */
#define CHECK_TILE()                                                                      \
    if (expect->len == 8) {                                                               \
        uint64_t expected_word, word;                                                     \
        memcpy(&expected_word, expect->buf, 8);                                           \
        for (Py_ssize_t i = begin; i < end; i++) {                                        \
            memcpy(&word, bytes + RECORD_START(i) + expect_offset, 8);                    \
            if (word != expected_word) return 0;                                          \
        }                                                                                 \
    } else if (expect->len > 0) {                                                         \
        for (Py_ssize_t i = begin; i < end; i++)                                          \
            if (memcmp(bytes + RECORD_START(i) + expect_offset, expect->buf, (size_t)expect->len) != 0) \
                return 0;                                                                 \
    }

static int copy_strided(const char *bytes, Py_ssize_t first, Py_ssize_t stride, Py_ssize_t count,
                        FieldSpec *specs, Py_ssize_t field_count, int swap,
                        const Py_buffer *expect, Py_ssize_t expect_offset)
{
#define RECORD_START(i) (first + (i) * stride)
    for (Py_ssize_t begin = 0; begin < count; begin += TILE_RECORDS) {
        const Py_ssize_t end = begin + TILE_RECORDS < count ? begin + TILE_RECORDS : count;
        CHECK_TILE();
        COPY_TILE();
    }
#undef RECORD_START
    return 1;
}

static int copy_at_starts(const char *bytes, const int64_t *starts, Py_ssize_t count,
                          FieldSpec *specs, Py_ssize_t field_count, int swap,
                          const Py_buffer *expect, Py_ssize_t expect_offset)
{
#define RECORD_START(i) ((Py_ssize_t)starts[i])
    for (Py_ssize_t begin = 0; begin < count; begin += TILE_RECORDS) {
        const Py_ssize_t end = begin + TILE_RECORDS < count ? begin + TILE_RECORDS : count;
        CHECK_TILE();
        COPY_TILE();
    }
#undef RECORD_START
    return 1;
}

static void release_specs(FieldSpec *specs, Py_ssize_t filled)
{
    for (Py_ssize_t k = 0; k < filled; k++)
        PyBuffer_Release(&specs[k].out);
    PyMem_Free(specs);
}

static PyObject *copy_fields(PyObject *module, PyObject *args)
{
    Py_buffer data, starts_view = {0}, expect = {0};
    Py_ssize_t first, stride, count, expect_offset = 0;
    PyObject *starts, *fields;
    int swap;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*nnnOOp|y*n", &data, &first, &stride, &count, &starts, &fields, &swap,
                          &expect, &expect_offset))
        return NULL;
    PyObject *result = NULL, *sequence = NULL;
    FieldSpec *specs = NULL;
    Py_ssize_t field_count = 0, filled = 0;
    const int explicit_starts = starts != Py_None;

    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "count must be >= 0, not %zd", count);
        goto done;
    }
    if (explicit_starts) {
        if (PyObject_GetBuffer(starts, &starts_view, PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        if (starts_view.len != count * (Py_ssize_t)sizeof(int64_t)) {
            PyErr_Format(PyExc_ValueError, "starts holds %zd bytes, not count (%zd) int64 values",
                         starts_view.len, count);
            goto done;
        }
    }
    sequence = PySequence_Fast(fields, "fields must be a sequence of (offset, width, out)");
    if (sequence == NULL)
        goto done;
    field_count = PySequence_Fast_GET_SIZE(sequence);
    specs = PyMem_Calloc(field_count > 0 ? (size_t)field_count : 1, sizeof(FieldSpec));
    if (specs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The bytes of a record that anything reads: [lowest, highest); the expected bytes may lie before
     * the record (a message header before its block). */
    Py_ssize_t lowest = 0, highest = 0;
    if (expect.len > 0) {
        if (expect_offset < -(PY_SSIZE_T_MAX / 4) || expect_offset > PY_SSIZE_T_MAX / 4) {
            PyErr_Format(PyExc_ValueError, "expect_offset %zd is out of range", expect_offset);
            goto done;
        }
        lowest = expect_offset;
        highest = expect_offset + expect.len;
    }
    for (Py_ssize_t k = 0; k < field_count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(sequence, k), *out;
        FieldSpec *spec = &specs[k];
        if (!PyArg_ParseTuple(item, "nnO;a field is (offset, width, out)", &spec->offset, &spec->width, &out))
            goto done;
        if (spec->width < 1 || spec->offset < 0 || spec->offset > PY_SSIZE_T_MAX / 2 || spec->width > PY_SSIZE_T_MAX / 4) {
            PyErr_Format(PyExc_ValueError, "field %zd: offset %zd must be >= 0 and width %zd >= 1", k,
                         spec->offset, spec->width);
            goto done;
        }
        if (swap && spec->width != 1 && spec->width != 2 && spec->width != 4 && spec->width != 8) {
            PyErr_Format(PyExc_ValueError, "field %zd: swap needs a width of 1, 2, 4 or 8, not %zd", k, spec->width);
            goto done;
        }
        if (PyObject_GetBuffer(out, &spec->out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        filled = k + 1;
        if (count > 0 && spec->out.len / count < spec->width) {
            PyErr_Format(PyExc_ValueError, "field %zd: out holds %zd bytes, fewer than count (%zd) x width (%zd)",
                         k, spec->out.len, count, spec->width);
            goto done;
        }
        const int first_span = k == 0 && expect.len == 0;
        if (first_span || spec->offset < lowest)
            lowest = spec->offset;
        if (first_span || spec->offset + spec->width > highest)
            highest = spec->offset + spec->width;
    }
    if (count == 0 || (field_count == 0 && expect.len == 0)) {
        result = Py_NewRef(Py_True);
        goto done;
    }

    /* Bounds: the first and last byte any record's fields read, before reading any. */
    Py_ssize_t min_start, max_start;
    if (explicit_starts) {
        const int64_t *values = (const int64_t *)starts_view.buf;
        int64_t low = values[0], high = values[0];
        for (Py_ssize_t i = 1; i < count; i++) {
            if (values[i] < low) low = values[i];
            if (values[i] > high) high = values[i];
        }
        if (low < 0 || high > (int64_t)data.len) {
            PyErr_Format(PyExc_ValueError, "a record start (%lld .. %lld) lies outside the %zd-byte buffer",
                         (long long)low, (long long)high, data.len);
            goto done;
        }
        min_start = (Py_ssize_t)low;
        max_start = (Py_ssize_t)high;
    } else {
        if (first < 0 || stride < 0 || first > data.len
                || (count > 1 && stride > (data.len - first) / (count - 1))) {
            PyErr_Format(PyExc_ValueError, "records at %zd + i * %zd for i < %zd lie outside the %zd-byte buffer",
                         first, stride, count, data.len);
            goto done;
        }
        min_start = first;
        max_start = first + (count - 1) * stride;
    }
    if (min_start + lowest < 0 || highest > data.len - max_start) {
        PyErr_Format(PyExc_ValueError, "the fields (record bytes %zd .. %zd) of a record starting at %zd would be "
                     "read past the end of the %zd-byte buffer", lowest, highest, max_start, data.len);
        goto done;
    }

    int matched;
    Py_BEGIN_ALLOW_THREADS
    if (explicit_starts)
        matched = copy_at_starts((const char *)data.buf, (const int64_t *)starts_view.buf, count, specs,
                                 field_count, swap, &expect, expect_offset);
    else
        matched = copy_strided((const char *)data.buf, first, stride, count, specs, field_count, swap,
                               &expect, expect_offset);
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(matched);

done:
    if (specs != NULL)
        release_specs(specs, filled);
    Py_XDECREF(sequence);
    if (explicit_starts && starts_view.obj != NULL)
        PyBuffer_Release(&starts_view);
    if (expect.obj != NULL)
        PyBuffer_Release(&expect);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *same_bytes(PyObject *module, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t first, stride, count, width;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*nnnn", &data, &first, &stride, &count, &width))
        return NULL;
    PyObject *result = NULL;
    if (count < 0 || width < 0 || first < 0 || stride < 0 || first > data.len || width > data.len - first
            || (count > 1 && stride > (data.len - first - width) / (count - 1))) {
        PyErr_Format(PyExc_ValueError, "%zd bytes at %zd + i * %zd for i < %zd lie outside the %zd-byte buffer",
                     width, first, stride, count, data.len);
        goto done;
    }
    int alike = 1;
    const char *bytes = (const char *)data.buf + first;
    Py_BEGIN_ALLOW_THREADS
    if (width == 8) {  /* a message header: one word compare a record rather than a memcmp call */
        uint64_t first_word, word;
        memcpy(&first_word, bytes, 8);
        for (Py_ssize_t i = 1; i < count && alike; i++) {
            memcpy(&word, bytes + i * stride, 8);
            alike = word == first_word;
        }
    } else {
        for (Py_ssize_t i = 1; i < count && alike; i++)
            alike = memcmp(bytes, bytes + i * stride, (size_t)width) == 0;
    }
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(alike);
done:
    PyBuffer_Release(&data);
    return result;
}

#define OFFSETS_LAYOUT(T)                                                                 \
    do {                                                                                  \
        const T *at = (const T *)offsets.buf;                                             \
        stride = count >= 2 ? (long long)at[1] - at[0] : (count == 1 ? 0 : -1);          \
        if (count >= 2 && stride <= 0) stride = -1;                                       \
        for (Py_ssize_t i = 0; i < count; i++) {                                          \
            const long long length = (long long)at[i + 1] - at[i];                        \
            if (length < shortest) shortest = length;                                     \
            if (i + 1 < count && length != stride) stride = -1;                           \
        }                                                                                 \
    } while (0)

static PyObject *offsets_layout(PyObject *module, PyObject *args)
{
    Py_buffer offsets;
    Py_ssize_t count;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*n", &offsets, &count))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t width = count >= 0 ? offsets.len / (count + 1) : 0;
    if (count < 0 || (width != 4 && width != 8) || offsets.len != width * (count + 1)) {
        PyErr_Format(PyExc_ValueError, "offsets must be count + 1 (%zd) int32 or int64 values, not %zd bytes",
                     count + 1, offsets.len);
        goto done;
    }
    long long shortest = count > 0 ? LLONG_MAX : 0, stride = -1;
    Py_BEGIN_ALLOW_THREADS
    if (width == 4)
        OFFSETS_LAYOUT(int32_t);
    else
        OFFSETS_LAYOUT(int64_t);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(LL)", shortest, stride);
done:
    PyBuffer_Release(&offsets);
    return result;
}

static PyObject *take_names(PyObject *module, PyObject *args)
{
    Py_buffer slots, name_lengths, padded_names, out_offsets, out_bytes;
    Py_ssize_t width;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*y*nw*w*", &slots, &name_lengths, &padded_names, &width, &out_offsets, &out_bytes))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t count = slots.len / (Py_ssize_t)sizeof(int32_t);
    const Py_ssize_t name_count = name_lengths.len / (Py_ssize_t)sizeof(int32_t);
    const int32_t *slot = (const int32_t *)slots.buf, *length_of = (const int32_t *)name_lengths.buf;
    if (width < 8 || width % 8 != 0 || padded_names.len != name_count * width
            || out_offsets.len / (Py_ssize_t)sizeof(int32_t) < count + 1) {
        PyErr_SetString(PyExc_ValueError, "take_names needs a width that is a multiple of 8, padded_names of "
                        "names x width bytes and out_offsets of count + 1 int32");
        goto done;
    }
    for (Py_ssize_t i = 0; i < name_count; i++) {
        if (length_of[i] < 0 || length_of[i] > width) {
            PyErr_Format(PyExc_ValueError, "name %zd's length %d is not within the width %zd", i, (int)length_of[i], width);
            goto done;
        }
    }
    int32_t *offsets = (int32_t *)out_offsets.buf;
    char *target = (char *)out_bytes.buf;
    const char *source = (const char *)padded_names.buf;
    Py_ssize_t written = 0, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    offsets[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const int32_t s = slot[i];
        if (s >= 0) {
            /* Whole 8-byte words of the padded name, then advance by its length: no branch on the length. */
            if (s >= name_count || width > out_bytes.len - written || written > INT32_MAX - width) { bad = i; break; }
            for (Py_ssize_t word = 0; word < width; word += 8)
                memcpy(target + written + word, source + (Py_ssize_t)s * width + word, 8);
            written += length_of[s];
        }
        offsets[i + 1] = (int32_t)written;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "slot %zd (%d) names no name or out_bytes is too small", bad, (int)slot[bad]);
        goto done;
    }
    result = PyLong_FromSsize_t(written);
done:
    PyBuffer_Release(&slots);
    PyBuffer_Release(&name_lengths);
    PyBuffer_Release(&padded_names);
    PyBuffer_Release(&out_offsets);
    PyBuffer_Release(&out_bytes);
    return result;
}

static PyMethodDef methods[] = {
    {"same_bytes", same_bytes, METH_VARARGS,
     "same_bytes(data, first, stride, count, width) -> bool: the width bytes of every record alike"},
    {"offsets_layout", offsets_layout, METH_VARARGS,
     "offsets_layout(offsets, count) -> (shortest, stride): the shortest value and the fixed stride or -1"},
    {"take_names", take_names, METH_VARARGS,
     "take_names(slots, name_lengths, padded_names, width, out_offsets, out_bytes) -> int: names chosen by index"},
    {"copy_fields", copy_fields, METH_VARARGS,
     "copy_fields(data, first, stride, count, starts, fields, swap[, expect, expect_offset]) -> bool: copy "
     "fixed-width fields of records into one contiguous buffer per field, in one pass over the records"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_fixed_fields", "Copies fixed-width SBE fields out of a byte buffer.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fixed_fields(void)
{
    PyObject *module = PyModule_Create(&module_definition);
    if (module != NULL && PyModule_AddIntConstant(module, "INTERFACE_VERSION", INTERFACE_VERSION) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
