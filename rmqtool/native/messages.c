/* Message objects of a window's clean records (the full decode): the C copy of
 * store/message.py build_messages' loop.
 *
 * set_message_layout (once, from message.py) passes the Message class, the member
 * descriptors of its slots and the header's fields (position in the record, integer kind
 * and width, or a byte string's length), all derived from formats/ in Python. messages()
 * then allocates each Message as object.__new__ does (tp_alloc) and fills its slots
 * directly, as the slot descriptors' setters would. It declines (returns None, nothing
 * appended) whatever it was not set up for or whose columns do not lie inside the buffer;
 * build_messages' Python loop then does it. */
#include "kernel.h"
#include <structmember.h>

/* the slots filled from the record's columns, in the order set_message_layout passes them */
enum {
    S_COMMIT_LOG_OFFSET, S_BODY, S_TOPIC, S_PROPERTIES_RAW, S_PROPERTIES, S_PROPERTIES_UTF8_OK, S_PATH,
    S_POSITION, S_BODY_CRC_OK, S_PROPERTY_CRC_OK, S_TOPIC_UTF8_OK, N_FIXED
};

/* the columns of a CleanRecords, in the order messages() takes them */
enum { C_POSITION, C_END, C_HOSTS, C_BODY_AT, C_BODY_END, C_TOPIC_AT, C_TOPIC_END, C_PROPERTIES_AT, N_COLUMNS };

enum { K_SIGNED, K_UNSIGNED, K_BYTES };

#define N_HOSTS 4 /* MessageHosts' variants, indexed by (sysFlag >> 4) & 3 */
#define MAX_FIELDS 32

typedef struct {
    Py_ssize_t at;   /* from the record's start */
    int kind, size;  /* K_*; width in bytes (1, 2, 4, 8 for integers) */
    int op;          /* how it is read: one of OP_* (kind and width joined) */
    Py_ssize_t slot; /* the slot's offset in the object */
} field_t;

/* a field's reading: K_BYTES, or an integer's kind and width */
#define OP(kind, size) ((kind) * 16 + (size))
enum { OP_BYTES = OP(K_BYTES, 0), OP_S1 = OP(K_SIGNED, 1), OP_S2 = OP(K_SIGNED, 2), OP_S4 = OP(K_SIGNED, 4),
       OP_S8 = OP(K_SIGNED, 8), OP_U1 = OP(K_UNSIGNED, 1), OP_U2 = OP(K_UNSIGNED, 2), OP_U4 = OP(K_UNSIGNED, 4),
       OP_U8 = OP(K_UNSIGNED, 8) };

static PyTypeObject *message_type = NULL; /* NULL: not set up, every call declines */
static PyObject *native_module = NULL;   /* rmqtool.native: its kernel attribute read at call time */
static PyObject *native_dict = NULL;     /* ... from its namespace (a dict lookup, not a getattr a message) */
static PyObject *read_properties = NULL; /* Message.properties' Python getter */
static PyObject *kernel_name = NULL;     /* "kernel", interned */
static Py_ssize_t fixed_slot[N_FIXED];
static field_t fields[N_HOSTS][MAX_FIELDS]; /* the fields Message keeps (a slot each), by hosts variant */
static int n_fields[N_HOSTS];
static Py_ssize_t header_size[N_HOSTS];

/* The offset of a writable object slot of ``type`` from its member descriptor; -1 with an error set. */
static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *descr)
{
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type) || PyDescr_TYPE(descr) != type) {
        PyErr_SetString(PyExc_TypeError, "set_message_layout: not a slot of the Message class");
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY) || member->offset < (Py_ssize_t)sizeof(PyObject)
        || member->offset > type->tp_basicsize - (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_SetString(PyExc_TypeError, "set_message_layout: a slot that is not a plain writable object slot");
        return -1;
    }
    return member->offset;
}

/* set_message_layout(cls, fixed, headers, native, read_properties): fixed is the N_FIXED slots'
 * descriptors; headers, for each hosts variant, (header size, ((at, kind, size, descriptor or
 * None), ...)); native the rmqtool.native module; read_properties Message.properties' Python
 * getter (message_properties' fallback). */
