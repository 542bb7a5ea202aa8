/* the totalSize chain (hop), CRC-32 of many byte ranges, and the runs of clean records
 *
 * hop is store/record_rule.hop_chain's loop (and store/commitlog.header_hop's), the rule's
 * constants passed in; crc_ranges is store/crc.crcs_of's loop, over crc32.c's CRC-32. crc_run
 * and clean_run take the run of records the rule (store/record_rule.record_parts) accepts,
 * through one check of a record (clean_record): crc_run those whose CRCs hold too, clean_run
 * writing their parts (record_kernel.clean_records').
 * find_all: where some bytes occur in a window (the recovery walk's INNER_NUM search).
 * All only read their buffer, inside its length. */
#include "kernel.h"

#include <string.h>

/* an int64 buffer (numpy int64, array.array('q')): its items as int64, or an error set */
static int int64_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = view->format == NULL ? "B" : view->format;
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (view->itemsize != 8 || (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be an int64 buffer", what);
        return -1;
    }
    return 0;
}

#define HOP_AHEAD 16 /* records the hop's prefetch looks ahead: about one memory latency of hops */

/* hop(buf, i, stop, limit, min_length, magic_v1, magic_v2, out) -> (count, position)
 *
 * From index i, while i < stop and a header (totalSize, magicCode: 8 bytes) lies in buf:
 * a record whose totalSize is at least min_length, that ends by limit and has one of the two
 * magic codes is taken (its position written to out, an int64 buffer, unless out is None) and
 * the walk goes to its end; anything else stops it. Also stops when out is full. Returns the
 * records taken and where it stopped (past buf's end when the last record taken runs on). */
static PyObject *scan_hop(PyObject *self, PyObject *args)
{
    Py_buffer buf, out = {0};
    long long i, stop, limit, min_length, v1, v2;
    PyObject *out_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*LLLLLLO", &buf, &i, &stop, &limit, &min_length, &v1, &v2, &out_obj))
        return NULL;
    if (i < 0 || min_length < 1 || min_length > INT32_MAX) {  /* min_length >= 1: every step moves on */
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "hop: i must be >= 0 and min_length in 1 .. 2^31 - 1");
        return NULL;
    }
    int64_t capacity = INT64_MAX;
    unsigned char *positions = NULL;
    if (out_obj != Py_None) {
        if (int64_buffer(out_obj, &out, 1, "hop's out") < 0) {
            PyBuffer_Release(&buf);
            return NULL;
        }
        capacity = out.len / 8;
        positions = out.buf;
    }
    const unsigned char *p = buf.buf;
    const int64_t n = buf.len;
    const uint32_t m1 = (uint32_t)(unsigned long long)v1, m2 = (uint32_t)(unsigned long long)v2;
    int64_t at = i, count = 0;
    Py_BEGIN_ALLOW_THREADS
    /* at < stop and at <= n - 8: the header is inside buf; at + total cannot overflow (|total| < 2^31) */
    while (at < stop && at <= n - 8 && count < capacity) {
        const int64_t total = rmq_i32(p + at);
        const uint32_t magic = (uint32_t)rmq_i32(p + at + 4);
        const int64_t end = at + total;
        if (total < min_length || end > limit || (magic != m1 && magic != m2))
            break;
        if (positions != NULL)
            memcpy(positions + 8 * count, &at, 8);
        /* the header HOP_AHEAD records on, were they all of this one's size (a log's records
         * mostly are): on its way from memory while these are read, instead of each header's
         * load waiting for the one before it. A wrong guess costs one wasted line. */
        const int64_t guess = end + HOP_AHEAD * total;
        if (guess <= n - 8)
            __builtin_prefetch(p + guess);
        count++;
        at = end;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (positions != NULL)
        PyBuffer_Release(&out);
    return Py_BuildValue("LL", (long long)count, (long long)at);
}

/* CRC-32 of a range, unmasked as zlib.crc32 gives it */
static inline uint32_t crc_of(const unsigned char *p, int64_t length)
{
    return rmq_crc32(0, p, (size_t)length);
}

/* crc_ranges(buf, start, end, out) -> count, or None (declined)
 *
 * out[k] = CRC-32 (unmasked, as zlib.crc32) of buf[start[k]:end[k]], for every k of the int64
 * arrays start and end. Declines, writing nothing, when a range is not inside buf
 * (0 <= start <= end <= len(buf)): the caller takes its own path. */
