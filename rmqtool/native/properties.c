/* MessageDecoder.string2messageProperties for the common string: the one C reading of a
 * record's properties, which every native part that needs them calls.
 *
 * The common string: valid UTF-8, every entry exactly one "name \x01 value" with neither empty,
 * entries joined by \x02, at most one trailing \x02 (5.x writes it). Any other string is
 * declined, and the caller takes formats/properties.bytes_to_properties, which reads it
 * as the broker's loop does. The separators come from formats/properties.py
 * (set_separators), never written here. */
#include "kernel.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static unsigned char property_separator = 0, name_value_separator = 0;

/* The separators among p[0:16] (either kind, a bit a byte) and, OR-ed into *high, whether a
 * byte is not ASCII: SSE2 where the compiler has it (every x86-64), else a byte loop. */
static inline unsigned block_separators(const unsigned char *p, unsigned *high)
{
#if defined(__SSE2__)
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    *high |= (unsigned)_mm_movemask_epi8(v);
    const __m128i either = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)property_separator)),
                                        _mm_cmpeq_epi8(v, _mm_set1_epi8((char)name_value_separator)));
    return (unsigned)_mm_movemask_epi8(either);
#else
    unsigned mask = 0;
    for (int k = 0; k < 16; k++) {
        *high |= p[k] & 0x80;
        mask |= (unsigned)(p[k] == property_separator || p[k] == name_value_separator) << k;
    }
    return mask;
#endif
}

int rmq_properties_spans(const unsigned char *p, Py_ssize_t n, rmq_property_span *out, int max, int *ascii)
{
    *ascii = 1;
    if (property_separator == 0)
        return -1;  /* set_separators not called: decline */
    if (n == 0)
        return 0;
    /* one pass over the separators' positions (16 bytes a step), the ASCII check beside it */
    const Py_ssize_t end = p[n - 1] == property_separator ? n - 1 : n;  /* at most one trailing separator */
    unsigned high = 0;
    int count = 0, declined = 0;
    Py_ssize_t name_at = 0, nv = -1;
    for (Py_ssize_t at = 0; at < n; at += 16) {
        unsigned mask;
        if (n - at >= 16) {
            mask = block_separators(p + at, &high);
        } else {  /* the last bytes, copied into a block of zeros (which are not ASCII's concern) */
            unsigned char tail[16] = {0};
            memcpy(tail, p + at, (size_t)(n - at));
            mask = block_separators(tail, &high) & ((1u << (n - at)) - 1);
        }
        for (; mask != 0 && !declined; mask &= mask - 1) {
            const Py_ssize_t k = at + __builtin_ctz(mask);
            if (k >= end)
                break;  /* the trailing separator */
            if (p[k] == name_value_separator) {
                declined = nv >= 0;  /* two in an entry: Java's split gives three items */
                nv = k;
                continue;
            }
            /* an entry ends at k: it needs its separator, a name and a value */
            if (nv <= name_at || nv + 1 >= k || count >= max) {
                declined = 1;
                break;
            }
            out[count] = (rmq_property_span){name_at, nv - name_at, nv + 1, k - nv - 1};
            count++;
            name_at = k + 1;  /* an entry must follow the separator */
            nv = -1;
        }
    }
    *ascii = high == 0;
    if (declined || nv <= name_at || nv + 1 >= end || count >= max)
        return -1;  /* the last entry: no separator, or an empty name or value (and an empty entry) */
    out[count] = (rmq_property_span){name_at, nv - name_at, nv + 1, end - nv - 1};
    return count + 1;
}

/* The names (and each one's last value) of the last strings read, by entry: a store's
 * messages mostly carry the same names in the same order (UNIQ_KEY, CLUSTER, TAGS, KEYS)
 * and some the same values (CLUSTER), so those come out of here rather than decoded again.
 * ASCII strings only; the names interned (their hash kept, as Python's own literals). */
static PyObject *cached_name[RMQ_MAX_PROPERTIES], *cached_value[RMQ_MAX_PROPERTIES];

/* a[0:n] == b[0:n], 8 bytes a step: names and values are short, a call to memcmp costs more */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t n)
{
    uint64_t x, y;
    for (; n >= 8; a += 8, b += 8, n -= 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
    }
    for (; n > 0; n--)
        if (*a++ != *b++)
            return 0;
    return 1;
}

/* p[0:n] (ASCII) as a str: *cache when it holds these characters, else a new one put there */
static inline PyObject *ascii_str(const unsigned char *p, Py_ssize_t n, PyObject **cache, int intern)
{
    PyObject *s = *cache;
    if (s != NULL && PyUnicode_GET_LENGTH(s) == n && same_bytes(PyUnicode_1BYTE_DATA(s), p, n))
        return Py_NewRef(s);
    s = PyUnicode_New(n, 127);
    if (s == NULL)
        return NULL;
    memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    if (intern)
        PyUnicode_InternInPlace(&s);
    Py_XSETREF(*cache, Py_NewRef(s));
    return s;
}

PyObject *rmq_properties_dict(const unsigned char *p, Py_ssize_t n)
{
    rmq_property_span spans[RMQ_MAX_PROPERTIES];
    int ascii;
    int count = rmq_properties_spans(p, n, spans, RMQ_MAX_PROPERTIES, &ascii);
    if (count < 0)
        return NULL;
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    for (int k = 0; k < count; k++) {
        const unsigned char *name_p = p + spans[k].name_at, *value_p = p + spans[k].value_at;
        PyObject *name, *value;
        if (ascii) {  /* every byte below 0x80: the characters are the bytes */
            name = ascii_str(name_p, spans[k].name_len, &cached_name[k], 1);
            value = name == NULL ? NULL : ascii_str(value_p, spans[k].value_len, &cached_value[k], 0);
        } else {
            /* the separators are ASCII, so no UTF-8 sequence spans them: the entries decode alone
             * as the whole string does, and an invalid string has an invalid entry */
            name = PyUnicode_DecodeUTF8((const char *)name_p, spans[k].name_len, NULL);
            value = name == NULL ? NULL : PyUnicode_DecodeUTF8((const char *)value_p, spans[k].value_len, NULL);
        }
        if (value == NULL || PyDict_SetItem(dict, name, value) < 0) {
            Py_XDECREF(name);
            Py_XDECREF(value);
            Py_DECREF(dict);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                PyErr_Clear();  /* not UTF-8, declined: Java's replacement characters are the Python reading's */
            return NULL;
        }
        Py_DECREF(name);
        Py_DECREF(value);
    }
    return dict;
}

static PyObject *properties_dict(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *dict = rmq_properties_dict(view.buf, view.len);
    PyBuffer_Release(&view);
    if (dict == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return dict;
}

static PyObject *set_separators(PyObject *self, PyObject *args)
{
    unsigned char property, name_value;
    if (!PyArg_ParseTuple(args, "bb", &property, &name_value))
        return NULL;
    property_separator = property;
    name_value_separator = name_value;
    Py_RETURN_NONE;
}

PyMethodDef rmq_properties_methods[] = {
    {"properties_dict", properties_dict, METH_O,
     "properties_dict(raw) -> dict, or None when raw is not the common string (take the Python reading)"},
    {"set_separators", set_separators, METH_VARARGS,
     "set_separators(property_separator, name_value_separator): from formats/properties.py, once at import"},
    {NULL, NULL, 0, NULL},
};