static PyObject *set_message_layout(PyObject *self, PyObject *args)
{
    PyObject *cls, *fixed, *headers, *native, *reader;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O", &PyType_Type, &cls, &PyTuple_Type, &fixed, &PyTuple_Type, &headers,
                          &PyModule_Type, &native, &reader))
        return NULL;
    if (!PyCallable_Check(reader)) {
        PyErr_SetString(PyExc_TypeError, "set_message_layout: read_properties must be callable");
        return NULL;
    }
    if (kernel_name == NULL && (kernel_name = PyUnicode_InternFromString("kernel")) == NULL)
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_itemsize != 0 || type->tp_alloc == NULL || type->tp_new != PyBaseObject_Type.tp_new
        || type->tp_dictoffset != 0 || PyTuple_GET_SIZE(fixed) != N_FIXED || PyTuple_GET_SIZE(headers) != N_HOSTS) {
        PyErr_SetString(PyExc_TypeError, "set_message_layout: not a layout this kernel can fill");
        return NULL;
    }
    Py_CLEAR(message_type); /* declines while being set */
    for (int s = 0; s < N_FIXED; s++)
        if ((fixed_slot[s] = slot_offset(type, PyTuple_GET_ITEM(fixed, s))) < 0)
            return NULL;
    for (int h = 0; h < N_HOSTS; h++) {
        PyObject *header = PyTuple_GET_ITEM(headers, h), *specs;
        Py_ssize_t size;
        if (!PyArg_ParseTuple(header, "nO!", &size, &PyTuple_Type, &specs))
            return NULL;
        Py_ssize_t n = PyTuple_GET_SIZE(specs);
        if (n > MAX_FIELDS || size <= 0) {
            PyErr_SetString(PyExc_ValueError, "set_message_layout: header out of range");
            return NULL;
        }
        int kept = 0;
        for (Py_ssize_t f = 0; f < n; f++) {
            field_t *field = &fields[h][kept];
            PyObject *descr;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(specs, f), "niiO", &field->at, &field->kind, &field->size, &descr))
                return NULL;
            int width_ok = field->kind == K_BYTES ? field->size >= 0
                           : (field->kind == K_SIGNED || field->kind == K_UNSIGNED)
                                 && (field->size == 1 || field->size == 2 || field->size == 4 || field->size == 8);
            if (!width_ok || field->at < 0 || field->at > size - field->size) {
                PyErr_SetString(PyExc_ValueError, "set_message_layout: a field out of range");
                return NULL;
            }
            if (descr == Py_None)
                continue; /* a field Message does not keep (bodyLength) */
            if ((field->slot = slot_offset(type, descr)) < 0)
                return NULL;
            field->op = field->kind == K_BYTES ? OP_BYTES : OP(field->kind, field->size);
            kept++;
        }
        n_fields[h] = kept;
        header_size[h] = size;
    }
    Py_XSETREF(native_module, Py_NewRef(native));
    Py_XSETREF(native_dict, Py_NewRef(PyModule_GetDict(native)));
    Py_XSETREF(read_properties, Py_NewRef(reader));
    Py_INCREF(type);
    message_type = type;
    Py_RETURN_NONE;
}

/* Message.properties' getter: the dict read on first access, as the Python getter does (the
 * common string by rmq_properties_dict while rmqtool.native.kernel is set; anything else by
 * the Python getter), without a Python frame for each message. */
static PyObject *message_properties(PyObject *self, PyObject *msg)
{
    if (message_type == NULL || !PyObject_TypeCheck(msg, message_type)) {
        PyErr_SetString(PyExc_TypeError, "message_properties: not a Message");
        return NULL;
    }
    PyObject **slot = (PyObject **)((char *)msg + fixed_slot[S_PROPERTIES]);
    if (*slot == NULL) {
        PyErr_SetString(PyExc_AttributeError, "'Message' object has no attribute '_properties'");
        return NULL;
    }
    if (*slot != Py_None)
        return Py_NewRef(*slot);
    PyObject *kernel = PyDict_GetItemWithError(native_dict, kernel_name); /* borrowed */
    if (kernel == NULL && !PyErr_Occurred())
        kernel = PyObject_GetAttr(native_module, kernel_name); /* not in its namespace: its getattr says */
    else
        Py_XINCREF(kernel);
    if (kernel == NULL)
        return NULL;
    int on = kernel != Py_None;
    Py_DECREF(kernel);
    PyObject *raw = *(PyObject **)((char *)msg + fixed_slot[S_PROPERTIES_RAW]);
    if (on && raw != NULL && PyBytes_CheckExact(raw)) {
        PyObject *dict = rmq_properties_dict((const unsigned char *)PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw));
        if (dict != NULL) {
            Py_XSETREF(*(PyObject **)((char *)msg + fixed_slot[S_PROPERTIES_UTF8_OK]), Py_NewRef(Py_True));
            Py_XSETREF(*slot, Py_NewRef(dict));
            return dict;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_CallOneArg(read_properties, msg); /* declined, or the kernel off: the Python reading */
}

/* a 1-d contiguous column of int64 (want_bool 0) or bool (want_bool 1); 0 when it is not one */
static int take_column(PyObject *obj, Py_buffer *view, int want_bool)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        view->obj = NULL;
        return 0;
    }
    const char *f = view->format;
    if (f[0] == '@' || f[0] == '=' || (f[0] == '<' && PY_LITTLE_ENDIAN) || (f[0] == '>' && PY_BIG_ENDIAN))
        f++;
    int ok = view->ndim == 1 && (want_bool ? view->itemsize == 1 && f[0] == '?' && f[1] == 0
                                           : view->itemsize == 8 && (f[0] == 'q' || f[0] == 'l') && f[1] == 0);
    if (!ok) {
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    return ok;
}

