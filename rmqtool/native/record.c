/* A clean record's parts as dump's rows (rows.c) and table lines (table.c) read them: the one
 * header layout both take from Python (set_record_layout, derived from formats/), the window's
 * spans and CRC verdicts, and the reading of a record whose row has no finding.
 *
 * Declined (0 from rmq_read_record): spans outside the buffer, a compressed body, a
 * physicalOffset naming another place, a failed CRC, a topic or properties that are not UTF-8,
 * properties that are not the common string, a property name twice. */
#include "kernel.h"
#include <string.h>

rmq_record_layout rmq_layout;

/* 1 when the record is one the parts cover (its row has no finding), its parts in r; 0 when declined */
int rmq_read_record(rmq_record *r, const unsigned char *buf, Py_ssize_t buf_len, const int64_t *s,
                    const unsigned char *v, int64_t offset0, int64_t position0)
{
    const rmq_record_layout *L = &rmq_layout;
    int64_t pos = s[RMQ_S_POS], end = s[RMQ_S_END], kind = s[RMQ_S_HOSTS];
    int64_t body_at = s[RMQ_S_BODY_AT], body_end = s[RMQ_S_BODY_END];
    int64_t topic_at = s[RMQ_S_TOPIC_AT], topic_end = s[RMQ_S_TOPIC_END], props_at = s[RMQ_S_PROPS_AT];
    if (kind < 0 || kind >= RMQ_HOST_KINDS || pos < 0 || end > buf_len || pos + L->header_size[kind] > end
        || body_at < pos || body_end < body_at || body_end > end || topic_at < pos || topic_end < topic_at
        || topic_end > end || props_at < pos || props_at > end || end - pos > 1 << 30)
        return 0;
    if (offset0 < 0 || position0 < 0 || offset0 > INT64_MAX / 2 || position0 > INT64_MAX / 2)
        return 0;
    r->rec = buf + pos;
    r->kind = (int)kind;
    r->offset = offset0 + pos;
    r->position = position0 + pos;
    r->sys_flag = rmq_field(r->rec, r->kind, RMQ_F_SYS_FLAG);
    if (r->sys_flag & L->compressed_flag)
        return 0;  /* body_compression names the codec: the Python row */
    if (rmq_field(r->rec, r->kind, RMQ_F_PHYSICAL_OFFSET) != r->offset)
        return 0;  /* a finding: the Python row, with its finding */
    if (v != NULL && (!v[RMQ_V_BODY_OK] || (v[RMQ_V_HAS_ENTRY] && !v[RMQ_V_ENTRY_OK])))
        return 0;
    r->topic = buf + topic_at;
    r->topic_len = (Py_ssize_t)(topic_end - topic_at);
    r->props = buf + props_at;
    r->props_len = (Py_ssize_t)(end - props_at);
    r->body = buf + body_at;
    r->body_len = (Py_ssize_t)(body_end - body_at);
    r->topic_ascii = rmq_ascii(r->topic, r->topic_len);
    if (!r->topic_ascii && !rmq_utf8(r->topic, r->topic_len))
        return 0;
    r->np = rmq_properties_spans(r->props, r->props_len, r->sp, RMQ_MAX_PROPERTIES, &r->props_ascii);
    if (r->np < 0 || (!r->props_ascii && !rmq_utf8(r->props, r->props_len)))
        return 0;
    r->tags = r->keys = r->uniq = -1;
    for (int a = 0; a < r->np; a++) {
        const unsigned char *name = r->props + r->sp[a].name_at;
        Py_ssize_t len = r->sp[a].name_len;
        for (int b = 0; b < a; b++)
            if (rmq_same(name, len, r->props + r->sp[b].name_at, r->sp[b].name_len))
                return 0;  /* a name twice: the dict keeps the first place and the last value */
        if (rmq_same(name, len, L->tags, L->tags_len))
            r->tags = a;
        else if (rmq_same(name, len, L->keys, L->keys_len))
            r->keys = a;
        else if (rmq_same(name, len, L->uniq, L->uniq_len))
            r->uniq = a;
    }
    return 1;
}

/* a buffer of integers (numpy's int64 is 'l' or 'q', its uint8 'B'), in this machine's order */
static int integer_format(const char *format)
{
    if (format == NULL)
        return 0;
    if (*format == '<' || *format == '=' || *format == '@')
        format++;
    return (format[0] == 'l' || format[0] == 'q' || format[0] == 'B') && format[1] == 0;
}