static PyObject *scan_crc_ranges(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *start_obj, *end_obj, *out_obj, *result = NULL;
    Py_buffer buf, start, end, out;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &buf_obj, &start_obj, &end_obj, &out_obj))
        return NULL;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (int64_buffer(start_obj, &start, 0, "crc_ranges' start") < 0)
        goto no_start;
    if (int64_buffer(end_obj, &end, 0, "crc_ranges' end") < 0)
        goto no_end;
    if (int64_buffer(out_obj, &out, 1, "crc_ranges' out") < 0)
        goto no_out;
    const int64_t count = start.len / 8;
    if (end.len != start.len || out.len < start.len) {
        PyErr_SetString(PyExc_ValueError, "crc_ranges: start, end and out must be as long");
        goto done;
    }
    const unsigned char *p = buf.buf, *s = start.buf, *e = end.buf;
    unsigned char *o = out.buf;
    const int64_t n = buf.len;
    int inside = 1;
    for (int64_t k = 0; k < count && inside; k++) {
        int64_t a, b;
        memcpy(&a, s + 8 * k, 8);
        memcpy(&b, e + 8 * k, 8);
        inside = 0 <= a && a <= b && b <= n;
    }
    if (!inside) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (int64_t k = 0; k < count; k++) {
        int64_t a, b;
        memcpy(&a, s + 8 * k, 8);
        memcpy(&b, e + 8 * k, 8);
        const int64_t crc = crc_of(p + a, b - a);
        memcpy(o + 8 * k, &crc, 8);
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong((long long)count);
done:
    PyBuffer_Release(&out);
no_out:
    PyBuffer_Release(&end);
no_end:
    PyBuffer_Release(&start);
no_start:
    PyBuffer_Release(&buf);
    return result;
}

/* a big-endian signed integer of 1, 2 or 4 bytes (the rule's length fields) */
static int64_t signed_be(const unsigned char *p, int size)
{
    if (size == 1)
        return (int8_t)p[0];
    if (size == 2)
        return rmq_i16(p);
    return rmq_i32(p);
}

/* What the record runs (crc_run, clean_run) know of a record's layout: every position and size
 * from formats/, handed in by store/record_kernel.py (RECORD_LAYOUT), in this order. */
enum {
    L_MIN_LENGTH, L_MAGIC_V1, L_MAGIC_V2, L_BODY_CRC_AT, L_SYS_FLAG_AT, L_HOSTS_SHIFT,
    L_HEADER_SIZE, /* 4: by hosts */
    L_BODY_LENGTH_AT = L_HEADER_SIZE + 4, /* 4: by hosts */
    L_STORE_TIMESTAMP_AT = L_BODY_LENGTH_AT + 4, /* 4: by hosts */
    L_TOPIC_LENGTH_SIZE_V1 = L_STORE_TIMESTAMP_AT + 4, L_TOPIC_LENGTH_SIZE_V2, L_PROPERTIES_LENGTH_SIZE,
    L_CRC_MASK, L_ENTRY_LENGTH, L_ENTRY_DIGITS, L_ENTRY_DIGITS_FROM_END, L_ENTRY_END_BYTE, L_ENTRY_HEAD,
    L_COUNT
};

typedef struct {
    int64_t L[L_COUNT];
    unsigned char head[64]; /* the __CRC32# entry's head */
    Py_ssize_t head_length;
} record_layout;

static int length_size_ok(int64_t size)
{
    return size == 1 || size == 2 || size == 4;
}

/* the layout tuple read and checked (every read it leads to stays inside a whole record); -1
 * with an error set when it is not a record's */