static inline int64_t column_at(const Py_buffer *view, Py_ssize_t k)
{
    int64_t v;
    memcpy(&v, (const char *)view->buf + k * 8, 8);
    return v;
}

static inline void set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    *(PyObject **)((char *)obj + offset) = value; /* a fresh object's slot: NULL before */
}

/* The topic of the raw bytes as build_messages finds it: the topic cache (a dict, bytes to
 * str), else its decode function (which caches what decodes). The last few are remembered
 * for the call: a window's records mostly share a few topics. */
#define TOPIC_MEMO 8
typedef struct {
    PyObject *raw[TOPIC_MEMO], *topic[TOPIC_MEMO], *ok[TOPIC_MEMO]; /* strong references, or NULL */
    int next;                                                        /* the entry replaced next */
} topic_memo_t;

static void topic_memo_clear(topic_memo_t *memo)
{
    for (int e = 0; e < TOPIC_MEMO; e++) {
        Py_CLEAR(memo->raw[e]);
        Py_CLEAR(memo->topic[e]);
        Py_CLEAR(memo->ok[e]);
    }
}

/* the memo entry holding the topic of p[0:n]; -1 with an error set */
static int topic_of(topic_memo_t *memo, const unsigned char *p, Py_ssize_t n, PyObject *topics, PyObject *decode)
{
    for (int e = 0; e < TOPIC_MEMO && memo->raw[e] != NULL; e++)
        if (PyBytes_GET_SIZE(memo->raw[e]) == n && memcmp(PyBytes_AS_STRING(memo->raw[e]), p, n) == 0)
            return e;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, n);
    if (raw == NULL)
        return -1;
    PyObject *topic = PyDict_GetItemWithError(topics, raw), *ok = Py_True;
    if (topic != NULL) {
        Py_INCREF(topic);
        Py_INCREF(ok);
    } else {
        if (PyErr_Occurred()) {
            Py_DECREF(raw);
            return -1;
        }
        PyObject *pair = PyObject_CallOneArg(decode, raw);
        if (pair == NULL) {
            Py_DECREF(raw);
            return -1;
        }
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "messages: the topic decoder must return (topic, utf8_ok)");
            Py_DECREF(pair);
            Py_DECREF(raw);
            return -1;
        }
        topic = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
        ok = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
        Py_DECREF(pair);
    }
    int e = memo->next;
    memo->next = (e + 1) % TOPIC_MEMO;
    Py_XSETREF(memo->raw[e], raw);
    Py_XSETREF(memo->topic[e], topic);
    Py_XSETREF(memo->ok[e], ok);
    return e;
}

/* A header field's value, or the previous record's object when its bytes are the same (ports,
 * hosts, flags and sizes repeat from record to record: no new object for them); by hosts variant
 * and field, so a remembered value is always of its field's kind and width */
typedef struct {
    PyObject *value[N_HOSTS][MAX_FIELDS]; /* strong references, or NULL */
    int64_t number[N_HOSTS][MAX_FIELDS];  /* an integer field's value (its bits, for an unsigned 8-byte one) */
} field_memo_t;

/* the field's object; offset_obj (the record's commit log offset's int) for a signed 8-byte field
 * holding that offset */
