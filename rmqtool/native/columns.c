/* the clean records' properties as columns (verify, redispatch): the common case of
 * store/record_columns.py's stages 3 to 7 (_property_items, _crc_entries, _tags_codes,
 * _special_by_wide_values, _index_keys), a record at a time.
 *
 * The Python stages are the definition: a record they make special is made special here, and
 * nothing else is; a plain record gets the same TAGS hash, the same __CRC32# digits and the same
 * index key hashes. The __CRC32# entry's CRC itself is left to the caller (store/crc.py). The
 * names, separators and the __CRC32# entry's shape come from formats/ in Python (the spec tuple). */
#include "kernel.h"

/* the names dispatch reads, in the spec's order */
enum { W_KEYS, W_UNIQ, W_TAGS, W_CRC, W_COUNT };
#define MAX_ASIDE 8
#define PREFETCH 8 /* records ahead whose properties are fetched while one is read */
#define HEAD 8 /* an aside name is told apart by its length and its first HEAD bytes, as the Python stage does */

typedef struct {
    unsigned char sep, nv, space;
    unsigned char below; /* both separators lie below it */
    const unsigned char *wanted[W_COUNT];
    Py_ssize_t wanted_len[W_COUNT];
    const unsigned char *aside[MAX_ASIDE];
    Py_ssize_t aside_len[MAX_ASIDE];
    int n_aside;
    Py_ssize_t reserved, end_len, digits, nv_from_end;
    int64_t weight[16];
} Spec;