static int layout_of(PyObject *tuple, record_layout *lay, const char *who)
{
    int64_t *L = lay->L;
    if (PyTuple_GET_SIZE(tuple) != L_COUNT) {
        PyErr_Format(PyExc_ValueError, "%s: a layout of the wrong length", who);
        return -1;
    }
    for (int k = 0; k < L_ENTRY_HEAD; k++) {
        L[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, k));
        if (L[k] == -1 && PyErr_Occurred())
            return -1;
        if (L[k] < 0 || L[k] > UINT32_MAX) {  /* positions, sizes, 32-bit codes: the sums below cannot overflow */
            PyErr_Format(PyExc_ValueError, "%s: a layout that is not a record's", who);
            return -1;
        }
    }
    char *hp;
    if (PyBytes_AsStringAndSize(PyTuple_GET_ITEM(tuple, L_ENTRY_HEAD), &hp, &lay->head_length) < 0)
        return -1;
    if (lay->head_length > (Py_ssize_t)sizeof(lay->head)) {
        PyErr_Format(PyExc_ValueError, "%s: the entry head is too long", who);
        return -1;
    }
    memcpy(lay->head, hp, (size_t)lay->head_length);
    int ok = length_size_ok(L[L_TOPIC_LENGTH_SIZE_V1]) && length_size_ok(L[L_TOPIC_LENGTH_SIZE_V2])
        && length_size_ok(L[L_PROPERTIES_LENGTH_SIZE])
        && L[L_MIN_LENGTH] >= 1 && L[L_MIN_LENGTH] <= INT32_MAX && L[L_HOSTS_SHIFT] >= 0
        && L[L_HOSTS_SHIFT] < 31 && L[L_BODY_CRC_AT] >= 0 && L[L_SYS_FLAG_AT] >= 0
        && L[L_BODY_CRC_AT] + 4 <= L[L_MIN_LENGTH] && L[L_SYS_FLAG_AT] + 4 <= L[L_MIN_LENGTH]
        && L[L_ENTRY_DIGITS] >= 1 && L[L_ENTRY_DIGITS] <= 10 && L[L_ENTRY_LENGTH] >= lay->head_length
        && L[L_ENTRY_DIGITS_FROM_END] >= L[L_ENTRY_DIGITS] && L[L_ENTRY_DIGITS_FROM_END] <= L[L_ENTRY_LENGTH];
    for (int h = 0; h < 4; h++)  /* bodyLength and storeTimestamp inside the header, the header at least the prefix */
        ok = ok && L[L_HEADER_SIZE + h] >= L[L_HEADER_SIZE] && L[L_HEADER_SIZE + h] <= INT32_MAX
            && L[L_BODY_LENGTH_AT + h] >= 0 && L[L_BODY_LENGTH_AT + h] + 4 <= L[L_HEADER_SIZE + h]
            && L[L_STORE_TIMESTAMP_AT + h] >= 0 && L[L_STORE_TIMESTAMP_AT + h] + 8 <= L[L_HEADER_SIZE + h];
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: a layout that is not a record's", who);
        return -1;
    }
    return 0;
}

/* where the parts of a clean record lie (record_rule.record_parts' names) */
typedef struct {
    int64_t end, body_at, body_end, topic_at, topic_end, properties_at;
    int hosts;
} record_parts;

/* Whether the record at index at is one the rule takes: the hop's (totalSize at least the
 * smallest record's, a message's magic code, ending by limit) and clean (record_rule.record_parts:
 * every stage passed); its parts in *r when it is. The caller keeps at <= len - 8 and limit <= len:
 * every read is then inside [at, end), the record, inside the buffer. */
static inline int clean_record(const unsigned char *p, int64_t at, int64_t limit, const record_layout *lay,
                               record_parts *r)
{
    const int64_t *L = lay->L;
    const int64_t total = rmq_i32(p + at);
    const uint32_t magic = (uint32_t)rmq_i32(p + at + 4);
    const uint32_t m1 = (uint32_t)(uint64_t)L[L_MAGIC_V1], m2 = (uint32_t)(uint64_t)L[L_MAGIC_V2];
    const int64_t end = at + total;  /* |total| < 2^31: no overflow */
    if (total < L[L_MIN_LENGTH] || end > limit || (magic != m1 && magic != m2))
        return 0;
    const int hosts = (int)(((uint32_t)rmq_i32(p + at + L[L_SYS_FLAG_AT]) >> L[L_HOSTS_SHIFT]) & 3);
    const int64_t body_at = at + L[L_HEADER_SIZE + hosts];
    if (body_at > end)
        return 0;  /* header_fits */
    const int64_t body_length = rmq_i32(p + at + L[L_BODY_LENGTH_AT + hosts]);
    const int64_t body_end = body_at + body_length;
    if (body_length < 0 || body_end > end)
        return 0;  /* body_fits */
    const int tsize = (int)(magic == m2 ? L[L_TOPIC_LENGTH_SIZE_V2] : L[L_TOPIC_LENGTH_SIZE_V1]);
    const int64_t topic_at = body_end + tsize;
    if (topic_at > end)
        return 0;  /* topic_length_fits */
    const int64_t topic_length = signed_be(p + body_end, tsize);
    if (topic_length < 0)
        return 0;  /* topic_length_signed */
    const int64_t topic_end = topic_at + topic_length;
    const int64_t properties_at = topic_end + L[L_PROPERTIES_LENGTH_SIZE];
    if (properties_at > end)
        return 0;  /* topic_fits */
    const int64_t properties_length = signed_be(p + topic_end, (int)L[L_PROPERTIES_LENGTH_SIZE]);
    if (properties_length < 0 || properties_at + properties_length != end)
        return 0;  /* properties_length_signed, lengths_add_up */
    r->end = end;
    r->body_at = body_at;
    r->body_end = body_end;
    r->topic_at = topic_at;
    r->topic_end = topic_end;
    r->properties_at = properties_at;
    r->hosts = hosts;
    return 1;
}

