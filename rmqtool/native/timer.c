/* the timer log and wheel checks
 *
 * real_topic_hashes: store/timer/records.py's sure reading of REAL_TOPIC in many properties
 * ranges (its _real_topic_hashes), a range at a time. The entry's bytes ("REAL_TOPIC" and the
 * name-value separator) and both separators come from formats/properties.py through the
 * caller; nothing of the layout is written here. A range it is not sure of is left unknown,
 * and the caller reads it as the broker does (formats/properties.bytes_to_properties). */
#include "kernel.h"

#include <string.h>

/* where `needle` starts inside [from, to) of p, fully inside; -1 when it does not. Found by
 * its last byte (the entry's name-value separator: a few a properties string) */
static Py_ssize_t find_inside(const unsigned char *p, Py_ssize_t from, Py_ssize_t to, const unsigned char *needle,
                              Py_ssize_t n)
{
    if (n <= 0)
        return -1;
    Py_ssize_t q = from + n - 1;  /* where the needle's last byte would be */
    while (q < to) {
        const unsigned char *hit = memchr(p + q, needle[n - 1], (size_t)(to - q));
        if (hit == NULL)
            return -1;
        q = hit - p;
        if (memcmp(p + q - (n - 1), needle, (size_t)n) == 0)
            return q - (n - 1);
        q++;
    }
    return -1;
}

/* real_topic_hashes' reading of one properties range [lo, hi) of p (len bytes): 1 and the
 * value's String.hashCode in *code when it is sure, else 0 */
static int range_hash(const unsigned char *p, Py_ssize_t len, int64_t lo, int64_t hi, const unsigned char *needle,
                      Py_ssize_t m, unsigned char property, unsigned char name_value, int64_t *code)
{
    if (lo < 0 || hi > len || lo > hi)
        return 0;  /* not a range of buf: not sure */
    Py_ssize_t at = find_inside(p, lo, hi, needle, m);
    if (at < 0 || find_inside(p, at + 1, hi, needle, m) >= 0)
        return 0;  /* none, or more than one */
    if (at > lo && p[at - 1] != property)
        return 0;  /* inside another entry */
    Py_ssize_t v = at + m, i = v;
    uint32_t h = 0;
    for (; i < hi && p[i] != property; i++) {
        if (p[i] >= 0x80 || p[i] == name_value)
            break;
        h = 31u * h + p[i];
    }
    if (i == v || (i < hi && p[i] != property))
        return 0;  /* empty, or a byte the sure reading does not take */
    *code = h >= 0x80000000u ? (int64_t)h - ((int64_t)1 << 32) : (int64_t)h;  /* Java's int */
    return 1;
}

/* a contiguous 1-d buffer of `count` items of `itemsize` bytes (writable when asked) */
static int get_column(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t count, int writable,
                      const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->len != itemsize * count) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, not %zd items of %zd", name, view->len, count, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* real_topic_hashes(buf, starts, ends, entry, property_separator, name_value_separator, codes, known)
 * -> the number of ranges known.
 * starts, ends: int64 (this machine's order), a properties range [start, end) of buf each;
 * codes (int64) and known (bool) are written, one a range. A range is known when the entry
 * occurs once fully inside it, at its start or after a property separator, and its value (up
 * to the next property separator or the range's end) is non-empty ASCII without the
 * name-value separator; its code is then the value's String.hashCode (a signed int). */
static PyObject *real_topic_hashes(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *starts_obj, *ends_obj, *codes_obj, *known_obj;
    Py_buffer buf, entry, starts, ends, codes, known;
    unsigned char property, name_value;
    if (!PyArg_ParseTuple(args, "OOOy*bbOO", &buf_obj, &starts_obj, &ends_obj, &entry, &property, &name_value,
                          &codes_obj, &known_obj))
        return NULL;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&entry);
        return NULL;
    }
    Py_ssize_t n = -1, done = 0;
    if (PyObject_GetBuffer(starts_obj, &starts, PyBUF_C_CONTIGUOUS) < 0)
        goto buf_only;
    n = starts.len / (Py_ssize_t)sizeof(int64_t);
    if (starts.len % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "starts: not int64 items");
        goto starts_only;
    }
    if (get_column(ends_obj, &ends, sizeof(int64_t), n, 0, "ends") < 0)
        goto starts_only;
    if (get_column(codes_obj, &codes, sizeof(int64_t), n, 1, "codes") < 0)
        goto ends_too;
    if (get_column(known_obj, &known, 1, n, 1, "known") < 0)
        goto codes_too;

    const unsigned char *p = buf.buf, *needle = entry.buf;
    const int64_t *s = starts.buf, *e = ends.buf;
    int64_t *code = codes.buf;
    unsigned char *ok = known.buf;
    Py_ssize_t len = buf.len, m = entry.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        code[k] = 0;
        ok[k] = 0;
        if (!range_hash(p, len, s[k], e[k], needle, m, property, name_value, &code[k]))
            continue;
        ok[k] = 1;
        done++;
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&known);
codes_too:
    PyBuffer_Release(&codes);