static inline PyObject *field_of(field_memo_t *memo, int h, int f, const unsigned char *p, const field_t *field,
                                 int64_t offset, PyObject *offset_obj)
{
    PyObject **kept = &memo->value[h][f], *value;
    int64_t number;
    switch (field->op) {
    case OP_BYTES:
        if (*kept != NULL && memcmp(PyBytes_AS_STRING(*kept), p, (size_t)field->size) == 0)
            return Py_NewRef(*kept);
        value = PyBytes_FromStringAndSize((const char *)p, field->size);
        if (value != NULL)
            Py_XSETREF(*kept, Py_NewRef(value));
        return value;
    case OP_S1: number = (signed char)p[0]; break;
    case OP_U1: number = p[0]; break;
    case OP_S2: number = rmq_i16(p); break;
    case OP_U2: number = (uint16_t)rmq_i16(p); break;
    case OP_S4: number = rmq_i32(p); break;
    case OP_U4: number = (uint32_t)rmq_i32(p); break;
    case OP_S8:
        number = rmq_i64(p);
        if (number == offset)
            return Py_NewRef(offset_obj);
        break;
    default: number = rmq_i64(p); break; /* OP_U8: its bits */
    }
    if (*kept != NULL && memo->number[h][f] == number)
        return Py_NewRef(*kept);
    value = field->op == OP_U8 ? PyLong_FromUnsignedLongLong((uint64_t)number) : PyLong_FromLongLong(number);
    if (value != NULL) {
        Py_XSETREF(*kept, Py_NewRef(value));
        memo->number[h][f] = number;
    }
    return value;
}

/* messages(buf, columns, offset0, position0, path, crc, out, topics, decode_topic):
 * columns are CleanRecords' position, end, hosts, body_at, body_end, topic_at, topic_end,
 * properties_at (int64); crc is None (not checked: verdicts None) or CrcVerdicts' body_ok,
 * has_entry, entry_ok (bool). Appends a Message a record to out; returns how many, or None
 * when declined (nothing appended). Properties stay unread (message_properties reads them
 * on first access): a scan that never asks pays nothing for them. */