/* Whether a clean record's body CRC and __CRC32# entry (when it has one that reads) hold, as
 * record_kernel.crc_verdicts reads them */
static int crcs_hold(const unsigned char *p, int64_t at, const record_parts *r, const record_layout *lay)
{
    const int64_t *L = lay->L;
    const int64_t mask = L[L_CRC_MASK], entry_length = L[L_ENTRY_LENGTH], end = r->end;
    const int64_t stored_body = rmq_i32(p + at + L[L_BODY_CRC_AT]);
    if (r->body_end > r->body_at ? (int64_t)(crc_of(p + r->body_at, r->body_end - r->body_at) & mask) != stored_body
                                 : stored_body != 0)
        return 0;
    if (p[end - 1] == L[L_ENTRY_END_BYTE] && end - r->properties_at >= entry_length
            && memcmp(p + end - entry_length, lay->head, (size_t)lay->head_length) == 0) {
        int64_t stored = 0, weight = 1;
        for (int64_t k = 0; k < L[L_ENTRY_DIGITS]; k++, weight *= 10) {
            const int d = p[end - L[L_ENTRY_DIGITS_FROM_END] + k] - '0';
            if (d < 0 || d > 9)
                return 1;  /* digits that do not read: no entry to check */
            stored += d * weight;
        }
        if ((int64_t)(crc_of(p + at, end - entry_length - at) & mask) != stored)
            return 0;
    }
    return 1;
}

/* crc_run(buf, i, stop, limit, layout) -> (count, position)
 *
 * store/commitlog.crc_run's common case in one pass: from index i, the records of the totalSize
 * chain that are clean (clean_record) and whose body CRC and __CRC32# entry hold, up to the
 * first that is not one of those: the count taken, and where it stopped, for the caller's own
 * path to go on from. */
static PyObject *scan_crc_run(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    long long i, stop, limit;
    PyObject *layout_obj;
    record_layout lay;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*LLLO!", &buf, &i, &stop, &limit, &PyTuple_Type, &layout_obj))
        return NULL;
    if (layout_of(layout_obj, &lay, "crc_run") < 0)
        goto error;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "crc_run: i must be >= 0");
        goto error;
    }
    const unsigned char *p = buf.buf;
    const int64_t n = buf.len;
    if (limit > n)
        limit = n;  /* nothing is read past buf */
    int64_t at = i, count = 0;
    record_parts r;
    Py_BEGIN_ALLOW_THREADS
    while (at < stop && at <= n - 8 && clean_record(p, at, limit, &lay, &r) && crcs_hold(p, at, &r, &lay)) {
        count++;
        at = r.end;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return Py_BuildValue("LL", (long long)count, (long long)at);
error:
    PyBuffer_Release(&buf);
    return NULL;
}

/* clean_run's columns, in the order of the int64 rows it fills */
enum { C_POSITION, C_END, C_HOSTS, C_STORE_TIMESTAMP, C_BODY_AT, C_BODY_END, C_TOPIC_AT, C_TOPIC_END,
       C_PROPERTIES_AT, C_COUNT };

/* clean_run(buf, i, stop, limit, layout, columns, headers) -> (count, position)
 *
 * record_kernel.clean_records' common case in one pass: from index i, the records of the
 * totalSize chain that start before stop and are clean (clean_record), each written as a column
 * of columns (an int64 buffer of C_COUNT rows of equal length: position, end, hosts,
 * storeTimestamp, body_at, body_end, topic_at, topic_end, properties_at) and its first header
 * size (IPv4 hosts') bytes as a row of headers (a byte buffer, a row per column). Stops at the
 * first record it does not take, at a record ending past buf (it reads nothing past buf), or
 * when columns are full: the count taken, and where it stopped, for the caller to go on from. */