void rmq_window_release(rmq_window *win)
{
    if (win->have_verdicts)
        PyBuffer_Release(&win->verdicts);
    PyBuffer_Release(&win->spans);
    PyBuffer_Release(&win->buf);
}

int rmq_window_get(rmq_window *win, PyObject *buf_obj, PyObject *spans_obj, PyObject *verdicts_obj)
{
    win->have_verdicts = verdicts_obj != Py_None;
    if (PyObject_GetBuffer(buf_obj, &win->buf, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(spans_obj, &win->spans, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&win->buf);
        return -1;
    }
    if (win->have_verdicts && PyObject_GetBuffer(verdicts_obj, &win->verdicts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&win->spans);
        PyBuffer_Release(&win->buf);
        return -1;
    }
    win->n = win->spans.len / (Py_ssize_t)(RMQ_N_SPANS * sizeof(int64_t));
    if (win->spans.itemsize != (Py_ssize_t)sizeof(int64_t) || !integer_format(win->spans.format)
        || win->spans.len % (Py_ssize_t)(RMQ_N_SPANS * sizeof(int64_t))
        || (win->have_verdicts && (win->verdicts.itemsize != 1 || !integer_format(win->verdicts.format)
                                   || win->verdicts.len != win->n * RMQ_N_VERDICTS))) {
        PyErr_SetString(PyExc_ValueError, "spans must be int64 rows of 8, verdicts uint8 rows of 3");
        rmq_window_release(win);
        return -1;
    }
    return 0;
}

/* set_record_layout(fields, names, key_separator, magic_v2, compressed_flag): fields: per hosts
 * kind (pairs of (offset, size) in RMQ_F_*'s order, header size); names: (TAGS, KEYS, UNIQ_KEY). */
static PyObject *set_record_layout(PyObject *self, PyObject *args)
{
    rmq_record_layout *L = &rmq_layout;
    PyObject *fields, *names;
    unsigned char key_separator;
    unsigned long magic_v2;
    long long compressed_flag;
    if (!PyArg_ParseTuple(args, "O!O!bkL", &PyTuple_Type, &fields, &PyTuple_Type, &names, &key_separator, &magic_v2,
                          &compressed_flag))
        return NULL;
    L->ready = 0;
    if (PyTuple_GET_SIZE(fields) != RMQ_HOST_KINDS || PyTuple_GET_SIZE(names) != 3) {
        PyErr_SetString(PyExc_ValueError, "set_record_layout: wrong counts");
        return NULL;
    }
    for (int h = 0; h < RMQ_HOST_KINDS; h++) {
        PyObject *pairs;
        Py_ssize_t header_size;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, h), "O!n", &PyTuple_Type, &pairs, &header_size))
            return NULL;
        if (PyTuple_GET_SIZE(pairs) != RMQ_N_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "set_record_layout: wrong field count");
            return NULL;
        }
        L->header_size[h] = header_size;
        for (int f = 0; f < RMQ_N_FIELDS; f++) {
            Py_ssize_t at, size;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, f), "nn", &at, &size))
                return NULL;
            if (at < 0 || size < 0 || at + size > header_size) {
                PyErr_SetString(PyExc_ValueError, "set_record_layout: a field outside the header");
                return NULL;
            }
            L->at[h][f] = at;
            L->size[h][f] = size;
        }
    }
    unsigned char *name_to[3] = {L->tags, L->keys, L->uniq};
    Py_ssize_t *name_len[3] = {&L->tags_len, &L->keys_len, &L->uniq_len};
    for (int k = 0; k < 3; k++) {
        const char *name;
        Py_ssize_t len;
        if (!PyArg_Parse(PyTuple_GET_ITEM(names, k), "y#", &name, &len))
            return NULL;
        if (len >= RMQ_NAME_MAX) {
            PyErr_SetString(PyExc_ValueError, "set_record_layout: a name too long");
            return NULL;
        }
        memcpy(name_to[k], name, (size_t)len);
        *name_len[k] = len;
    }
    L->key_separator = key_separator;
    L->magic_v2 = (uint32_t)magic_v2;
    L->compressed_flag = compressed_flag;
    L->ready = 1;
    Py_RETURN_NONE;
}

PyMethodDef rmq_record_methods[] = {
    {"set_record_layout", set_record_layout, METH_VARARGS,
     "set_record_layout(fields, names, key_separator, magic_v2, compressed_flag): the header layout and the "
     "property names rows and table lines read, from Python once"},
    {NULL, NULL, 0, NULL},
};