static PyObject *messages(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *columns, *path, *crc, *out, *topics, *decode;
    long long offset0, position0;
    if (!PyArg_ParseTuple(args, "OO!LLOOO!O!O", &buf_obj, &PyTuple_Type, &columns, &offset0, &position0, &path,
                          &crc, &PyList_Type, &out, &PyDict_Type, &topics, &decode))
        return NULL;
    if (message_type == NULL || PyTuple_GET_SIZE(columns) != N_COLUMNS
        || (crc != Py_None && (!PyTuple_Check(crc) || PyTuple_GET_SIZE(crc) != 3)))
        Py_RETURN_NONE;
    int n_crc = crc == Py_None ? 0 : 3;
    Py_buffer buf, col[N_COLUMNS], verdict[3];
    int taken = 0, taken_crc = 0;
    PyObject *result = NULL;
    topic_memo_t memo = {{NULL}, {NULL}, {NULL}, 0};
    field_memo_t fmemo;
    memset(&fmemo, 0, sizeof(fmemo));
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    for (; taken < N_COLUMNS; taken++)
        if (!take_column(PyTuple_GET_ITEM(columns, taken), &col[taken], 0))
            goto declined;
    for (; taken_crc < n_crc; taken_crc++)
        if (!take_column(PyTuple_GET_ITEM(crc, taken_crc), &verdict[taken_crc], 1))
            goto declined;
    Py_ssize_t n = col[0].len / 8;
    for (int c = 1; c < N_COLUMNS; c++)
        if (col[c].len / 8 != n)
            goto declined;
    for (int c = 0; c < n_crc; c++)
        if (verdict[c].len != n)
            goto declined;
    /* every record's parts in order inside the buffer, its header whole: else decline */
    const unsigned char *base = buf.buf;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t pos = column_at(&col[C_POSITION], k), end = column_at(&col[C_END], k);
        int64_t hosts = column_at(&col[C_HOSTS], k), sum;
        if (pos < 0 || end > buf.len || hosts < 0 || hosts >= N_HOSTS || pos > end - header_size[hosts]
            || __builtin_add_overflow(offset0, pos, &sum) || __builtin_add_overflow(position0, pos, &sum))
            goto declined;
        int64_t at = pos;
        for (int c = C_BODY_AT; c <= C_PROPERTIES_AT; c++) {
            int64_t next = column_at(&col[c], k);
            if (next < at || next > end)
                goto declined;
            at = next;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t pos = column_at(&col[C_POSITION], k), end = column_at(&col[C_END], k);
        int hosts = (int)column_at(&col[C_HOSTS], k);
        int64_t body_at = column_at(&col[C_BODY_AT], k), body_end = column_at(&col[C_BODY_END], k);
        int64_t topic_at = column_at(&col[C_TOPIC_AT], k), topic_end = column_at(&col[C_TOPIC_END], k);
        int64_t props_at = column_at(&col[C_PROPERTIES_AT], k);
        const unsigned char *record = base + pos;
        if (k + 1 < n) { /* the next record's header, topic and properties on their way to the cache (its
                          * body is read in order, which the hardware's own prefetch follows) */
            __builtin_prefetch(base + column_at(&col[C_POSITION], k + 1));
            __builtin_prefetch(base + column_at(&col[C_TOPIC_AT], k + 1));
            __builtin_prefetch(base + column_at(&col[C_PROPERTIES_AT], k + 1));
        }
        int t = topic_of(&memo, base + topic_at, topic_end - topic_at, topics, decode);
        if (t < 0)
            goto done;
        PyObject *m = message_type->tp_alloc(message_type, 0);
        if (m == NULL)
            goto done;
        /* a Message that cannot be filled is dropped whole: its dealloc clears the slots set */
#define SET_NEW(slot, expr)                  \
    do {                                     \
        PyObject *v_ = (expr);               \
        if (v_ == NULL) {                    \
            Py_DECREF(m);                    \
            goto done;                       \
        }                                    \
        set_slot(m, (slot), v_);             \
    } while (0)
        /* the commit log offset's int, shared by the position when the file starts at offset 0 and by
         * an 8-byte field that holds the same value (physicalOffset, in a record where it should be) */
        const int64_t offset = offset0 + pos;
        PyObject *offset_obj = PyLong_FromLongLong(offset);
        if (offset_obj == NULL) {
            Py_DECREF(m);
            goto done;
        }
        set_slot(m, fixed_slot[S_COMMIT_LOG_OFFSET], offset_obj);
        for (int f = 0; f < n_fields[hosts]; f++) {
            const field_t *field = &fields[hosts][f];
            SET_NEW(field->slot, field_of(&fmemo, hosts, f, record + field->at, field, offset, offset_obj));
        }
        SET_NEW(fixed_slot[S_BODY], PyBytes_FromStringAndSize((const char *)base + body_at, body_end - body_at));
        SET_NEW(fixed_slot[S_PROPERTIES_RAW], PyBytes_FromStringAndSize((const char *)base + props_at, end - props_at));
        if (position0 == offset0)
            set_slot(m, fixed_slot[S_POSITION], Py_NewRef(offset_obj));
        else
            SET_NEW(fixed_slot[S_POSITION], PyLong_FromLongLong(position0 + pos));
#undef SET_NEW
        set_slot(m, fixed_slot[S_TOPIC], Py_NewRef(memo.topic[t]));
        set_slot(m, fixed_slot[S_TOPIC_UTF8_OK], Py_NewRef(memo.ok[t]));
        set_slot(m, fixed_slot[S_PROPERTIES], Py_NewRef(Py_None));
        set_slot(m, fixed_slot[S_PROPERTIES_UTF8_OK], Py_NewRef(Py_None));
        set_slot(m, fixed_slot[S_PATH], Py_NewRef(path));
        if (n_crc) {
            const char *body_ok = verdict[0].buf, *has_entry = verdict[1].buf, *entry_ok = verdict[2].buf;
            set_slot(m, fixed_slot[S_BODY_CRC_OK], Py_NewRef(body_ok[k] ? Py_True : Py_False));
            set_slot(m, fixed_slot[S_PROPERTY_CRC_OK],
                     Py_NewRef(!has_entry[k] ? Py_None : entry_ok[k] ? Py_True : Py_False));
        } else {
            set_slot(m, fixed_slot[S_BODY_CRC_OK], Py_NewRef(Py_None));
            set_slot(m, fixed_slot[S_PROPERTY_CRC_OK], Py_NewRef(Py_None));
        }
        int appended = PyList_Append(out, m);
        Py_DECREF(m);
        if (appended < 0)
            goto done;
    }
    result = PyLong_FromSsize_t(n);
    goto done;
declined:
    result = Py_NewRef(Py_None);
done:
    topic_memo_clear(&memo);
    for (int h = 0; h < N_HOSTS; h++)
        for (int f = 0; f < MAX_FIELDS; f++)
            Py_XDECREF(fmemo.value[h][f]);
    for (int c = 0; c < taken; c++)
        PyBuffer_Release(&col[c]);
    for (int c = 0; c < taken_crc; c++)
        PyBuffer_Release(&verdict[c]);
    PyBuffer_Release(&buf);
    return result;
}

PyMethodDef rmq_messages_methods[] = {
    {"set_message_layout", set_message_layout, METH_VARARGS,
     "set_message_layout(cls, fixed_slots, headers, native, read_properties): the Message class and its "
     "layout, from message.py once"},
    {"message_properties", message_properties, METH_O,
     "message_properties(message) -> dict: Message.properties' getter (set_message_layout's Message)"},
    {"messages", messages, METH_VARARGS,
     "messages(buf, columns, offset0, position0, path, crc, out, topics, decode_topic) -> count appended, "
     "or None when declined (build_messages' Python loop then builds them)"},
    {NULL, NULL, 0, NULL},
};