static PyObject *scan_clean_run(PyObject *self, PyObject *args)
{
    Py_buffer buf, columns, headers;
    long long i, stop, limit;
    PyObject *layout_obj, *columns_obj, *headers_obj, *result = NULL;
    record_layout lay;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*LLLO!OO", &buf, &i, &stop, &limit, &PyTuple_Type, &layout_obj, &columns_obj,
                          &headers_obj))
        return NULL;
    if (layout_of(layout_obj, &lay, "clean_run") < 0)
        goto no_columns;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "clean_run: i must be >= 0");
        goto no_columns;
    }
    if (int64_buffer(columns_obj, &columns, 1, "clean_run's columns") < 0)
        goto no_columns;
    if (PyObject_GetBuffer(headers_obj, &headers, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto no_headers;
    const int64_t capacity = columns.len / 8 / C_COUNT, row = lay.L[L_HEADER_SIZE];
    if (columns.len != capacity * 8 * C_COUNT || capacity > headers.len / row) {  /* row >= 4: layout_of */
        PyErr_SetString(PyExc_ValueError, "clean_run: columns must be C_COUNT rows, headers a row a column");
        goto done;
    }
    const unsigned char *p = buf.buf;
    const int64_t n = buf.len;
    if (limit > n)
        limit = n;  /* nothing is read past buf */
    unsigned char *c = columns.buf, *h = headers.buf;
    const int64_t *L = lay.L;
    int64_t at = i, count = 0;
    record_parts r;
    Py_BEGIN_ALLOW_THREADS
    while (count < capacity && at < stop && at <= n - 8 && clean_record(p, at, limit, &lay, &r)) {
        /* clean: its header (at least the IPv4 header's bytes, body_at >= at + row) lies in the record */
        const int64_t store_timestamp = rmq_i64(p + at + L[L_STORE_TIMESTAMP_AT + r.hosts]);
        const int64_t hosts = r.hosts;
        const int64_t values[C_COUNT] = {at, r.end, hosts, store_timestamp, r.body_at, r.body_end, r.topic_at,
                                         r.topic_end, r.properties_at};
        for (int k = 0; k < C_COUNT; k++)
            memcpy(c + 8 * (k * capacity + count), &values[k], 8);
        memcpy(h + row * count, p + at, (size_t)row);
        count++;
        at = r.end;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("LL", (long long)count, (long long)at);
done:
    PyBuffer_Release(&headers);
no_headers:
    PyBuffer_Release(&columns);
no_columns:
    PyBuffer_Release(&buf);
    return result;
}

/* find_all(buf, needle, start, stop, out) -> occurrences written
 * bytes.find's hits of `needle` fully inside [start, stop) of buf, in order, each search going
 * on from the byte after the last hit (as commitlog_walk.sure_records' loop of buf.find), into
 * the int64 array `out` until it is full: the caller calls again from its last hit + 1. */
static PyObject *find_all(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *out_obj;
    Py_buffer buf, needle, out;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "Oy*nnO", &buf_obj, &needle, &start, &stop, &out_obj))
        return NULL;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&needle);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&buf);
        PyBuffer_Release(&needle);
        return NULL;
    }
    Py_ssize_t room = out.len / (Py_ssize_t)sizeof(int64_t), found = 0;
    if (out.len % (Py_ssize_t)sizeof(int64_t) != 0 || needle.len <= 0) {
        PyErr_SetString(PyExc_ValueError, "find_all: a non-empty needle and an int64 array");
        goto release;
    }
    if (start < 0)
        start = 0;
    if (stop > buf.len)
        stop = buf.len;
    const unsigned char *p = buf.buf;
    int64_t *hits = out.buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t at = start;
    while (found < room && at <= stop - needle.len) {
        const unsigned char *hit = memmem(p + at, (size_t)(stop - at), needle.buf, (size_t)needle.len);
        if (hit == NULL)
            break;
        hits[found++] = (int64_t)(hit - p);
        at = (hit - p) + 1;
    }
    Py_END_ALLOW_THREADS
release:
    PyBuffer_Release(&out);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&needle);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(found);
}

PyMethodDef rmq_scan_methods[] = {
    {"find_all", find_all, METH_VARARGS,
     "find_all(buf, needle, start, stop, out) -> hits written: bytes.find's hits of needle in [start, stop), "
     "in order, into an int64 array (recovery/commitlog_walk.sure_records)"},
    {"clean_run", scan_clean_run, METH_VARARGS,
     "clean_run(buf, i, stop, limit, layout, columns, headers) -> (count, position): the clean records' parts"},
    {"crc_run", scan_crc_run, METH_VARARGS,
     "crc_run(buf, i, stop, limit, layout) -> (count, position): the clean records whose CRCs hold"},
    {"hop", scan_hop, METH_VARARGS,
     "hop(buf, i, stop, limit, min_length, magic_v1, magic_v2, out) -> (count, position): the totalSize chain"},
    {"crc_ranges", scan_crc_ranges, METH_VARARGS,
     "crc_ranges(buf, start, end, out) -> count or None: CRC-32 of each range buf[start[k]:end[k]]"},
    {NULL, NULL, 0, NULL},
};