static int read_spec(PyObject *spec, Spec *s)
{
    PyObject *wanted, *aside, *weights;
    if (!PyArg_ParseTuple(spec, "bbbO!O!nnnnO!", &s->sep, &s->nv, &s->space, &PyTuple_Type, &wanted,
                          &PyTuple_Type, &aside, &s->reserved, &s->end_len, &s->digits, &s->nv_from_end,
                          &PyTuple_Type, &weights))
        return -1;
    if (PyTuple_GET_SIZE(wanted) != W_COUNT || PyTuple_GET_SIZE(aside) > MAX_ASIDE ||
        s->digits < 1 || s->digits > 16 || PyTuple_GET_SIZE(weights) != s->digits ||
        s->reserved < 1 || s->end_len < 1 || s->nv_from_end < 1 || s->end_len > s->reserved ||
        s->nv_from_end > s->reserved) {
        PyErr_SetString(PyExc_ValueError, "property_columns: a spec this kernel does not know");
        return -1;
    }
    for (int k = 0; k < W_COUNT; k++) {
        PyObject *b = PyTuple_GET_ITEM(wanted, k);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) == 0) {
            PyErr_SetString(PyExc_TypeError, "property_columns: names are bytes");
            return -1;
        }
        s->wanted[k] = (const unsigned char *)PyBytes_AS_STRING(b);
        s->wanted_len[k] = PyBytes_GET_SIZE(b);
    }
    s->below = (unsigned char)((s->sep > s->nv ? s->sep : s->nv) + 1);
    if (s->below > 0x80) {
        PyErr_SetString(PyExc_ValueError, "property_columns: separators not ASCII");
        return -1;
    }
    s->n_aside = (int)PyTuple_GET_SIZE(aside);
    for (int k = 0; k < s->n_aside; k++) {
        PyObject *b = PyTuple_GET_ITEM(aside, k);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) < HEAD) {
            PyErr_SetString(PyExc_TypeError, "property_columns: aside names are bytes of at least 8");
            return -1;
        }
        s->aside[k] = (const unsigned char *)PyBytes_AS_STRING(b);
        s->aside_len[k] = PyBytes_GET_SIZE(b);
    }
    for (Py_ssize_t k = 0; k < s->digits; k++) {
        s->weight[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(weights, k));
        if (s->weight[k] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* one array argument: 1-D, C-contiguous, of the item size asked; writable when asked */
static int get_array(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->ndim != 1 || view->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "property_columns: %s must be 1-D with items of %zd bytes", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* an item of a record's properties: [start, end), its name-value separator */
typedef struct {
    Py_ssize_t start, nv, end;
} Item;

static int any_wide(const unsigned char *p, Py_ssize_t from, Py_ssize_t to)
{
    for (Py_ssize_t k = from; k < to; k++)
        if (p[k] >= 0x80)
            return 1;
    return 0;
}

/* String.hashCode of ASCII bytes, continued from h (mod 2^32) */
static uint32_t hash_from(uint32_t h, const unsigned char *p, Py_ssize_t from, Py_ssize_t to)
{
    Py_ssize_t k = from;
    for (; k + 4 <= to; k += 4)  /* four bytes a step: 31^4 h + 31^3 b0 + 31^2 b1 + 31 b2 + b3, a shorter chain */
        h = 923521u * h + 29791u * p[k] + 961u * p[k + 1] + 31u * p[k + 2] + p[k + 3];
    for (; k < to; k++)
        h = 31u * h + p[k];
    return h;
}

/* The non-empty pieces of [from, to) between key separators. */
static Py_ssize_t key_pieces(const Spec *s, const unsigned char *p, Py_ssize_t from, Py_ssize_t to)
{
    Py_ssize_t count = 0;
    int inside = 0;
    for (Py_ssize_t k = from; k < to; k++) {
        if (p[k] == s->space)
            inside = 0;
        else if (!inside) {
            inside = 1;
            count++;
        }
    }
    return count;
}

/* An item [i, t) ends (at a separator, or at the record's end e): 1 when it makes its record
 * special, else 0 (a name dispatch reads noted in have). */
static int item_ends(const Spec *s, const unsigned char *p, Py_ssize_t i, Py_ssize_t t, Py_ssize_t e,
                     Py_ssize_t nv, Py_ssize_t nvs, Item *have)
{
    if (t == i)  /* an empty entry: only at the record's end (its trailing separator, or no properties) */
        return t != e;
    if (nvs != 1 || nv == i || nv >= t - 1)  /* one name-value separator, with a name and a value */
        return 1;
    Py_ssize_t name_len = nv - i;
    for (int k = 0; k < s->n_aside; k++)
        if (name_len == s->aside_len[k] && memcmp(p + i, s->aside[k], HEAD) == 0)
            return 1;  /* a batch's INNER_NUM/INNER_BASE, a quarantined record */
    for (int k = 0; k < W_COUNT; k++) {
        if (name_len == s->wanted_len[k] && memcmp(p + i, s->wanted[k], (size_t)name_len) == 0) {
            if (have[k].start >= 0)
                return 1;  /* a duplicate: the last wins, decode_message knows */
            have[k].start = i;
            have[k].nv = nv;
            have[k].end = t;
        }
    }
    return 0;
}

/* a byte the scan must look at: a separator, a name-value separator, a byte not ASCII (0 and the
 * rest below the separators are looked at and passed over) */
#define LOOK(c) ((c) < s->below || (c) >= 0x80)

/* 1: special; 0: plain, with its items; -1: an error set (out of memory) */
static int read_record(const Spec *s, const unsigned char *p, Py_ssize_t a, Py_ssize_t e, Item *have,
                       int64_t *stored)
{
    int wide = 0;
    for (int k = 0; k < W_COUNT; k++)
        have[k].start = -1;
    Py_ssize_t i = a, nv = -1, nvs = 0, k = a;
#define AT(x)                                                   \
    do {                                                        \
        Py_ssize_t at_ = (x);                                   \
        unsigned char c_ = p[at_];                              \
        if (c_ == s->sep) {                                     \
            if (item_ends(s, p, i, at_, e, nv, nvs, have))      \
                return 1;                                       \
            i = at_ + 1;                                        \
            nv = -1;                                            \
            nvs = 0;                                            \
        } else if (c_ == s->nv) {                               \
            if (nvs++ == 0)                                     \
                nv = at_;                                       \
        } else if (c_ >= 0x80)                                  \
            wide = 1;                                           \
    } while (0)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* eight bytes a step: a word with no byte to look at (most) is passed over whole; in one that
     * has, the bytes below s->below or not ASCII are flagged (a borrow may flag a byte after a flagged
     * one too: every flagged byte is read again, none is missed) */
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u, below = ones * s->below;
    for (; k + 8 <= e; k += 8) {
        uint64_t x;
        memcpy(&x, p + k, 8);
        uint64_t m = (((x - below) & ~x) | x) & highs;
        while (m) {
            AT(k + (__builtin_ctzll(m) >> 3));
            m &= m - 1;
        }
    }
#endif
    for (; k < e; k++)
        if (LOOK(p[k]))
            AT(k);
#undef AT
    if (item_ends(s, p, i, e, e, nv, nvs, have))
        return 1;
    if (wide) {  /* fine outside the hashed values, if the whole string is UTF-8 */
        PyObject *text = PyUnicode_DecodeUTF8((const char *)p + a, e - a, "strict");
        if (text == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return -1;
            PyErr_Clear();
            return 1;
        }
        Py_DECREF(text);
        const int hashed[] = {W_TAGS, W_KEYS, W_UNIQ};  /* hashCode runs over UTF-16 units */
        for (int k = 0; k < 3; k++) {
            const Item *it = &have[hashed[k]];
            if (it->start >= 0 && any_wide(p, it->nv + 1, it->end))
                return 1;
        }
    }
    /* the __CRC32# entry: valid only as the record's last bytes, of the reserved shape */
    Py_ssize_t length = e - a;
    const Item *crc = &have[W_CRC];
    int shaped = 0;
    if (crc->start >= 0) {
        shaped = length >= s->reserved && crc->start == e - s->reserved && crc->end == e - s->end_len &&
                 crc->nv + 1 + s->digits <= e;
        int64_t value = 0;
        for (Py_ssize_t k = 0; shaped && k < s->digits; k++) {
            unsigned char c = p[crc->nv + 1 + k];
            if (c < '0' || c > '9')
                shaped = 0;
            else
                value += (int64_t)(c - '0') * s->weight[k];
        }
        if (!shaped)
            return 1;
        *stored = value;
    } else
        *stored = -1;
    /* a trailing entry shaped like __CRC32# that is not one */
    if (!shaped && length >= s->reserved && p[e - s->end_len] == s->sep && p[e - s->nv_from_end] == s->nv)
        return 1;
    return 0;
}

static PyObject *property_columns(PyObject *self, PyObject *args)
{
    PyObject *o_buf, *o_at, *o_end, *o_special, *o_indexed, *o_topic_hash, *o_tags, *o_crc, *o_key_record,
        *o_key_hash, *o_spec;
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO!n", &o_buf, &o_at, &o_end, &o_special, &o_indexed, &o_topic_hash,
                          &o_tags, &o_crc, &o_key_record, &o_key_hash, &PyTuple_Type, &o_spec, &first))
        return NULL;
    Spec spec;
    if (read_spec(o_spec, &spec) < 0)
        return NULL;
    Py_buffer views[11];
    int got = 0;
    PyObject *result = NULL;
    struct { PyObject *obj; Py_ssize_t itemsize; int writable; const char *what; } want[] = {
        {o_at, 8, 0, "properties_at"}, {o_end, 8, 0, "end"}, {o_special, 1, 1, "special"},
        {o_indexed, 1, 0, "indexed"}, {o_topic_hash, 4, 0, "topic_hash"}, {o_tags, 8, 1, "tags_code"},
        {o_crc, 8, 1, "crc_stored"}, {o_key_record, 8, 1, "key_record"}, {o_key_hash, 4, 1, "key_hash"},
    };
    if (PyObject_GetBuffer(o_buf, &views[0], PyBUF_SIMPLE) < 0)
        return NULL;
    got = 1;
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++, got++)
        if (get_array(want[k].obj, &views[got], want[k].itemsize, want[k].writable, want[k].what) < 0)
            goto done;
    const unsigned char *p = views[0].buf;
    Py_ssize_t size = views[0].len;
    const int64_t *at = views[1].buf, *end = views[2].buf;
    unsigned char *special = views[3].buf;
    const unsigned char *indexed = views[4].buf;
    const uint32_t *topic_hash = views[5].buf;
    int64_t *tags = views[6].buf, *crc_stored = views[7].buf, *key_record = views[8].buf;
    uint32_t *key_hash = views[9].buf;
    Py_ssize_t n = views[1].len / 8, cap = views[8].len / 8;
    if (views[2].len / 8 != n || views[3].len != n || views[4].len != n || views[5].len / 4 != n ||
        views[6].len / 8 != n || views[7].len / 8 != n || views[9].len / 4 != cap || first < 0 || first > n) {
        PyErr_SetString(PyExc_ValueError, "property_columns: arrays of different lengths");
        goto done;
    }
    for (Py_ssize_t r = first; r < n; r++)  /* every record inside the buffer, or none is read */
        if (at[r] < 0 || at[r] > end[r] || end[r] > size) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    Py_ssize_t keys = 0, r = first;
    for (; r < n; r++) {
        if (r + PREFETCH < n) {  /* records lie a message apart: each one's properties is a cache miss, started early */
            __builtin_prefetch(p + at[r + PREFETCH]);
            if (end[r + PREFETCH] - at[r + PREFETCH] > 64)
                __builtin_prefetch(p + at[r + PREFETCH] + 64);
        }
        tags[r] = 0;
        crc_stored[r] = -1;
        if (special[r])
            continue;
        Item have[W_COUNT];
        int64_t stored;
        int verdict = read_record(&spec, p, (Py_ssize_t)at[r], (Py_ssize_t)end[r], have, &stored);
        if (verdict < 0)
            goto done;
        if (verdict) {
            special[r] = 1;
            continue;
        }
        crc_stored[r] = stored;
        const Item *tag = &have[W_TAGS];
        if (tag->start >= 0) {  /* tagsString2tagsCode: String.hashCode, a signed int */
            uint32_t h = hash_from(0, p, tag->nv + 1, tag->end);
            tags[r] = h >= 0x80000000u ? (int64_t)h - ((int64_t)1 << 32) : (int64_t)h;
        }
        if (!indexed[r])
            continue;
        /* IndexService.buildIndex's keys: topic#UNIQ_KEY, then each non-empty key of KEYS */
        const Item *uniq = &have[W_UNIQ], *kv = &have[W_KEYS];
        Py_ssize_t need = (uniq->start >= 0) + (kv->start >= 0 ? key_pieces(&spec, p, kv->nv + 1, kv->end) : 0);
        if (keys + need > cap)
            break;  /* the caller goes on from r with more room */
        if (uniq->start >= 0) {
            key_record[keys] = r;
            key_hash[keys++] = hash_from(topic_hash[r], p, uniq->nv + 1, uniq->end);
        }
        if (kv->start >= 0) {
            Py_ssize_t k = kv->nv + 1;
            while (k < kv->end) {
                if (p[k] == spec.space) {
                    k++;
                    continue;
                }
                Py_ssize_t piece = k;
                while (k < kv->end && p[k] != spec.space)
                    k++;
                key_record[keys] = r;
                key_hash[keys++] = hash_from(topic_hash[r], p, piece, k);
            }
        }
    }
    result = Py_BuildValue("nn", r, keys);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&views[k]);
    return result;
}