ends_too:
    PyBuffer_Release(&ends);
starts_only:
    PyBuffer_Release(&starts);
buf_only:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&entry);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(done);
}

/* walk_back(prev_rows, minus_one, positions, heads, read_end, has_read_end, end_code, end_at, counts, rows)
 * -> the rows written, or None (declined: a row out of range, or more rows than `rows` holds).
 * store/timer/chain.py's array walk of many chains, a chain at a time: from each head row
 * (-1: not startable, left), step to prev_rows[row] while it goes back (a smaller row); a
 * prev of -1 at a unit whose prevPos is -1 (minus_one) ends it as code 1, a row whose
 * position is at or past read_end as code 2 (end_at: that position); any other stop leaves
 * code 0 (chain.walk_chain decides) and none of its rows. The settled chains' rows are
 * written one chain after another, newest first; counts[k] is chain k's number of them.
 * prev_rows, positions, heads, end_at, counts, rows: int64; minus_one: bool; end_code: int8. */
#define WALK_BATCH 64

static PyObject *walk_back(PyObject *self, PyObject *args)
{
    PyObject *objs[9];
    long long read_end;
    int has_read_end;
    if (!PyArg_ParseTuple(args, "OOOOLpOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &read_end, &has_read_end,
                          &objs[4], &objs[5], &objs[6], &objs[7]))
        return NULL;
    Py_buffer v[8];
    int got = 0, declined = 0;
    Py_ssize_t written = 0;
    Py_ssize_t units = -1, chains = -1, capacity = -1;
    if (PyObject_GetBuffer(objs[0], &v[0], PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    got = 1;
    units = v[0].len / 8;
    if (PyObject_GetBuffer(objs[3], &v[3], PyBUF_C_CONTIGUOUS) < 0)
        goto release;
    chains = v[3].len / 8;
    if (PyObject_GetBuffer(objs[7], &v[7], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto release3;
    capacity = v[7].len / 8;
    if (v[0].len % 8 || v[3].len % 8 || v[7].len % 8) {
        PyErr_SetString(PyExc_ValueError, "walk_back: int64 columns");
        goto release7;
    }
    static const char *names[] = {"prev_rows", "minus_one", "positions", "heads", "end_code", "end_at", "counts"};
    Py_ssize_t sizes[] = {8, 1, 8, 8, 1, 8, 8};
    for (got = 1; got < 7; got++) {
        if (got == 3)
            continue;
        Py_ssize_t count = got < 3 ? units : chains;
        if (get_column(objs[got], &v[got], sizes[got], count, got >= 4, names[got]) < 0)
            goto release_partial;
    }

    const int64_t *prev = v[0].buf, *position = v[2].buf, *head = v[3].buf;
    const unsigned char *minus_one = v[1].buf;
    signed char *code = v[4].buf;
    int64_t *end_at = v[5].buf, *count = v[6].buf, *out = v[7].buf;
    Py_BEGIN_ALLOW_THREADS
    /* WALK_BATCH chains step together: their reads do not wait on one another (a chain alone
     * waits on memory at every step); each one's rows are gathered in `steps`, round-major */
    int64_t cur[WALK_BATCH], len[WALK_BATCH];
    Py_ssize_t rounds_held = 0;
    int64_t *steps = NULL;
    for (Py_ssize_t from = 0; from < chains && !declined; from += WALK_BATCH) {
        Py_ssize_t nb = chains - from < WALK_BATCH ? chains - from : WALK_BATCH, alive = 0;
        for (Py_ssize_t j = 0; j < nb; j++) {
            Py_ssize_t k = from + j;
            code[k] = 0;
            end_at[k] = -1;
            count[k] = 0;
            len[j] = 0;
            cur[j] = head[k];
            alive += cur[j] >= 0;
        }
        for (Py_ssize_t round = 0; alive && !declined; round++) {
            if (round >= rounds_held) {
                Py_ssize_t more = rounds_held ? 2 * rounds_held : 64;
                int64_t *grown = PyMem_RawRealloc(steps, (size_t)more * WALK_BATCH * sizeof(int64_t));
                if (grown == NULL) {
                    declined = 1;  /* no memory for the rows: the array walk runs */
                    break;
                }
                steps = grown;
                rounds_held = more;
            }
            for (Py_ssize_t j = 0; j < nb; j++) {
                int64_t c = cur[j];
                if (c < 0)
                    continue;
                if (c >= units) {
                    declined = 1;
                    break;
                }
                Py_ssize_t k = from + j;
                steps[round * WALK_BATCH + j] = c;
                len[j]++;
                int64_t nxt = prev[c];
                cur[j] = -1;
                alive--;
                if (nxt < 0)
                    code[k] = minus_one[c] ? 1 : 0;
                else if (nxt >= c)
                    ;  /* a step that does not go back: walk_chain decides */
                else if (has_read_end && nxt < units && position[nxt] >= read_end) {
                    code[k] = 2;
                    end_at[k] = position[nxt];
                } else {
                    cur[j] = nxt;  /* nxt < units: checked when it is read */
                    alive++;
                }
            }
        }
        for (Py_ssize_t j = 0; j < nb && !declined; j++) {
            Py_ssize_t k = from + j;
            if (code[k] == 0)
                continue;  /* not settled: none of its rows */
            if (written + len[j] > capacity) {
                declined = 1;
                break;
            }
            for (Py_ssize_t r = 0; r < len[j]; r++)
                out[written++] = steps[r * WALK_BATCH + j];
            count[k] = len[j];
        }
    }
    PyMem_RawFree(steps);
    Py_END_ALLOW_THREADS

release_partial:
    for (int i = 1; i < got; i++)
        if (i != 3)
            PyBuffer_Release(&v[i]);
release7:
    PyBuffer_Release(&v[7]);
release3:
    PyBuffer_Release(&v[3]);
release:
    PyBuffer_Release(&v[0]);
    if (PyErr_Occurred())
        return NULL;
    if (declined)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(written);
}

/* unpack_be(src, count, src_itemsize, dst, dst_itemsize, fields, position_at, base) -> None
 * The first `count` items of src (each src_itemsize bytes) into dst's rows (dst_itemsize
 * bytes, this machine's byte order): fields is int64 (k, 3), each row (offset in an item,
 * offset in a row, width 4 or 8) of a big-endian signed field; position_at >= 0: the row's
 * int64 there is base + i * src_itemsize (the item's place in its file). The layout is the
 * caller's (store/timer/timerlog.py's UNIT_DTYPE and COLUMNS_DTYPE, from formats/). */
static PyObject *unpack_be(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *dst_obj, *fields_obj;
    Py_ssize_t count, src_size, dst_size, position_at;
    long long base;
    if (!PyArg_ParseTuple(args, "OnnOnOnL", &src_obj, &count, &src_size, &dst_obj, &dst_size, &fields_obj,
                          &position_at, &base))
        return NULL;
    Py_buffer src, dst, fields;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    if (PyObject_GetBuffer(fields_obj, &fields, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&dst);
        PyBuffer_Release(&src);
        return NULL;
    }
    const int64_t *f = fields.buf;
    Py_ssize_t k = fields.len / (3 * (Py_ssize_t)sizeof(int64_t));
    int ok = count >= 0 && src_size > 0 && dst_size > 0 && fields.len % (3 * (Py_ssize_t)sizeof(int64_t)) == 0
             && count <= src.len / src_size && count <= dst.len / dst_size
             && (position_at < 0 || position_at + 8 <= dst_size);
    for (Py_ssize_t j = 0; ok && j < k; j++) {
        int64_t at = f[3 * j], to = f[3 * j + 1], width = f[3 * j + 2];
        ok = (width == 4 || width == 8) && at >= 0 && at + width <= src_size && to >= 0 && to + width <= dst_size;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "unpack_be: fields or sizes outside the buffers");
    } else {
        const unsigned char *in = src.buf;
        unsigned char *out = dst.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < count; i++, in += src_size, out += dst_size) {
            for (Py_ssize_t j = 0; j < k; j++) {
                if (f[3 * j + 2] == 4) {
                    int32_t x = rmq_i32(in + f[3 * j]);
                    memcpy(out + f[3 * j + 1], &x, 4);
                } else {
                    int64_t x = rmq_i64(in + f[3 * j]);
                    memcpy(out + f[3 * j + 1], &x, 8);
                }
            }
            if (position_at >= 0) {
                int64_t x = (int64_t)((uint64_t)base + (uint64_t)i * (uint64_t)src_size);
                memcpy(out + position_at, &x, 8);
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&fields);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* rows_at(bases, firsts, counts, positions, unit_size, rows) -> None
 * store/timer/timerlog.rows_at: the row of the readable unit at each log position, -1 where
 * there is none; files by start offset (bases, sorted), first row and unit count; all int64. */
static PyObject *rows_at(PyObject *self, PyObject *args)
{
    PyObject *objs[5];
    long long unit_size;
    if (!PyArg_ParseTuple(args, "OOOOLO", &objs[0], &objs[1], &objs[2], &objs[3], &unit_size, &objs[4]))
        return NULL;
    Py_buffer v[5];
    int got = 0;
    if (PyObject_GetBuffer(objs[0], &v[0], PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    got = 1;
    Py_ssize_t files = v[0].len / 8;
    if (PyObject_GetBuffer(objs[3], &v[3], PyBUF_C_CONTIGUOUS) < 0)
        goto release;
    Py_ssize_t n = v[3].len / 8;
    if (v[0].len % 8 || v[3].len % 8 || unit_size <= 0) {
        PyErr_SetString(PyExc_ValueError, "rows_at: int64 columns and a unit size");
        goto release3;
    }
    if (get_column(objs[1], &v[1], 8, files, 0, "firsts") < 0)
        goto release3;
    got = 2;
    if (get_column(objs[2], &v[2], 8, files, 0, "counts") < 0)
        goto release12;
    got = 3;
    if (get_column(objs[4], &v[4], 8, n, 1, "rows") < 0)
        goto release12;
    got = 5;
    const int64_t *base = v[0].buf, *first = v[1].buf, *count = v[2].buf, *pos = v[3].buf;
    int64_t *row = v[4].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = pos[i];
        row[i] = -1;
        if (p < 0)
            continue;
        Py_ssize_t lo = 0, hi = files;  /* the last file starting at or before p */
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (base[mid] <= p)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0)
            continue;
        Py_ssize_t f = lo - 1;
        uint64_t rel = (uint64_t)p - (uint64_t)base[f];  /* base[f] <= p: no overflow as unsigned */
        if (rel % (uint64_t)unit_size != 0 || count[f] < 0 || rel / (uint64_t)unit_size >= (uint64_t)count[f])
            continue;
        row[i] = first[f] + (int64_t)(rel / (uint64_t)unit_size);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v[4]);
release12:
    if (got >= 3)
        PyBuffer_Release(&v[2]);
    PyBuffer_Release(&v[1]);
release3:
    PyBuffer_Release(&v[3]);
release:
    PyBuffer_Release(&v[0]);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* plain_sure(buf, positions, sizes, hashes, layout, topic, entry, property_separator, name_value_separator, out)
 * -> units found plain. store/timer/records._plain_in's common case, a unit at a time: out[k] is
 * set (1) where the record at positions[k] (IPv4 hosts) is whole by the record rule with a
 * totalSize of sizes[k], a magic code of the two, the topic's bytes, and a REAL_TOPIC read as
 * real_topic_hashes reads it whose hash is hashes[k]; every other unit is left 0, for the caller
 * to decide. layout: (totalSize at, magic code at, sysFlag at, bodyLength at, the IPv4 header's
 * size, the hosts bits' shift, magic code V1, V2, topic length size V1, V2, properties length
 * size), big-endian fields; positions, sizes, hashes: int64; out: bool. None: a layout it
 * does not read (lengths of other sizes than 1 or 2 bytes, fields outside the header). */
static PyObject *plain_sure(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *objs[4];
    Py_buffer buf, topic, entry, v[4];
    Py_ssize_t total_at, magic_at, flag_at, body_length_at, header, shift, tl1, tl2, pls;
    unsigned long long v1, v2;
    unsigned char property, name_value;
    if (!PyArg_ParseTuple(args, "OOOO(nnnnnnKKnnn)y*y*bbO", &buf_obj, &objs[0], &objs[1], &objs[2], &total_at,
                          &magic_at, &flag_at, &body_length_at, &header, &shift, &v1, &v2, &tl1, &tl2, &pls,
                          &topic, &entry, &property, &name_value, &objs[3]))
        return NULL;
    int got = 0;
    Py_ssize_t n = -1, done = 0;
    int readable = total_at >= 0 && magic_at >= 0 && flag_at >= 0 && body_length_at >= 0 && shift >= 0 &&
                   shift < 30 && total_at + 4 <= header && magic_at + 4 <= header && flag_at + 4 <= header &&
                   body_length_at + 4 <= header && (tl1 == 1 || tl1 == 2) && (tl2 == 1 || tl2 == 2) && pls == 2;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_SIMPLE) < 0)
        goto release;
    got = 1;
    if (PyObject_GetBuffer(objs[0], &v[0], PyBUF_C_CONTIGUOUS) < 0)
        goto release;
    got = 2;
    n = v[0].len / 8;
    if (v[0].len % 8) {
        PyErr_SetString(PyExc_ValueError, "plain_sure: int64 positions");
        goto release;
    }
    if (get_column(objs[1], &v[1], 8, n, 0, "sizes") < 0)
        goto release;
    got = 3;
    if (get_column(objs[2], &v[2], 8, n, 0, "hashes") < 0)
        goto release;
    got = 4;
    if (get_column(objs[3], &v[3], 1, n, 1, "out") < 0)
        goto release;
    got = 5;
    if (!readable)
        goto release;
    const unsigned char *p = buf.buf, *want = topic.buf, *needle = entry.buf;
    const int64_t *pos = v[0].buf, *size = v[1].buf, *hash = v[2].buf;
    unsigned char *out = v[3].buf;
    Py_ssize_t len = buf.len, topic_len = topic.len, m = entry.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        out[k] = 0;
        int64_t at = pos[k];
        if (at < 0 || at > len - header)
            continue;  /* no whole header here */
        const unsigned char *r = p + at;
        int64_t total = rmq_i32(r + total_at), end = at + total;
        if (total <= 0 || total != size[k] || end > len)
            continue;
        uint32_t magic = (uint32_t)rmq_i32(r + magic_at);
        if (magic != v1 && magic != v2)
            continue;
        if ((((uint32_t)rmq_i32(r + flag_at)) >> shift) & 3u)
            continue;  /* IPv6 hosts move the fields: the caller's */
        int64_t body_at = at + header, body_length = rmq_i32(r + body_length_at);
        if (body_at > end || body_length < 0 || body_at + body_length > end)
            continue;
        int64_t body_end = body_at + body_length;
        Py_ssize_t tls = magic == v2 ? tl2 : tl1;
        int64_t topic_at = body_end + tls;
        if (topic_at > end)
            continue;
        int64_t topic_length = tls == 1 ? (int64_t)p[body_end] - (p[body_end] >= 0x80 ? 0x100 : 0)
                                        : (int64_t)rmq_i16(p + body_end);
        if (topic_length < 0)
            continue;
        int64_t topic_end = topic_at + topic_length, properties_at = topic_end + pls;
        if (properties_at > end)
            continue;
        int64_t properties_length = rmq_i16(p + topic_end);
        if (properties_length < 0 || properties_at + properties_length != end)
            continue;
        if (topic_length != topic_len || memcmp(p + topic_at, want, (size_t)topic_len) != 0)
            continue;
        int64_t code;
        if (!range_hash(p, len, properties_at, end, needle, m, property, name_value, &code) || code != hash[k])
            continue;
        out[k] = 1;
        done++;
    }
    Py_END_ALLOW_THREADS
release:
    for (int i = got - 2; i >= 0 && got >= 2; i--)
        PyBuffer_Release(&v[i]);
    if (got >= 1)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&entry);
    if (PyErr_Occurred())
        return NULL;
    if (!readable)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(done);
}

PyMethodDef rmq_timer_methods[] = {
    {"plain_sure", plain_sure, METH_VARARGS,
     "plain_sure(buf, positions, sizes, hashes, layout, topic, entry, property_separator, name_value_separator, "
     "out) -> units found plain (store/timer/records._plain_in's common case)"},
    {"real_topic_hashes", real_topic_hashes, METH_VARARGS,
     "real_topic_hashes(buf, starts, ends, entry, property_separator, name_value_separator, codes, known) -> "
     "ranges known: the sure REAL_TOPIC hash of each properties range (store/timer/records.py)"},
    {"walk_back", walk_back, METH_VARARGS,
     "walk_back(prev_rows, minus_one, positions, heads, read_end, has_read_end, end_code, end_at, counts, rows) -> "
     "rows written, or None: store/timer/chain.py's array walk of many chains"},
    {"unpack_be", unpack_be, METH_VARARGS,
     "unpack_be(src, count, src_itemsize, dst, dst_itemsize, fields, position_at, base): big-endian items "
     "into native rows (store/timer/timerlog.leading_units)"},
    {"rows_at", rows_at, METH_VARARGS,
     "rows_at(bases, firsts, counts, positions, unit_size, rows): the readable unit's row at each log position "
     "(store/timer/timerlog.rows_at)"},
    {NULL, NULL, 0, NULL},
};