/* The first record not special, when every record not special names the same topic bytes as it; -1
 * otherwise (none, or two topics: the caller sorts them out). */
static PyObject *same_topic(PyObject *self, PyObject *args)
{
    PyObject *o_buf, *o_at, *o_end, *o_special;
    if (!PyArg_ParseTuple(args, "OOOO", &o_buf, &o_at, &o_end, &o_special))
        return NULL;
    Py_buffer views[4];
    int got = 0;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(o_buf, &views[0], PyBUF_SIMPLE) < 0)
        return NULL;
    got = 1;
    if (get_array(o_at, &views[1], 8, 0, "topic_at") < 0)
        goto done;
    got = 2;
    if (get_array(o_end, &views[2], 8, 0, "topic_end") < 0)
        goto done;
    got = 3;
    if (get_array(o_special, &views[3], 1, 0, "special") < 0)
        goto done;
    got = 4;
    const unsigned char *p = views[0].buf, *special = views[3].buf;
    const int64_t *at = views[1].buf, *end = views[2].buf;
    Py_ssize_t n = views[1].len / 8, size = views[0].len, first = -1;
    if (views[2].len / 8 != n || views[3].len != n) {
        PyErr_SetString(PyExc_ValueError, "same_topic: arrays of different lengths");
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        if (special[r])
            continue;
        if (at[r] < 0 || at[r] > end[r] || end[r] > size) {  /* outside the buffer: not read */
            first = -1;
            break;
        }
        if (first < 0) {
            first = r;
            continue;
        }
        if (end[r] - at[r] != end[first] - at[first] ||
            memcmp(p + at[r], p + at[first], (size_t)(end[r] - at[r])) != 0) {
            first = -1;
            break;
        }
    }
    result = PyLong_FromSsize_t(first);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&views[k]);
    return result;
}

PyMethodDef rmq_columns_methods[] = {
    {"same_topic", same_topic, METH_VARARGS,
     "same_topic(buf, topic_at, topic_end, special) -> the first record not special when every record not special "
     "names the same topic bytes, else -1"},
    {"property_columns", property_columns, METH_VARARGS,
     "property_columns(buf, properties_at, end, special, indexed, topic_hash, tags_code, crc_stored, key_record, "
     "key_hash, spec, first) -> (next record, keys written), or None (declined: take the Python stages).\n"
     "Records from first on: special ones are skipped, the others read; a record the Python stages make special "
     "is marked in special; of a plain one, tags_code and crc_stored (the __CRC32# digits' value, -1 without) "
     "are written and, when indexed, its index keys (record, String.hashCode of topic#key continued from "
     "topic_hash) appended to key_record/key_hash; stops early at a record whose keys do not fit."},
    {NULL, NULL, 0, NULL},
};
