/* The append path's per-message work in C: a message's commit log record encoded where it goes,
 * its consume queue unit and its index entries (String.hashCode of topic#key, the hash slot
 * chain, the header), for the common case; anything else is declined (None) before a byte is
 * written, and the Python path (engine/store.py) does what it always does.
 *
 * Every position, width, name and constant comes from Python (engine/append_kernel.py derives
 * them from formats/ and calls set_append_layout once). */
#include "kernel.h"

#include <errno.h>
#include <string.h>
#include <structmember.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    Py_ssize_t pos;
    int width;
} field_t;

/* a record's head fields, in this order, by (sysFlag >> 4) & 3 */
enum { F_TOTAL, F_MAGIC, F_CRC, F_QUEUE_ID, F_FLAG, F_QO, F_PO, F_SYSFLAG, F_BORN_TS, F_HOSTS, F_STORE_TS,
       F_RECONSUME, F_PREPARED, F_BODY_LEN, F_COUNT };
/* the index header's fields, an entry's, a consume queue unit's */
enum { H_BEGIN_TS, H_END_TS, H_BEGIN_PHY, H_END_PHY, H_SLOT_COUNT, H_INDEX_COUNT, H_COUNT };
enum { E_HASH, E_PHY, E_DIFF, E_PREV, E_COUNT };
enum { U_OFFSET, U_SIZE, U_CODE, U_COUNT };

static int layout_set = 0;
static field_t head_fields[4][F_COUNT];
static Py_ssize_t head_size[4];
static int prop_len_width;
static field_t index_header[H_COUNT];
static Py_ssize_t index_header_size;
static int slot_width;
static field_t index_entry[E_COUNT];
static Py_ssize_t entry_size;
static long long invalid_index;
static long long time_diff_max;
static field_t cq_unit[U_COUNT];
static Py_ssize_t cq_unit_size;
static long long crc_mask;
static PyObject *name_delay, *name_tags, *name_keys, *name_uniq; /* property names */
static PyObject *key_separator;                                  /* build_key's topic#key separator */
static PyObject *key_space;                                      /* KEYS' separator */
static PyObject *put_ok;                                         /* PUT_OK */

static PyObject *a_topic, *a_body, *a_flag, *a_properties, *a_properties_string, *a_born_timestamp, *a_born_host,
    *a_store_host, *a_reconsume_times, *a_sys_flag, *a_prepared_transaction_offset, *a_store_timestamp, *a_prop_crc,
    *a_queue_id;
static PyObject *a_last, *a_mm, *a_index_count, *a_index_num, *a_hash_slot_num, *a_begin_timestamp,
    *a_end_timestamp, *a_begin_phy_offset, *a_end_phy_offset, *a_hash_slot_count, *a_entries_written;
static PyObject *a_files, *a_wrote_position, *a_file_from_offset, *a_file_size, *a_first_create_in_queue,
    *a_max_physic_offset, *a_bytes_written, *a_reput_from_offset, *a_logics_msg_timestamp, *a_append_prop_crc, *a_fd, *a_store_host_of_encoder;
static PyObject *a_backed, *a_back, *a_back_slot_pages, *a_slot_pages, *a_slot_span;

static inline void put_be(unsigned char *p, int width, long long value)
{
    uint64_t v = (uint64_t)value;
    switch (width) {
    case 8: {
        uint64_t b = __builtin_bswap64(v);
        memcpy(p, &b, 8);
        return;
    }
    case 4: {
        uint32_t b = __builtin_bswap32((uint32_t)v);
        memcpy(p, &b, 4);
        return;
    }
    case 2:
        p[0] = (unsigned char)(v >> 8);
        p[1] = (unsigned char)v;
        return;
    default:
        p[0] = (unsigned char)v;
    }
}

static inline long long get_be(const unsigned char *p, int width)
{
    switch (width) {
    case 8:
        return (long long)rmq_i64(p);
    case 4:
        return (long long)rmq_i32(p);
    case 2:
        return (long long)rmq_i16(p);
    default:
        return (long long)(signed char)p[0];
    }
}

static int fields_of(PyObject *seq, field_t *out, int n)
{
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_SetString(PyExc_ValueError, "set_append_layout: a field table of the wrong length");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        long long pos, width;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(seq, i), "LL", &pos, &width))
            return -1;
        if (pos < 0 || (width != 1 && width != 2 && width != 4 && width != 8)) {
            PyErr_SetString(PyExc_ValueError, "set_append_layout: a field of no integer width");
            return -1;
        }
        out[i].pos = (Py_ssize_t)pos;
        out[i].width = (int)width;
    }
    return 0;
}

static int intern_into(PyObject **slot, const char *name)
{
    *slot = PyUnicode_InternFromString(name);
    return *slot == NULL ? -1 : 0;
}

static PyObject *set_append_layout(PyObject *self, PyObject *args)
{
    PyObject *heads, *sizes, *ih, *ie, *cu, *names;
    Py_ssize_t ihs, es, cus;
    long long invalid, diff_max, mask;
    int plw, sw;
    PyObject *sep, *space, *ok;
    if (!PyArg_ParseTuple(args, "O!O!iO!niO!nLLO!nLO!UUU", &PyTuple_Type, &heads, &PyTuple_Type, &sizes, &plw,
                          &PyTuple_Type, &ih, &ihs, &sw, &PyTuple_Type, &ie, &es, &invalid, &diff_max, &PyTuple_Type,
                          &cu, &cus, &mask, &PyTuple_Type, &names, &sep, &space, &ok))
        return NULL;
    if (PyTuple_GET_SIZE(heads) != 4 || PyTuple_GET_SIZE(sizes) != 4 || PyTuple_GET_SIZE(names) != 4) {
        PyErr_SetString(PyExc_ValueError, "set_append_layout: four host kinds and four property names");
        return NULL;
    }
    for (int k = 0; k < 4; k++) {
        if (fields_of(PyTuple_GET_ITEM(heads, k), head_fields[k], F_COUNT) < 0)
            return NULL;
        head_size[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, k));
        if (head_size[k] < 0)
            return NULL;
        for (int f = 0; f < F_COUNT; f++)
            if (head_fields[k][f].pos + head_fields[k][f].width > head_size[k]) {
                PyErr_SetString(PyExc_ValueError, "set_append_layout: a field past the head");
                return NULL;
            }
    }
    if (fields_of(ih, index_header, H_COUNT) < 0 || fields_of(ie, index_entry, E_COUNT) < 0 ||
        fields_of(cu, cq_unit, U_COUNT) < 0)
        return NULL;
    if ((plw != 2 && plw != 4) || (sw != 4 && sw != 8)) {
        PyErr_SetString(PyExc_ValueError, "set_append_layout: widths");
        return NULL;
    }
    for (int i = 0; i < 4; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "set_append_layout: property names are str");
            return NULL;
        }
    prop_len_width = plw;
    index_header_size = ihs;
    slot_width = sw;
    entry_size = es;
    invalid_index = invalid;
    time_diff_max = diff_max;
    cq_unit_size = cus;
    crc_mask = mask;
    PyObject *olds[] = {name_delay, name_tags, name_keys, name_uniq, key_separator, key_space, put_ok};
    name_delay = Py_NewRef(PyTuple_GET_ITEM(names, 0));
    name_tags = Py_NewRef(PyTuple_GET_ITEM(names, 1));
    name_keys = Py_NewRef(PyTuple_GET_ITEM(names, 2));
    name_uniq = Py_NewRef(PyTuple_GET_ITEM(names, 3));
    key_separator = Py_NewRef(sep);
    key_space = Py_NewRef(space);
    put_ok = Py_NewRef(ok);
    for (size_t i = 0; i < sizeof(olds) / sizeof(olds[0]); i++)
        Py_XDECREF(olds[i]);
    if (a_topic == NULL) {
        if (intern_into(&a_topic, "topic") || intern_into(&a_body, "body") || intern_into(&a_flag, "flag") ||
            intern_into(&a_properties, "properties") || intern_into(&a_properties_string, "properties_string") ||
            intern_into(&a_born_timestamp, "born_timestamp") || intern_into(&a_born_host, "born_host") ||
            intern_into(&a_store_host, "store_host") || intern_into(&a_reconsume_times, "reconsume_times") ||
            intern_into(&a_sys_flag, "sys_flag") ||
            intern_into(&a_prepared_transaction_offset, "prepared_transaction_offset") ||
            intern_into(&a_store_timestamp, "store_timestamp") || intern_into(&a_prop_crc, "prop_crc") ||
            intern_into(&a_last, "last") || intern_into(&a_mm, "mm") || intern_into(&a_index_count, "index_count") ||
            intern_into(&a_index_num, "index_num") || intern_into(&a_hash_slot_num, "hash_slot_num") ||
            intern_into(&a_begin_timestamp, "begin_timestamp") || intern_into(&a_end_timestamp, "end_timestamp") ||
            intern_into(&a_begin_phy_offset, "begin_phy_offset") ||
            intern_into(&a_end_phy_offset, "end_phy_offset") || intern_into(&a_hash_slot_count, "hash_slot_count") ||
            intern_into(&a_entries_written, "entries_written") || intern_into(&a_queue_id, "queue_id") ||
            intern_into(&a_files, "files") || intern_into(&a_wrote_position, "wrote_position") ||
            intern_into(&a_file_from_offset, "file_from_offset") || intern_into(&a_file_size, "file_size") ||
            intern_into(&a_first_create_in_queue, "first_create_in_queue") ||
            intern_into(&a_max_physic_offset, "max_physic_offset") || intern_into(&a_bytes_written, "bytes_written") ||
            intern_into(&a_reput_from_offset, "reput_from_offset") ||
            intern_into(&a_logics_msg_timestamp, "logics_msg_timestamp") ||
            intern_into(&a_append_prop_crc, "append_prop_crc") || intern_into(&a_fd, "fd") ||
            intern_into(&a_store_host_of_encoder, "_store_host") || intern_into(&a_backed, "backed") ||
            intern_into(&a_back, "back") || intern_into(&a_back_slot_pages, "back_slot_pages") ||
            intern_into(&a_slot_pages, "slot_pages") || intern_into(&a_slot_span, "slot_span"))
            return NULL;
    }
    layout_set = 1;
    Py_RETURN_NONE;
}

/* ---- String.hashCode ------------------------------------------------------------------------ */

/* h continued over a str's UTF-16 code units (a code point past the BMP is two surrogates) */
static uint32_t java_hash_more(uint32_t h, PyObject *s, Py_ssize_t start, Py_ssize_t end)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x10000) {
            c -= 0x10000;
            h = h * 31u + (uint32_t)(0xD800 + (c >> 10));
            h = h * 31u + (uint32_t)(0xDC00 + (c & 0x3FF));
        } else {
            h = h * 31u + (uint32_t)c;
        }
    }
    return h;
}

/* IndexFile.indexKeyHashMethod: abs(hashCode), Integer.MIN_VALUE as 0 */
static long long index_hash_of(uint32_t h)
{
    if (h & 0x80000000u) {
        h = (uint32_t)(0u - h);
        if (h == 0x80000000u)
            return 0;
    }
    return (long long)h;
}

/* the index hashes of a record's keys (topic#UNIQ_KEY, then topic#key for each of KEYS split on
 * the space, empty ones skipped) into out (at most cap); the count, or -1 when more than cap */
typedef struct {
    PyObject *topic; /* borrowed: the messages' of one call */
    uint32_t base;   /* hashCode of topic + separator */
} topic_hash_t;

static Py_ssize_t key_hashes(PyObject *topic, PyObject *uniq, PyObject *keys, long long *out, Py_ssize_t cap,
                             topic_hash_t *cache)
{
    uint32_t base;
    if (cache->topic == topic) {
        base = cache->base;
    } else {
        base = java_hash_more(0, topic, 0, PyUnicode_GET_LENGTH(topic));
        base = java_hash_more(base, key_separator, 0, PyUnicode_GET_LENGTH(key_separator));
        cache->topic = topic;
        cache->base = base;
    }
    Py_ssize_t n = 0;
    if (uniq != NULL) {
        if (n >= cap)
            return -1;
        out[n++] = index_hash_of(java_hash_more(base, uniq, 0, PyUnicode_GET_LENGTH(uniq)));
    }
    if (keys != NULL) {
        Py_UCS4 space = PyUnicode_READ_CHAR(key_space, 0);
        Py_ssize_t len = PyUnicode_GET_LENGTH(keys), start = 0;
        int kind = PyUnicode_KIND(keys);
        const void *data = PyUnicode_DATA(keys);
        for (Py_ssize_t i = 0; i <= len; i++) {
            if (i == len || PyUnicode_READ(kind, data, i) == space) {
                if (i > start) {
                    if (n >= cap)
                        return -1;
                    out[n++] = index_hash_of(java_hash_more(base, keys, start, i));
                }
                start = i + 1;
            }
        }
    }
    return n;
}

/* ---- reading a message ---------------------------------------------------------------------- */

static int int_of(PyObject *v, long long lo, long long hi, long long *out)
{
    if (!PyLong_Check(v))
        return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

/* int_of of a new reference, which it releases; NULL (a failed lookup) is 0 with no error set */
static int owned_int(PyObject *v, long long lo, long long hi, long long *out)
{
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = int_of(v, lo, hi, out);
    Py_DECREF(v);
    return ok;
}

static int attr_int(PyObject *o, PyObject *name, long long lo, long long hi, long long *out)
{
    return owned_int(PyObject_GetAttr(o, name), lo, hi, out);
}

#define MAX_KEYS 64

/* What one message needs, read and checked: everything the Python encoder would take from it in
 * the common case (no delay, a stored properties string, no __CRC32# entry, a cached shape). */
typedef struct {
    PyObject *topic, *body, *props_obj, *text, *tags, *keys, *uniq, *shape; /* owned */
    PyObject *born, *store, *sys_flag_obj;                                  /* owned: the shape's key */
    Py_buffer body_buf, prop_buf;
    int has_body_buf, has_prop_buf;
    const char *prop;
    Py_ssize_t prop_len;
    long long flag, born_ts, reconsume, prepared, store_ts, queue_id;
    int has_store_ts;
    long long code, magic, sys_flag, total;
    int hosts_index;
    const char *tpart, *hosts;
    Py_ssize_t tpart_len, hosts_len;
    PyObject *store_ip, *store_port;
} message_t;

static void message_clear(message_t *m)
{
    if (m->has_body_buf)
        PyBuffer_Release(&m->body_buf);
    if (m->has_prop_buf)
        PyBuffer_Release(&m->prop_buf);
    Py_XDECREF(m->topic);
    Py_XDECREF(m->body);
    Py_XDECREF(m->props_obj);
    Py_XDECREF(m->text);
    Py_XDECREF(m->tags);
    Py_XDECREF(m->keys);
    Py_XDECREF(m->uniq);
    Py_XDECREF(m->shape);
    Py_XDECREF(m->born);
    Py_XDECREF(m->store);
    Py_XDECREF(m->sys_flag_obj);
}

static long long tags_code_of(PyObject *tags, PyObject *tags_codes)
{
    PyObject *known = PyDict_GetItemWithError(tags_codes, tags);
    long long code;
    if (known != NULL && int_of(known, INT32_MIN, INT32_MAX, &code))
        return code;
    PyErr_Clear();
    return (long long)(int32_t)java_hash_more(0, tags, 0, PyUnicode_GET_LENGTH(tags));
}

/* Fields read (and written) straight from an object's slots when its class keeps them in plain
 * slots (MessageInner is a slots dataclass, WritableMappedFile has __slots__): what the attribute
 * lookup finds, without the lookup. A class is learnt once and known by its version tag, which
 * changes when the class does; a class that does not keep them so takes the attribute lookup. */
typedef struct {
    PyObject **const *names;
    int n, writable;
    PyTypeObject *type, *tried; /* compared only, with the version tag: never dereferenced stale */
    unsigned int version;
    Py_ssize_t at[16];
} slot_map_t;

static void slot_map_learn(slot_map_t *s, PyTypeObject *t)
{
    s->type = NULL;
    s->tried = t;
    if (t->tp_getattro != PyObject_GenericGetAttr || (s->writable && t->tp_setattro != PyObject_GenericSetAttr))
        return;
    for (int i = 0; i < s->n; i++) {
        PyObject *d = _PyType_Lookup(t, *s->names[i]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type))
            return;
        PyMemberDef *member = ((PyMemberDescrObject *)d)->d_member;
        if (member->type != T_OBJECT_EX || member->offset <= 0 || (s->writable && (member->flags & READONLY)))
            return;
        s->at[i] = member->offset;
    }
    if (!(t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return;
    s->version = t->tp_version_tag;
    s->type = t;
}

/* the slot's address when o's class keeps the fields in slots, else NULL */
static inline PyObject **slot_at(slot_map_t *s, PyObject *o, int i)
{
    PyTypeObject *t = Py_TYPE(o);
    if (t != s->tried || (t == s->type && t->tp_version_tag != s->version))
        slot_map_learn(s, t);
    if (t == s->type && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && t->tp_version_tag == s->version)
        return (PyObject **)((char *)o + s->at[i]);
    return NULL;
}

/* o.<name i>, a new reference (NULL with an error when it has none) */
static PyObject *slot_get(slot_map_t *s, PyObject *o, int i)
{
    PyObject **at = slot_at(s, o, i);
    if (at != NULL && *at != NULL)
        return Py_NewRef(*at);
    return PyObject_GetAttr(o, *s->names[i]); /* (an unset slot: its AttributeError) */
}

/* o.<name i> = v (a member descriptor's set, or setattr) */
static int slot_set(slot_map_t *s, PyObject *o, int i, PyObject *v)
{
    PyObject **at = slot_at(s, o, i);
    if (at == NULL)
        return PyObject_SetAttr(o, *s->names[i], v);
    Py_XSETREF(*at, Py_NewRef(v));
    return 0;
}

/* 1: read; 0: declined (no error set); -1: an error */
/* A message's fields, from its slots where it has them. */
enum { M_TOPIC, M_BODY, M_FLAG, M_PROPERTIES, M_PROPERTIES_STRING, M_BORN_TS, M_BORN_HOST, M_STORE_HOST,
       M_RECONSUME, M_SYS_FLAG, M_PREPARED, M_STORE_TS, M_PROP_CRC, M_QUEUE_ID, M_COUNT };
static PyObject **const msg_names[M_COUNT] = {
    &a_topic, &a_body, &a_flag, &a_properties, &a_properties_string, &a_born_timestamp, &a_born_host, &a_store_host,
    &a_reconsume_times, &a_sys_flag, &a_prepared_transaction_offset, &a_store_timestamp, &a_prop_crc, &a_queue_id,
};
static slot_map_t msg_slots = {.names = msg_names, .n = M_COUNT, .writable = 0};

static PyObject *msg_get(PyObject *msg, int i)
{
    return slot_get(&msg_slots, msg, i);
}

/* a mapped file's (engine/mapped_file.py WritableMappedFile, which has __slots__) */
enum { MF_WROTE, MF_FROM, MF_SIZE, MF_MM, MF_STORE_TS, MF_FIRST_CREATE, MF_FD, MF_BACKED, MF_COUNT };
static PyObject **const mf_names[MF_COUNT] = {
    &a_wrote_position, &a_file_from_offset, &a_file_size, &a_mm, &a_store_timestamp, &a_first_create_in_queue, &a_fd,
    &a_backed,
};
static slot_map_t mf_slots = {.names = mf_names, .n = MF_COUNT, .writable = 1};

static int mf_ll(PyObject *file, int i, long long *out)
{
    return owned_int(slot_get(&mf_slots, file, i), INT64_MIN, INT64_MAX, out);
}

/* file.<name i> = v as an int */
static int mf_set_ll(PyObject *file, int i, long long v, PyObject **kept)
{
    PyObject *x = PyLong_FromLongLong(v);
    if (x == NULL)
        return -1;
    int r = slot_set(&mf_slots, file, i, x);
    if (r == 0 && kept != NULL)
        Py_XSETREF(*kept, x);
    else
        Py_DECREF(x);
    return r;
}

/* a == b as a dict key compares them (1), or not (0, also on an error); a host's (ip bytes, port)
 * tuple compared item by item without the rich comparison */
static int same(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (Py_TYPE(a) != Py_TYPE(b))
        return 0;
    if (PyBytes_CheckExact(a))
        return PyBytes_GET_SIZE(a) == PyBytes_GET_SIZE(b) &&
               memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(a)) == 0;
    if (PyTuple_CheckExact(a) && PyTuple_GET_SIZE(a) == 2 && PyTuple_GET_SIZE(b) == 2 &&
        PyBytes_CheckExact(PyTuple_GET_ITEM(a, 0)) && !PyTuple_Check(PyTuple_GET_ITEM(a, 1)))
        return same(PyTuple_GET_ITEM(a, 0), PyTuple_GET_ITEM(b, 0)) &&
               same(PyTuple_GET_ITEM(a, 1), PyTuple_GET_ITEM(b, 1));
    int eq = PyObject_RichCompareBool(a, b, Py_EQ);
    if (eq < 0) {
        PyErr_Clear();
        return 0;
    }
    return eq;
}

static int msg_int(PyObject *msg, int i, long long lo, long long hi, long long *out)
{
    return owned_int(msg_get(msg, i), lo, hi, out);
}

/* ``prev``: the message read before (its shape is taken again when the key is the same), or NULL */
static int read_message(PyObject *msg, PyObject *queue_id, PyObject *shapes, PyObject *tags_codes,
                        PyObject *append_prop_crc, long long max_body, long long max_record, long long max_props,
                        const message_t *prev, message_t *m)
{
    memset(m, 0, sizeof(*m));
    if (!int_of(queue_id, 0, INT32_MAX, &m->queue_id))
        return 0;
    m->topic = msg_get(msg, M_TOPIC);
    if (m->topic == NULL || !PyUnicode_CheckExact(m->topic))
        goto declined;
    m->body = msg_get(msg, M_BODY);
    if (m->body == NULL)
        goto declined;
    if (m->body != Py_None) {
        if (PyObject_GetBuffer(m->body, &m->body_buf, PyBUF_SIMPLE) < 0)
            goto declined;
        m->has_body_buf = 1;
        if (m->body_buf.len > max_body)
            goto declined;
    }
    m->props_obj = msg_get(msg, M_PROPERTIES);
    m->text = msg_get(msg, M_PROPERTIES_STRING);
    if (m->props_obj == NULL || m->text == NULL)
        goto declined;
    int has_props = PyObject_IsTrue(m->props_obj);
    if (has_props < 0)
        goto declined;
    if (has_props) {
        if (!PyDict_Check(m->props_obj) || m->text == Py_None)
            goto declined; /* a string to make: the Python path makes it */
        int delayed = PyDict_Contains(m->props_obj, name_delay);
        if (delayed != 0)
            goto declined;
        m->tags = Py_XNewRef(PyDict_GetItemWithError(m->props_obj, name_tags));
        m->keys = Py_XNewRef(PyDict_GetItemWithError(m->props_obj, name_keys));
        m->uniq = Py_XNewRef(PyDict_GetItemWithError(m->props_obj, name_uniq));
        if (PyErr_Occurred())
            goto declined;
        if ((m->keys != NULL && m->keys != Py_None && !PyUnicode_Check(m->keys)) ||
            (m->uniq != NULL && m->uniq != Py_None && !PyUnicode_Check(m->uniq)))
            goto declined;
        if (m->keys == Py_None)
            Py_CLEAR(m->keys);
        if (m->uniq == Py_None)
            Py_CLEAR(m->uniq);
        if (m->keys != NULL && PyUnicode_GET_LENGTH(m->keys) == 0)
            Py_CLEAR(m->keys);
        if (m->uniq != NULL && PyUnicode_GET_LENGTH(m->uniq) == 0) /* the decoder drops an empty value */
            Py_CLEAR(m->uniq);
        int tagged = m->tags == NULL ? 0 : PyObject_IsTrue(m->tags);
        if (tagged < 0)
            goto declined;
        if (tagged) {
            if (!PyUnicode_Check(m->tags))
                goto declined;
            m->code = tags_code_of(m->tags, tags_codes);
        }
    }
    if (m->text == Py_None) {
        m->prop = "";
        m->prop_len = 0;
    } else if (PyUnicode_Check(m->text)) {
        m->prop = PyUnicode_AsUTF8AndSize(m->text, &m->prop_len);
        if (m->prop == NULL)
            goto declined; /* lone surrogates: Java's encoding, in Python */
    } else if (PyBytes_Check(m->text) || PyByteArray_Check(m->text)) {
        if (PyObject_GetBuffer(m->text, &m->prop_buf, PyBUF_SIMPLE) < 0)
            goto declined;
        m->has_prop_buf = 1;
        m->prop = m->prop_buf.buf;
        m->prop_len = m->prop_buf.len;
    } else {
        goto declined;
    }
    int prop_crc;
    if (append_prop_crc == Py_None) {
        PyObject *v = msg_get(msg, M_PROP_CRC);
        if (v == NULL)
            goto declined;
        prop_crc = PyObject_IsTrue(v);
        Py_DECREF(v);
    } else {
        prop_crc = PyObject_IsTrue(append_prop_crc);
    }
    if (prop_crc != 0 || m->prop_len > max_props)
        goto declined;
    /* the shape: (magic, tpart, pack, fixed, sysFlag, storeTimestamp at, store ip, store port,
     * gets a queue offset, host block), cached by the encoder under (topic, born, store, sysFlag) */
    m->born = msg_get(msg, M_BORN_HOST);
    m->store = msg_get(msg, M_STORE_HOST);
    m->sys_flag_obj = msg_get(msg, M_SYS_FLAG);
    if (m->born == NULL || m->store == NULL || m->sys_flag_obj == NULL)
        goto declined;
    if (prev != NULL && prev->shape != NULL && same(m->topic, prev->topic) && same(m->born, prev->born) &&
        same(m->store, prev->store) && same(m->sys_flag_obj, prev->sys_flag_obj)) {
        m->shape = Py_NewRef(prev->shape); /* the key the message before looked up */
    } else {
        PyObject *key = PyTuple_Pack(4, m->topic, m->born, m->store, m->sys_flag_obj);
        if (key == NULL)
            goto declined;
        /* held: the CRC call or the clock may let another thread clear the cache */
        m->shape = Py_XNewRef(PyDict_GetItemWithError(shapes, key));
        Py_DECREF(key);
    }
    if (m->shape == NULL || !PyTuple_Check(m->shape) || PyTuple_GET_SIZE(m->shape) != 10)
        goto declined;
    long long fixed, gets;
    PyObject *tpart = PyTuple_GET_ITEM(m->shape, 1), *hosts = PyTuple_GET_ITEM(m->shape, 9);
    if (!int_of(PyTuple_GET_ITEM(m->shape, 0), INT32_MIN, UINT32_MAX, &m->magic) ||
        !int_of(PyTuple_GET_ITEM(m->shape, 3), 0, INT32_MAX, &fixed) ||
        !int_of(PyTuple_GET_ITEM(m->shape, 4), INT32_MIN, INT32_MAX, &m->sys_flag) || !PyBytes_Check(tpart) ||
        !PyBytes_Check(hosts))
        goto declined;
    gets = PyObject_IsTrue(PyTuple_GET_ITEM(m->shape, 8));
    if (gets != 1)
        goto declined; /* prepared and rollback records: queue offset 0, no unit */
    m->hosts_index = (int)((m->sys_flag >> 4) & 3);
    m->tpart = PyBytes_AS_STRING(tpart);
    m->tpart_len = PyBytes_GET_SIZE(tpart);
    m->hosts = PyBytes_AS_STRING(hosts);
    m->hosts_len = PyBytes_GET_SIZE(hosts);
    const field_t *F = head_fields[m->hosts_index];
    if (F[F_HOSTS].pos + m->hosts_len > head_size[m->hosts_index] ||
        fixed != head_size[m->hosts_index] + m->tpart_len + prop_len_width)
        goto declined;
    m->store_ip = PyTuple_GET_ITEM(m->shape, 6);
    m->store_port = PyTuple_GET_ITEM(m->shape, 7);
    m->total = fixed + (m->has_body_buf ? m->body_buf.len : 0) + m->prop_len;
    if (m->total > max_record)
        goto declined;
    if (!msg_int(msg, M_FLAG, INT32_MIN, INT32_MAX, &m->flag) ||
        !msg_int(msg, M_BORN_TS, INT64_MIN, INT64_MAX, &m->born_ts) ||
        !msg_int(msg, M_RECONSUME, INT32_MIN, INT32_MAX, &m->reconsume) ||
        !msg_int(msg, M_PREPARED, INT64_MIN, INT64_MAX, &m->prepared))
        goto declined;
    PyObject *ts = msg_get(msg, M_STORE_TS);
    if (ts == NULL)
        goto declined;
    if (ts != Py_None) {
        int ok = int_of(ts, INT64_MIN, INT64_MAX, &m->store_ts);
        Py_DECREF(ts);
        if (!ok)
            goto declined;
        m->has_store_ts = 1;
    } else {
        Py_DECREF(ts);
    }
    return 1;
declined:
    PyErr_Clear();
    message_clear(m);
    memset(m, 0, sizeof(*m));
    return 0;
}

/* the body CRC as the encoder takes it: crc32.c's CRC-32 (store/crc.py's fast_crc32 with the
 * kernel), masked; 0 for no body */
static int body_crc_of(message_t *m, long long *crc)
{
    if (!m->has_body_buf || m->body_buf.len == 0) {
        *crc = 0;
        return 0;
    }
    *crc = (long long)rmq_crc32(0, m->body_buf.buf, (size_t)m->body_buf.len) & crc_mask;
    return 0;
}

/* the record at dst (m->total bytes), all but totalSize and magic */
static void encode_record(unsigned char *dst, const message_t *m, long long crc, long long queue_offset,
                          long long physical_offset, long long store_ts)
{
    const field_t *F = head_fields[m->hosts_index];
    Py_ssize_t body_len = m->has_body_buf ? m->body_buf.len : 0;
    put_be(dst + F[F_CRC].pos, F[F_CRC].width, crc);
    put_be(dst + F[F_QUEUE_ID].pos, F[F_QUEUE_ID].width, m->queue_id);
    put_be(dst + F[F_FLAG].pos, F[F_FLAG].width, m->flag);
    put_be(dst + F[F_QO].pos, F[F_QO].width, queue_offset);
    put_be(dst + F[F_PO].pos, F[F_PO].width, physical_offset);
    put_be(dst + F[F_SYSFLAG].pos, F[F_SYSFLAG].width, m->sys_flag);
    put_be(dst + F[F_BORN_TS].pos, F[F_BORN_TS].width, m->born_ts);
    memcpy(dst + F[F_HOSTS].pos, m->hosts, (size_t)m->hosts_len);
    put_be(dst + F[F_STORE_TS].pos, F[F_STORE_TS].width, store_ts);
    put_be(dst + F[F_RECONSUME].pos, F[F_RECONSUME].width, m->reconsume);
    put_be(dst + F[F_PREPARED].pos, F[F_PREPARED].width, m->prepared);
    put_be(dst + F[F_BODY_LEN].pos, F[F_BODY_LEN].width, body_len);
    unsigned char *p = dst + head_size[m->hosts_index];
    if (body_len) {
        memcpy(p, m->body_buf.buf, (size_t)body_len);
        p += body_len;
    }
    memcpy(p, m->tpart, (size_t)m->tpart_len);
    p += m->tpart_len;
    put_be(p, prop_len_width, m->prop_len);
    p += prop_len_width;
    if (m->prop_len)
        memcpy(p, m->prop, (size_t)m->prop_len);
}

/* totalSize and magic, written last: a process killed before this leaves zeros where the
 * record starts (the log ends there), never half a record */
static void write_start(unsigned char *dst, const message_t *m)
{
    const field_t *F = head_fields[m->hosts_index];
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the compiler keeps the stores above before these */
    put_be(dst + F[F_TOTAL].pos, F[F_TOTAL].width, m->total);
    put_be(dst + F[F_MAGIC].pos, F[F_MAGIC].width, m->magic);
}

static int64_t wall_clock_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ((int64_t)t.tv_sec * 1000000000 + t.tv_nsec) / 1000000;
}

/* ---- the index: IndexFile.putKey ------------------------------------------------------------ */

typedef struct {
    PyObject *file; /* IndexFileWriter */
    Py_buffer mm;
    int has_mm;
    PyObject *pages;  /* its slot_pages: a byte a span of the header and hash slots, 1 once allocated */
    long long span;   /* its slot_span: the bytes a byte of pages stands for */
    long long backed; /* its entries are allocated up to here, as last read */
    long long count, index_num, slots, begin_ts, end_ts, begin_phy, end_phy, slot_count;
    long long slot_count_was, begin_ts_was, begin_phy_was, end_ts_was; /* as read: only what changed is set again */
} index_t;

static int attr_ll(PyObject *o, PyObject *name, long long *out)
{
    return attr_int(o, name, INT64_MIN, INT64_MAX, out);
}

/* the writable buffer of a map object (closed: 0, with no error set) */
static int map_buffer(PyObject *mm, Py_buffer *b)
{
    if (PyObject_GetBuffer(mm, b, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* the writable map of a mapped file (its ``mm``); 0, with no error set, when it has none */
static int writable_map(PyObject *file, Py_buffer *b)
{
    PyObject *mm = PyObject_GetAttr(file, a_mm);
    if (mm == NULL) {
        PyErr_Clear();
        return 0;
    }
    int got = map_buffer(mm, b);
    Py_DECREF(mm);
    return got;
}

/* the service's current file, read; 0 when it is not there, full, or not what we can write */
static int index_open(PyObject *service, index_t *ix)
{
    memset(ix, 0, sizeof(*ix));
    ix->file = PyObject_GetAttr(service, a_last);
    if (ix->file == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (ix->file == Py_None)
        goto no;
    if (!attr_ll(ix->file, a_index_count, &ix->count) || !attr_ll(ix->file, a_index_num, &ix->index_num) ||
        !attr_ll(ix->file, a_hash_slot_num, &ix->slots) || !attr_ll(ix->file, a_begin_timestamp, &ix->begin_ts) ||
        !attr_ll(ix->file, a_end_timestamp, &ix->end_ts) || !attr_ll(ix->file, a_begin_phy_offset, &ix->begin_phy) ||
        !attr_ll(ix->file, a_end_phy_offset, &ix->end_phy) ||
        !attr_ll(ix->file, a_hash_slot_count, &ix->slot_count))
        goto no;
    if (ix->slots <= 0 || ix->count < 0 || ix->count >= ix->index_num || ix->index_num > INT32_MAX)
        goto no;
    ix->slot_count_was = ix->slot_count;
    ix->begin_ts_was = ix->begin_ts;
    ix->begin_phy_was = ix->begin_phy;
    ix->end_ts_was = ix->end_ts;
    if (!writable_map(ix->file, &ix->mm))
        goto no;
    ix->has_mm = 1;
    ix->pages = PyObject_GetAttr(ix->file, a_slot_pages);
    if (ix->pages == NULL || !PyByteArray_Check(ix->pages) || !attr_ll(ix->file, a_backed, &ix->backed) ||
        !attr_ll(ix->file, a_slot_span, &ix->span) || ix->span <= 0)
        goto no;
    /* the slot table and every entry up to index_num lie in the map */
    if (ix->slots > (PY_SSIZE_T_MAX - index_header_size) / 2 / slot_width ||
        ix->index_num > (PY_SSIZE_T_MAX / 2) / entry_size ||
        index_header_size + ix->slots * slot_width + ix->index_num * entry_size > ix->mm.len)
        goto no;
    return 1;
no:
    PyErr_Clear();
    if (ix->has_mm)
        PyBuffer_Release(&ix->mm);
    Py_XDECREF(ix->file);
    Py_XDECREF(ix->pages);
    memset(ix, 0, sizeof(*ix));
    return 0;
}

static void index_close(index_t *ix)
{
    if (ix->has_mm)
        PyBuffer_Release(&ix->mm);
    Py_XDECREF(ix->file);
    Py_XDECREF(ix->pages);
}

/* ---- blocks allocated before a map writes them ---------------------------------------------- */

/* A write through a map into a hole the file system has no room for is a SIGBUS that kills the
 * process: the Python side allocates a file's blocks before its writes (engine/mapped_file.allocate)
 * and keeps how far in ``backed``. Bytes up to ``end`` of ``file`` (a WritableMappedFile or an
 * IndexFileWriter) allocated: its back(end) when ``backed`` (as last read) is short (ahead as it decides);
 * -1 with its error (a full disk: StoreAccessError) before anything is written. */
static int backed_to(PyObject *file, long long end, long long *backed)
{
    if (end <= *backed)
        return 0;
    PyObject *e = PyLong_FromLongLong(end);
    PyObject *r = e == NULL ? NULL : PyObject_CallMethodOneArg(file, a_back, e);
    Py_XDECREF(e);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    if (!attr_ll(file, a_backed, backed) || end > *backed) {
        PyErr_SetString(PyExc_RuntimeError, "back() left the bytes to write unallocated");
        return -1;
    }
    return 0;
}

/* the index's entries after its count and the hash slot spans of ``hashes`` allocated (backed_to) */
static int index_backed(index_t *ix, const long long *hashes, Py_ssize_t n)
{
    Py_ssize_t entries_at = index_header_size + (Py_ssize_t)ix->slots * slot_width;
    if (backed_to(ix->file, entries_at + (ix->count + n) * entry_size, &ix->backed) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t page = (index_header_size + (Py_ssize_t)(hashes[i] % ix->slots) * slot_width) / ix->span;
        if (page < PyByteArray_GET_SIZE(ix->pages) && PyByteArray_AS_STRING(ix->pages)[page])
            continue;
        PyObject *p = Py_BuildValue("(n)", page);
        PyObject *r = p == NULL ? NULL : PyObject_CallMethodOneArg(ix->file, a_back_slot_pages, p);
        Py_XDECREF(p);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* putKey for each hash (the file has room for all), then the header; returns the slots newly used */
static long long index_put(index_t *ix, const long long *hashes, Py_ssize_t n, long long offset, long long ts)
{
    unsigned char *mm = ix->mm.buf;
    long long count = ix->count, begin = ix->begin_ts, new_slots = 0;
    Py_ssize_t entry_at = index_header_size + (Py_ssize_t)ix->slots * slot_width + (Py_ssize_t)count * entry_size;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char *slot = mm + index_header_size + (Py_ssize_t)(hashes[i] % ix->slots) * slot_width;
        long long slot_value = get_be(slot, slot_width);
        if (slot_value <= invalid_index || slot_value > count) {
            slot_value = invalid_index;
            new_slots++;
        }
        long long diff = 0;
        if (begin > 0) {
            /* whole seconds; negative becomes 0 (overflow-free: both are int64 store times) */
            if (ts > begin) {
                uint64_t d = ((uint64_t)ts - (uint64_t)begin) / 1000u;
                diff = d > (uint64_t)time_diff_max ? time_diff_max : (long long)d;
            }
        }
        unsigned char *e = mm + entry_at;
        put_be(e + index_entry[E_HASH].pos, index_entry[E_HASH].width, hashes[i]);
        put_be(e + index_entry[E_PHY].pos, index_entry[E_PHY].width, offset);
        put_be(e + index_entry[E_DIFF].pos, index_entry[E_DIFF].width, diff);
        put_be(e + index_entry[E_PREV].pos, index_entry[E_PREV].width, slot_value);
        put_be(slot, slot_width, count);
        if (count <= 1) {
            ix->begin_phy = offset;
            begin = ts;
        }
        count++;
        entry_at += entry_size;
    }
    ix->begin_ts = begin;
    ix->slot_count += new_slots;
    ix->count = count;
    if (n) {
        ix->end_phy = offset;
        ix->end_ts = ts;
    }
    return new_slots;
}

/* IndexHeader's fields into the file, as index_put left them */
static void index_header_write(index_t *ix)
{
    unsigned char *mm = ix->mm.buf;
    put_be(mm + index_header[H_BEGIN_TS].pos, index_header[H_BEGIN_TS].width, ix->begin_ts);
    put_be(mm + index_header[H_END_TS].pos, index_header[H_END_TS].width, ix->end_ts);
    put_be(mm + index_header[H_BEGIN_PHY].pos, index_header[H_BEGIN_PHY].width, ix->begin_phy);
    put_be(mm + index_header[H_END_PHY].pos, index_header[H_END_PHY].width, ix->end_phy);
    put_be(mm + index_header[H_SLOT_COUNT].pos, index_header[H_SLOT_COUNT].width, ix->slot_count);
    put_be(mm + index_header[H_INDEX_COUNT].pos, index_header[H_INDEX_COUNT].width, ix->count);
}

static int set_ll(PyObject *o, PyObject *name, long long v)
{
    PyObject *x = PyLong_FromLongLong(v);
    if (x == NULL)
        return -1;
    int r = PyObject_SetAttr(o, name, x);
    Py_DECREF(x);
    return r;
}

/* o.<name> = v, or a new int of x when v is NULL (v: an int object of that value made for another field) */
static int set_obj(PyObject *o, PyObject *name, PyObject *v, long long x)
{
    return v != NULL ? PyObject_SetAttr(o, name, v) : set_ll(o, name, x);
}

/* the file's attributes as index_put left them, and the service's count of entries; ``count``
 * (when not NULL) gets the object stored as the file's index_count; ``end_phy`` and ``end_ts``: objects
 * of those values to store (or NULL) */
static int index_store(index_t *ix, PyObject *service, Py_ssize_t n, PyObject **count, PyObject *end_phy,
                       PyObject *end_ts)
{
    if (n == 0)
        return 0; /* no entry: nothing changed but the header's bytes, which say the same */
    PyObject *c = PyLong_FromLongLong(ix->count);
    if (c == NULL)
        return -1;
    int r = PyObject_SetAttr(ix->file, a_index_count, c);
    if (r == 0 && count != NULL)
        Py_XSETREF(*count, c);
    else
        Py_DECREF(c);
    if (r < 0 || set_obj(ix->file, a_end_phy_offset, end_phy, ix->end_phy) < 0 ||
        (ix->end_ts != ix->end_ts_was && set_obj(ix->file, a_end_timestamp, end_ts, ix->end_ts) < 0))
        return -1;
    if (ix->slot_count != ix->slot_count_was && set_ll(ix->file, a_hash_slot_count, ix->slot_count) < 0)
        return -1;
    if ((ix->begin_ts != ix->begin_ts_was || ix->begin_phy != ix->begin_phy_was) &&
        (set_ll(ix->file, a_begin_timestamp, ix->begin_ts) < 0 || set_ll(ix->file, a_begin_phy_offset, ix->begin_phy) < 0))
        return -1;
    ix->slot_count_was = ix->slot_count;
    ix->begin_ts_was = ix->begin_ts;
    ix->begin_phy_was = ix->begin_phy;
    ix->end_ts_was = ix->end_ts;
    if (n) {
        long long written;
        if (!attr_ll(service, a_entries_written, &written))
            return PyErr_Occurred() ? -1 : 0;
        return set_ll(service, a_entries_written, written + n);
    }
    return 0;
}

/* ---- append(): one message ------------------------------------------------------------------ */

/* the PutResult of a message put at ``offset`` (all four ints taken: new references, or NULL after an error) */
static PyObject *put_result_of(PyObject *result_type, message_t *m, PyObject *offset, PyObject *queue_offset,
                               PyObject *store_ts)
{
    PyTypeObject *t = (PyTypeObject *)result_type;
    PyObject *r = offset == NULL || queue_offset == NULL || store_ts == NULL ? NULL : t->tp_alloc(t, 12);
    if (r == NULL) {
        Py_XDECREF(offset);
        Py_XDECREF(queue_offset);
        Py_XDECREF(store_ts);
        return NULL;
    }
    PyObject *offsets = PyTuple_Pack(1, offset);
    PyObject *uniqs = PyTuple_Pack(1, m->uniq != NULL ? m->uniq : Py_None);
    PyObject *items[12] = {
        Py_NewRef(put_ok), offset, PyLong_FromLongLong(m->total), queue_offset, store_ts, PyLong_FromLong(1),
        Py_NewRef(m->topic), PyLong_FromLongLong(m->queue_id), offsets, uniqs, Py_NewRef(m->store_ip),
        Py_NewRef(m->store_port),
    };
    int failed = 0;
    for (int i = 0; i < 12; i++) {
        if (items[i] == NULL)
            failed = 1;
        PyTuple_SET_ITEM(r, i, items[i] != NULL ? items[i] : Py_NewRef(Py_None));
    }
    if (failed) {
        Py_DECREF(r);
        return NULL;
    }
    /* atoms and tuples of atoms only: no cycle to find, so the collector need not follow them */
    PyObject_GC_UnTrack(offsets);
    PyObject_GC_UnTrack(uniqs);
    PyObject_GC_UnTrack(r);
    return r;
}

static PyObject *put_result(PyObject *result_type, message_t *m, long long offset, long long queue_offset,
                            long long store_ts)
{
    return put_result_of(result_type, m, PyLong_FromLongLong(offset), PyLong_FromLongLong(queue_offset),
                         PyLong_FromLongLong(store_ts));
}

/* ---- append_many(): messages in a row ------------------------------------------------------- */

/* one consume queue's writing state over a put_many call (its current file), written back at the end */
typedef struct {
    PyObject *key, *cq, *file; /* owned */
    PyObject *topic;           /* the key's */
    long long queue_id;
    Py_buffer mm;
    long long pos, base, file_size, max_phys, bytes_written, queue_offset, first_queue_offset;
    long long backed; /* its file is allocated up to here, as last read (backed_to) */
    int first_create, has_mm, touched;
} queue_t;

static void queue_release(queue_t *q)
{
    if (q->has_mm)
        PyBuffer_Release(&q->mm);
    Py_XDECREF(q->key);
    Py_XDECREF(q->cq);
    Py_XDECREF(q->file);
}

/* the queue of (topic, queue id) ready to take units at its end in its current file; 0: not so */
static int queue_open(queue_t *q, PyObject *key, PyObject *queues, PyObject *table)
{
    memset(q, 0, sizeof(*q));
    PyObject *cq = PyDict_GetItemWithError(queues, key);
    if (cq == NULL)
        goto no;
    q->cq = Py_NewRef(cq);
    q->key = Py_NewRef(key);
    PyObject *files = PyObject_GetAttr(cq, a_files);
    if (files == NULL)
        goto no;
    q->file = PyObject_GetAttr(files, a_last);
    Py_DECREF(files);
    if (q->file == NULL || q->file == Py_None)
        goto no;
    PyObject *fc = slot_get(&mf_slots, q->file, MF_FIRST_CREATE);
    if (fc == NULL)
        goto no;
    q->first_create = PyObject_IsTrue(fc);
    Py_DECREF(fc);
    if (q->first_create < 0 || !mf_ll(q->file, MF_WROTE, &q->pos) || !mf_ll(q->file, MF_FROM, &q->base) ||
        !mf_ll(q->file, MF_SIZE, &q->file_size) || !mf_ll(q->file, MF_BACKED, &q->backed) ||
        !attr_ll(cq, a_max_physic_offset, &q->max_phys) || !attr_ll(cq, a_bytes_written, &q->bytes_written))
        goto no;
    PyObject *next = PyDict_GetItemWithError(table, key);
    if (next == NULL) {
        if (PyErr_Occurred())
            goto no;
        q->queue_offset = 0;
    } else if (!int_of(next, 0, INT64_MAX / 2, &q->queue_offset)) {
        goto no;
    }
    q->first_queue_offset = q->queue_offset;
    if (!writable_map(q->file, &q->mm))
        goto no;
    q->has_mm = 1;
    if (q->file_size > q->mm.len || q->pos < 0 || q->pos > q->file_size)
        goto no;
    return 1;
no:
    PyErr_Clear();
    queue_release(q);
    memset(q, 0, sizeof(*q));
    return 0;
}

/* whether the queue's next unit goes at its end in its current file, as ConsumeQueue.put would put it
 * there without a fill, a check or a new file */
static int queue_takes(const queue_t *q, long long offset)
{
    return q->queue_offset <= (INT64_MAX - q->base) / cq_unit_size &&
           q->queue_offset * cq_unit_size == q->base + q->pos && q->pos + cq_unit_size <= q->file_size &&
           offset >= q->max_phys && !(q->pos == 0 && q->queue_offset != 0 && q->first_create);
}

/* the queue's next offset into the table, its file's wrote position, its max physical offset and
 * bytes written; ``next`` and ``pos`` (when not NULL) get the objects stored in the table and as the
 * file's wrote_position; ``max_phys``: an object of that value to store (or NULL) */
static int queue_store(queue_t *q, PyObject *table, PyObject **next, PyObject **pos, PyObject *max_phys)
{
    if (!q->touched)
        return 0;
    PyObject *n = PyLong_FromLongLong(q->queue_offset);
    if (n == NULL)
        return -1;
    int r = PyDict_SetItem(table, q->key, n);
    if (r == 0 && next != NULL)
        Py_XSETREF(*next, n);
    else
        Py_DECREF(n);
    if (r < 0 || mf_set_ll(q->file, MF_WROTE, q->pos, pos) < 0 ||
        set_obj(q->cq, a_max_physic_offset, max_phys, q->max_phys) < 0 ||
        set_ll(q->cq, a_bytes_written, q->bytes_written) < 0)
        return -1;
    return 0;
}

#define MAX_QUEUES 64

/* where put_many placed a record: its queue, queue offset and unit, commit log offset, store
 * time, and its index keys' hashes (in the call's array) */
typedef struct {
    queue_t *q;
    long long queue_offset, unit_pos, offset, store_ts;
    Py_ssize_t key_at, nkeys;
} placed_t;

/* pwrite every byte (0), or the errno */
static int pwrite_all(int fd, const unsigned char *p, long long n, long long at)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, (size_t)n, (off_t)at);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO;
        p += w;
        n -= w;
        at += w;
    }
    return 0;
}

/* put_many_run(messages, start, queue_ids, stamps, cl_fd, pos, base, limit, queues, table, index_service,
 *              shapes, tags_codes, append_prop_crc, max_body, max_record, max_props, result_type, results, clock)
 * (the appender's put_many hands these over)
 *
 * the appender's put for messages[start:] in a row, as long as each is the common case; every
 * message from ``start`` is read and checked first, and when one is not what the kernel puts
 * (delayed, a transaction half, a shape not cached, ...) nothing is written and None returned.
 * Otherwise records are placed in one buffer from pos (commit log offset base + pos) while they end
 * by ``limit`` and written into the segment's file (cl_fd) with pwrite (all but the first record's
 * totalSize and magic, then those), then their
 * consume queue units at their queues' ends (``queues``: (topic, queue id) -> writer; ``table``: the
 * next queue offsets), index entries in the index's current file while it has room; the PutResults
 * are appended to ``results``. Stops before the first message that needs more (a new segment, queue
 * file or index file, a queue not there yet). Returns (messages done, new pos, last store timestamp,
 * 0), or (start, pos, 0, errno) when the write failed (nothing accounted, nothing dispatched).
 * ``stamps``: None (the wall clock, read as each is placed), or the store timestamp of each message
 * (None for those with their own), or an empty list that the first call (start 0) fills from
 * ``clock`` once every message is read and checked, for the calls after. */
static PyObject *put_many_run(PyObject *const *args)
{
    if (!layout_set) {
        PyErr_SetString(PyExc_RuntimeError, "set_append_layout was not called");
        return NULL;
    }
    PyObject *messages = args[0], *queue_ids = args[2], *stamps = args[3], *queues = args[8];
    PyObject *table = args[9], *service = args[10], *shapes = args[11], *tags_codes = args[12];
    PyObject *append_prop_crc = args[13], *result_type = args[17], *results = args[18], *clock = args[19];
    long long start, pos, base, limit, max_body, max_record, max_props, fd_value;
    if (!PyList_Check(messages) || !int_of(args[1], 0, PY_SSIZE_T_MAX, &start) ||
        !int_of(args[4], 0, INT32_MAX, &fd_value) ||
        !int_of(args[5], 0, INT64_MAX, &pos) || !int_of(args[6], 0, INT64_MAX / 2, &base) ||
        !int_of(args[7], INT64_MIN, INT64_MAX, &limit) || !int_of(args[14], 0, INT64_MAX, &max_body) ||
        !int_of(args[15], 0, INT64_MAX, &max_record) || !int_of(args[16], 0, INT64_MAX, &max_props) ||
        !PyDict_Check(queues) || !PyDict_Check(table) || !PyDict_Check(shapes) || !PyDict_Check(tags_codes) ||
        !PyList_Check(results) || !PyType_Check(result_type) ||
        !PyType_IsSubtype((PyTypeObject *)result_type, &PyTuple_Type) ||
        (queue_ids != Py_None && (!PyList_Check(queue_ids) || PyList_GET_SIZE(queue_ids) != PyList_GET_SIZE(messages))) ||
        (stamps != Py_None && (!PyList_Check(stamps) || (PyList_GET_SIZE(stamps) != PyList_GET_SIZE(messages) &&
                                                          (PyList_GET_SIZE(stamps) != 0 || start != 0)))) ||
        (stamps != Py_None && PyList_GET_SIZE(stamps) == 0 && !PyCallable_Check(clock)))
        Py_RETURN_NONE;
    int fd = (int)fd_value;
    Py_ssize_t n = PyList_GET_SIZE(messages);
    if (start >= n)
        Py_RETURN_NONE;
    Py_ssize_t count = n - (Py_ssize_t)start;
    /* the list is held (and its items) while messages are read: nothing else runs until the writes */
    PyObject *held = PyList_GetSlice(messages, (Py_ssize_t)start, n);
    PyObject *held_ids = queue_ids == Py_None ? NULL : PyList_GetSlice(queue_ids, (Py_ssize_t)start, n);
    int fill = stamps != Py_None && PyList_GET_SIZE(stamps) == 0;
    PyObject *held_stamps = stamps == Py_None || fill ? NULL : PyList_GetSlice(stamps, (Py_ssize_t)start, n);
    message_t *ms = PyMem_Malloc((size_t)count * sizeof(message_t)); /* read_message clears each */
    queue_t *qs = PyMem_Calloc(MAX_QUEUES, sizeof(queue_t));
    PyObject *out = NULL;
    Py_ssize_t read = 0, done = 0, nq = 0;
    int has_ix = 0, failed = 0;
    index_t ix;
    long long last_ts = 0;
    Py_ssize_t entries = 0;
    unsigned char *rb = NULL;   /* the records, placed */
    placed_t *plan = NULL;      /* where each went */
    long long *keyhash = NULL;  /* their index keys' hashes, end to end */
    if (held == NULL || ms == NULL || qs == NULL || (queue_ids != Py_None && held_ids == NULL) ||
        (stamps != Py_None && !fill && held_stamps == NULL)) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    for (; read < count; read++) {
        PyObject *msg = PyList_GET_ITEM(held, read);
        PyObject *qid = held_ids != NULL ? Py_NewRef(PyList_GET_ITEM(held_ids, read)) : msg_get(msg, M_QUEUE_ID);
        if (qid == NULL) {
            PyErr_Clear();
            goto declined;
        }
        int ok = read_message(msg, qid, shapes, tags_codes, append_prop_crc, max_body, max_record, max_props,
                              read > 0 ? &ms[read - 1] : NULL, &ms[read]);
        Py_DECREF(qid);
        if (!ok)
            goto declined;
        if (held_stamps != NULL && !ms[read].has_store_ts) {
            PyObject *ts = PyList_GET_ITEM(held_stamps, read);
            if (!int_of(ts, INT64_MIN, INT64_MAX, &ms[read].store_ts))
                goto declined;
            ms[read].has_store_ts = 1;
        }
    }
    if (fill) {
        /* the store's clock, once for each message without a store timestamp, in order and before
         * any is placed (as the Python put of many messages reads it); kept for the calls after */
        for (Py_ssize_t k = 0; k < count; k++) {
            PyObject *ts = Py_None;
            if (!ms[k].has_store_ts) {
                ts = PyObject_CallNoArgs(clock);
                if (ts == NULL)
                    goto fail;
                if (!int_of(ts, INT64_MIN, INT64_MAX, &ms[k].store_ts)) {
                    Py_DECREF(ts);
                    PyErr_SetString(PyExc_TypeError, "the store's clock gave no int");
                    goto fail;
                }
                ms[k].has_store_ts = 1;
            } else {
                Py_INCREF(ts);
            }
            int r = PyList_Append(stamps, ts);
            Py_DECREF(ts);
            if (r < 0)
                goto fail;
        }
    }
    if (service != Py_None && !(has_ix = index_open(service, &ix)))
        goto stop;
    /* placed first: each record into one buffer while the segment, its queue's file and the index
     * file take it (a window at a time); nothing of the store is touched yet */
    Py_ssize_t window = count; /* the whole row, as the Python put of many lays out its buffer */
    long long cap = 0;
    for (Py_ssize_t k = 0; k < window; k++)
        cap += ms[k].total;
    if (cap > limit - pos)
        cap = limit - pos > 0 ? limit - pos : 0;
    rb = PyMem_Malloc((size_t)cap + 1);
    plan = PyMem_Malloc((size_t)window * sizeof(placed_t) + 1);
    keyhash = PyMem_Malloc((size_t)window * sizeof(long long) * 2 + 1);
    Py_ssize_t keyhash_cap = window * 2, keyhash_len = 0;
    if (rb == NULL || plan == NULL || keyhash == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    long long rpos = 0, ix_count = has_ix ? ix.count : 0;
    topic_hash_t th = {NULL, 0};
    long long hashes[MAX_KEYS];
    Py_ssize_t planned = 0;
    for (; planned < window; planned++) {
        message_t *m = &ms[planned];
        long long offset = base + pos + rpos;
        if (rpos + m->total > cap)
            break; /* the next segment: Python */
        queue_t *q = NULL;
        for (Py_ssize_t k = 0; k < nq && q == NULL; k++)
            if (qs[k].queue_id == m->queue_id &&
                (qs[k].topic == m->topic || PyUnicode_Compare(qs[k].topic, m->topic) == 0))
                q = &qs[k];
        if (q == NULL) {
            PyObject *qid = PyLong_FromLongLong(m->queue_id);
            PyObject *key = qid == NULL ? NULL : PyTuple_Pack(2, m->topic, qid);
            Py_XDECREF(qid);
            if (key == NULL)
                goto fail;
            int opened = nq < MAX_QUEUES && queue_open(&qs[nq], key, queues, table);
            Py_DECREF(key);
            if (!opened)
                break; /* a queue not there yet (or too many at once): Python */
            q = &qs[nq++];
            q->topic = m->topic; /* held by the key */
            q->queue_id = m->queue_id;
        }
        if (!queue_takes(q, offset))
            break;
        if (backed_to(q->file, q->pos + cq_unit_size, &q->backed) < 0)
            goto fail; /* nothing written yet */
        Py_ssize_t nkeys = 0;
        if (has_ix) {
            nkeys = key_hashes(m->topic, m->uniq, m->keys, hashes, MAX_KEYS, &th);
            if (nkeys < 0 || offset < ix.end_phy || ix_count + nkeys > ix.index_num)
                break; /* the index file fills: Python rolls it */
            long long count_was = ix.count;
            ix.count = ix_count; /* the entries placed before this message's */
            int backed = index_backed(&ix, hashes, nkeys);
            ix.count = count_was;
            if (backed < 0)
                goto fail;
            if (keyhash_len + nkeys > keyhash_cap) {
                Py_ssize_t grown = (keyhash_cap + nkeys) * 2;
                long long *more = PyMem_Realloc(keyhash, (size_t)grown * sizeof(long long));
                if (more == NULL) {
                    PyErr_NoMemory();
                    goto fail;
                }
                keyhash = more;
                keyhash_cap = grown;
            }
            memcpy(keyhash + keyhash_len, hashes, (size_t)nkeys * sizeof(long long));
        }
        long long crc;
        if (body_crc_of(m, &crc) < 0)
            goto fail;
        long long store_ts = m->has_store_ts ? m->store_ts : wall_clock_ms();
        unsigned char *rec = rb + rpos;
        encode_record(rec, m, crc, q->queue_offset, offset, store_ts);
        write_start(rec, m);
        plan[planned] = (placed_t){q, q->queue_offset, q->pos, offset, store_ts, keyhash_len, nkeys};
        keyhash_len += nkeys;
        ix_count += nkeys;
        q->queue_offset++;
        q->pos += cq_unit_size;
        q->max_phys = offset + m->total;
        rpos += m->total;
    }
    if (planned > 0) {
        /* into the segment with pwrite (no page fault a page): all but the first record's totalSize
         * and magic, then those, so a process killed half way leaves zeros where the part starts */
        const field_t *F = head_fields[ms[0].hosts_index];
        long long head = F[F_MAGIC].pos + F[F_MAGIC].width;
        if (F[F_TOTAL].pos + F[F_TOTAL].width > head)
            head = F[F_TOTAL].pos + F[F_TOTAL].width;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS
        err = pwrite_all(fd, rb + head, rpos - head, pos + head);
        if (!err)
            err = pwrite_all(fd, rb, head, pos);
        Py_END_ALLOW_THREADS
        if (err) {
            /* nothing is accounted: the queues' offsets and files stay as they were */
            out = Py_BuildValue("(nLLi)", (Py_ssize_t)start, pos, (long long)0, err);
            goto cleanup;
        }
    }
    /* then dispatched, in order: each record's consume queue unit and index entries */
    for (; done < planned; done++) {
        message_t *m = &ms[done];
        placed_t *p = &plan[done];
        queue_t *q = p->q;
        unsigned char *unit = (unsigned char *)q->mm.buf + p->unit_pos;
        put_be(unit + cq_unit[U_OFFSET].pos, cq_unit[U_OFFSET].width, p->offset);
        put_be(unit + cq_unit[U_SIZE].pos, cq_unit[U_SIZE].width, m->total);
        put_be(unit + cq_unit[U_CODE].pos, cq_unit[U_CODE].width, m->code);
        q->touched = 1;
        q->bytes_written += cq_unit_size;
        if (has_ix) {
            index_put(&ix, keyhash + p->key_at, p->nkeys, p->offset, p->store_ts);
            entries += p->nkeys;
        }
        PyObject *r = put_result(result_type, m, p->offset, p->queue_offset, p->store_ts);
        if (r == NULL || PyList_Append(results, r) < 0) {
            Py_XDECREF(r);
            failed = 1;
        } else {
            Py_DECREF(r);
        }
        last_ts = p->store_ts;
    }
    pos += rpos;
    for (Py_ssize_t k = 0; k < nq; k++)
        if (!qs[k].touched) /* opened, not written: as it was */
            qs[k].queue_offset = qs[k].first_queue_offset;
stop:
    /* what was written is accounted for, whatever comes next */
    for (Py_ssize_t k = 0; k < nq; k++)
        if (queue_store(&qs[k], table, NULL, NULL, NULL) < 0)
            failed = 1;
    if (has_ix && done > 0) {
        index_header_write(&ix); /* once, after the entries (as the Python put of many does) */
        if (index_store(&ix, service, entries, NULL, NULL, NULL) < 0)
            failed = 1;
    }
    if (failed)
        goto fail;
    out = Py_BuildValue("(nLLi)", done + (Py_ssize_t)start, pos, last_ts, 0);
    goto cleanup;
declined:
    PyErr_Clear();
    out = Py_NewRef(Py_None);
    goto cleanup;
fail:
    out = NULL;
cleanup:
    PyMem_Free(rb);
    PyMem_Free(plan);
    PyMem_Free(keyhash);
    if (has_ix)
        index_close(&ix);
    if (qs != NULL) {
        for (Py_ssize_t k = 0; k < nq; k++)
            queue_release(&qs[k]);
        PyMem_Free(qs);
    }
    if (ms != NULL) {
        for (Py_ssize_t k = 0; k < read && k < count; k++)
            message_clear(&ms[k]);
        PyMem_Free(ms);
    }
    Py_XDECREF(held);
    Py_XDECREF(held_ids);
    Py_XDECREF(held_stamps);
    return out;
}

/* ---- append(): one message a call, by an appender kept for the open store ------------------- */

/* A consume queue as the appender left it. Its state is taken again without being read when the
 * queue's writer, its current file, its entry in the topic queue table and the file's wrote
 * position are the very objects the appender saw and stored: any other put into the queue (the
 * Python paths, put_many) stores new ones, and then the queue is read again. */
typedef struct {
    PyObject *key;       /* (topic, queue id) */
    queue_t q;           /* q.mm is taken for a call only */
    PyObject *mm;        /* the file's map */
    PyObject *next_seen; /* the table's entry, as stored here */
    PyObject *pos_seen;  /* the file's wrote_position, as stored here */
} kept_queue_t;

#define MAX_KEPT_QUEUES 256

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *commit_log, *queues, *table, *reput, *checkpoint, *service, *shapes, *tags_codes, *encoder, *clock,
        *result_type, *acquire, *release; /* acquire and release: the store's put lock's */
    long long max_body, max_record, max_props, end_blank;
    /* the commit log's current file as last seen: its place, and its wrote position as stored here */
    PyObject *mf, *mf_mm, *mf_pos_seen;
    long long mf_base, mf_size, mf_pos, mf_backed;
    /* the index's current file as the appender left it (ix.mm taken for a call only); taken again
     * when the file and its index_count are the objects seen and stored (every put of entries
     * stores a new count) */
    index_t ix;
    int ix_kept;
    PyObject *ix_mm, *ix_count_seen;
    kept_queue_t *kept;
    Py_ssize_t nkept;
    /* async flush: the store's wake of the flusher (wake(offset) -> the offset to call it again at), and
     * that offset as it last said; called only from there on, so a call it skips is one that does nothing */
    PyObject *wake;
    long long wake_at;
    /* the shape of the message put last (prev.topic, born, store, sys_flag_obj and shape held; the rest
     * empty) and the encoder's own store host then: the next message of the same key takes it without
     * the encoder's cache (a shape is a function of its key and, for a message without a store host of
     * its own, of that host, whose change clears the cache) */
    message_t prev;
    PyObject *prev_host;
    uintptr_t ix_at; /* where the index file's map was at the last put: only ever a prefetch's address */
    topic_hash_t th;  /* the last topic's hash, th.topic held in th_topic */
    PyObject *th_topic;
} appender_t;

static void kept_queue_clear(kept_queue_t *e)
{
    if (e->q.has_mm)
        PyBuffer_Release(&e->q.mm);
    e->q.has_mm = 0;
    queue_release(&e->q);
    memset(&e->q, 0, sizeof(e->q));
    Py_CLEAR(e->key);
    Py_CLEAR(e->mm);
    Py_CLEAR(e->next_seen);
    Py_CLEAR(e->pos_seen);
}

static void appender_forget_index(appender_t *a)
{
    if (a->ix.has_mm)
        PyBuffer_Release(&a->ix.mm);
    a->ix.has_mm = 0;
    Py_CLEAR(a->ix.file);
    Py_CLEAR(a->ix.pages);
    memset(&a->ix, 0, sizeof(a->ix));
    a->ix_kept = 0;
    a->ix_at = 0;
    Py_CLEAR(a->ix_mm);
    Py_CLEAR(a->ix_count_seen);
}

static void appender_forget_file(appender_t *a)
{
    a->mf_backed = 0;
    Py_CLEAR(a->mf);
    Py_CLEAR(a->mf_mm);
    Py_CLEAR(a->mf_pos_seen);
}

static void appender_forget_shape(appender_t *a)
{
    message_clear(&a->prev);
    memset(&a->prev, 0, sizeof(a->prev));
    Py_CLEAR(a->prev_host);
}

/* the last message's shape as read_message's ``prev`` when it still holds (the encoder's store host
 * the one it was made with), else NULL */
static const message_t *appender_shape(appender_t *a)
{
    if (a->prev.shape == NULL)
        return NULL;
    if (a->prev.store != Py_None)
        return &a->prev; /* the message's own store host: the key says it all */
    PyObject *host = PyObject_GetAttr(a->encoder, a_store_host_of_encoder);
    Py_XDECREF(host); /* compared by identity only: held by the encoder or a->prev_host */
    if (host == NULL || host != a->prev_host) {
        PyErr_Clear();
        appender_forget_shape(a);
        return NULL;
    }
    return &a->prev;
}

/* m's shape kept for the next message (m read and checked) */
static void appender_keep_shape(appender_t *a, const message_t *m)
{
    if (m->shape == a->prev.shape && a->prev.shape != NULL)
        return;
    PyObject *host = NULL;
    if (m->store == Py_None) {
        host = PyObject_GetAttr(a->encoder, a_store_host_of_encoder);
        if (host == NULL) {
            PyErr_Clear();
            appender_forget_shape(a);
            return;
        }
    }
    appender_forget_shape(a);
    a->prev.topic = Py_NewRef(m->topic);
    a->prev.born = Py_NewRef(m->born);
    a->prev.store = Py_NewRef(m->store);
    a->prev.sys_flag_obj = Py_NewRef(m->sys_flag_obj);
    a->prev.shape = Py_NewRef(m->shape);
    a->prev_host = host;
}

/* everything kept: read again at the next call */
static void appender_forget(appender_t *a)
{
    appender_forget_file(a);
    appender_forget_index(a);
    for (Py_ssize_t k = 0; k < a->nkept; k++)
        kept_queue_clear(&a->kept[k]);
    a->nkept = 0;
}

static int appender_clear(PyObject *self)
{
    appender_t *a = (appender_t *)self;
    appender_forget(a);
    Py_CLEAR(a->commit_log);
    Py_CLEAR(a->queues);
    Py_CLEAR(a->table);
    Py_CLEAR(a->reput);
    Py_CLEAR(a->checkpoint);
    Py_CLEAR(a->service);
    Py_CLEAR(a->shapes);
    Py_CLEAR(a->tags_codes);
    Py_CLEAR(a->encoder);
    Py_CLEAR(a->clock);
    Py_CLEAR(a->result_type);
    Py_CLEAR(a->acquire);
    Py_CLEAR(a->release);
    Py_CLEAR(a->wake);
    appender_forget_shape(a);
    a->th.topic = NULL;
    Py_CLEAR(a->th_topic);
    return 0;
}

static int appender_traverse(PyObject *self, visitproc visit, void *arg)
{
    appender_t *a = (appender_t *)self;
    Py_VISIT(a->commit_log);
    Py_VISIT(a->queues);
    Py_VISIT(a->table);
    Py_VISIT(a->reput);
    Py_VISIT(a->checkpoint);
    Py_VISIT(a->service);
    Py_VISIT(a->shapes);
    Py_VISIT(a->tags_codes);
    Py_VISIT(a->encoder);
    Py_VISIT(a->clock);
    Py_VISIT(a->result_type);
    Py_VISIT(a->acquire);
    Py_VISIT(a->release);
    Py_VISIT(a->wake);
    Py_VISIT(a->prev.topic);
    Py_VISIT(a->prev.born);
    Py_VISIT(a->prev.store);
    Py_VISIT(a->prev.sys_flag_obj);
    Py_VISIT(a->prev.shape);
    Py_VISIT(a->prev_host);
    Py_VISIT(a->th_topic);
    Py_VISIT(a->mf);
    Py_VISIT(a->mf_mm);
    Py_VISIT(a->ix.file);
    Py_VISIT(a->ix_mm);
    for (Py_ssize_t k = 0; k < a->nkept; k++) {
        Py_VISIT(a->kept[k].key);
        Py_VISIT(a->kept[k].q.key);
        Py_VISIT(a->kept[k].q.cq);
        Py_VISIT(a->kept[k].q.file);
        Py_VISIT(a->kept[k].mm);
    }
    return 0;
}

static void appender_dealloc(PyObject *self)
{
    appender_t *a = (appender_t *)self;
    PyObject_GC_UnTrack(self);
    appender_clear(self);
    PyMem_Free(a->kept);
    Py_TYPE(self)->tp_free(self);
}

/* the commit log's current file and where the next record goes in it (its map taken into ``b``);
 * 0: not the common case (no file, its map closed, something left to dispatch) */
static int appender_file(appender_t *a, Py_buffer *b, long long *pos)
{
    PyObject *mf = PyObject_GetAttr(a->commit_log, a_last);
    if (mf == NULL || mf == Py_None) {
        Py_XDECREF(mf);
        return 0;
    }
    if (mf != a->mf) {
        appender_forget_file(a);
        a->mf_mm = slot_get(&mf_slots, mf, MF_MM);
        if (a->mf_mm == NULL || !mf_ll(mf, MF_FROM, &a->mf_base) || !mf_ll(mf, MF_SIZE, &a->mf_size)) {
            Py_DECREF(mf);
            Py_CLEAR(a->mf_mm);
            return 0;
        }
        a->mf = mf; /* (a file's place and size never change) */
    } else {
        Py_DECREF(mf);
    }
    PyObject *seen = slot_get(&mf_slots, a->mf, MF_WROTE);
    if (seen == NULL)
        return 0;
    if (seen != a->mf_pos_seen) {
        if (!int_of(seen, 0, INT64_MAX / 2, &a->mf_pos)) {
            Py_DECREF(seen);
            return 0;
        }
        Py_XSETREF(a->mf_pos_seen, seen);
    } else {
        Py_DECREF(seen);
    }
    long long reput_from;
    if (!attr_ll(a->reput, a_reput_from_offset, &reput_from) || reput_from != a->mf_base + a->mf_pos)
        return 0; /* something to dispatch first: Python */
    if (!map_buffer(a->mf_mm, b))
        return 0;
    *pos = a->mf_pos;
    return 1;
}

/* records placed in the current file up to ``pos``, the last stored at ``ts``: the file's wrote position
 * and store time, reput's offset (what was written is dispatched), the checkpoint's logics time; as
 * both puts leave them (the Python paths' _put_locked and _put_run with their dispatch); ``end``: an
 * object of the commit log offset of pos (or NULL) */
static int appender_file_store(appender_t *a, long long pos, PyObject *ts, PyObject *end)
{
    a->mf_pos = pos;
    end = end != NULL ? Py_NewRef(end) : PyLong_FromLongLong(a->mf_base + pos);
    int r = end == NULL || mf_set_ll(a->mf, MF_WROTE, pos, &a->mf_pos_seen) < 0 ||
            slot_set(&mf_slots, a->mf, MF_STORE_TS, ts) < 0 ||
            (a->checkpoint != Py_None && PyObject_SetAttr(a->checkpoint, a_logics_msg_timestamp, ts) < 0) ||
            PyObject_SetAttr(a->reput, a_reput_from_offset, end) < 0;
    Py_XDECREF(end);
    return r ? -1 : 0;
}

/* the consume queue of (topic, queue id) ready to take a unit at ``offset`` (its map taken); NULL when
 * not (a queue not there yet, a new file to make, a unit behind ...) */
static kept_queue_t *appender_queue(appender_t *a, PyObject *topic, long long queue_id, long long offset)
{
    kept_queue_t *e = NULL;
    for (Py_ssize_t k = 0; k < a->nkept && e == NULL; k++)
        if (a->kept[k].q.queue_id == queue_id && (a->kept[k].q.topic == topic || same(a->kept[k].q.topic, topic)))
            e = &a->kept[k];
    if (e == NULL) {
        if (a->nkept == MAX_KEPT_QUEUES) { /* many queues: kept again from the start */
            for (Py_ssize_t k = 0; k < a->nkept; k++)
                kept_queue_clear(&a->kept[k]);
            a->nkept = 0;
        }
        PyObject *qid = PyLong_FromLongLong(queue_id);
        PyObject *key = qid == NULL ? NULL : PyTuple_Pack(2, topic, qid);
        Py_XDECREF(qid);
        if (key == NULL)
            return NULL;
        e = &a->kept[a->nkept++];
        memset(e, 0, sizeof(*e));
        e->key = key;
        e->q.topic = PyTuple_GET_ITEM(key, 0);
        e->q.queue_id = queue_id;
    }
    PyObject *cq = PyDict_GetItemWithError(a->queues, e->key);
    PyObject *next = cq == NULL ? NULL : PyDict_GetItemWithError(a->table, e->key);
    if (cq == NULL || PyErr_Occurred())
        return NULL;
    PyObject *files = PyObject_GetAttr(cq, a_files);
    PyObject *file = files == NULL ? NULL : PyObject_GetAttr(files, a_last);
    Py_XDECREF(files);
    if (file == NULL)
        return NULL;
    int kept = e->q.cq == cq && e->q.file == file && next != NULL && next == e->next_seen;
    if (kept) {
        PyObject **pos = slot_at(&mf_slots, file, MF_WROTE);
        kept = pos != NULL && *pos == e->pos_seen;
    }
    Py_DECREF(file);
    if (!kept) {
        PyObject *key = e->key, *topic_of_key = e->q.topic;
        long long qid = e->q.queue_id;
        e->key = NULL;
        kept_queue_clear(e);
        e->key = key;
        if (!queue_open(&e->q, key, a->queues, a->table)) {
            e->q.topic = topic_of_key;
            e->q.queue_id = qid;
            return NULL;
        }
        e->q.topic = topic_of_key;
        e->q.queue_id = qid;
        e->mm = slot_get(&mf_slots, e->q.file, MF_MM); /* queue_open took the map: it is there */
        if (e->mm == NULL) {
            PyErr_Clear();
            kept_queue_clear(e);
            e->key = key;
            e->q.topic = topic_of_key;
            e->q.queue_id = qid;
            return NULL;
        }
    } else {
        if (!map_buffer(e->mm, &e->q.mm))
            return NULL;
        e->q.has_mm = 1;
    }
    if (e->q.file_size > e->q.mm.len || !queue_takes(&e->q, offset)) {
        PyBuffer_Release(&e->q.mm);
        e->q.has_mm = 0;
        return NULL;
    }
    return e;
}

/* the index's current file with room for ``nkeys`` entries past ``offset`` (its map taken); 0: not so */
static int appender_index(appender_t *a, long long offset, Py_ssize_t nkeys)
{
    PyObject *file = PyObject_GetAttr(a->service, a_last);
    if (file == NULL)
        return 0;
    int kept = a->ix_kept && file == a->ix.file;
    if (kept) {
        PyObject *count = PyObject_GetAttr(file, a_index_count);
        kept = count != NULL && count == a->ix_count_seen;
        Py_XDECREF(count);
        PyErr_Clear();
    }
    Py_DECREF(file);
    if (kept) {
        if (!map_buffer(a->ix_mm, &a->ix.mm))
            return 0;
        a->ix.has_mm = 1;
        if (index_header_size + a->ix.slots * slot_width + a->ix.index_num * entry_size > a->ix.mm.len ||
            a->ix.count >= a->ix.index_num)
            return 0;
    } else {
        appender_forget_index(a);
        if (!index_open(a->service, &a->ix))
            return 0;
        a->ix_mm = PyObject_GetAttr(a->ix.file, a_mm); /* index_open took the map: it is there */
        if (a->ix_mm == NULL)
            return 0;
        a->ix_kept = 1;
    }
    return !(nkeys < 0 || offset < a->ix.end_phy || a->ix.count + nkeys > a->ix.index_num);
}

/* appender(msg): append()'s doAppend and dispatch of one message in the common case: its record
 * encoded where it goes in the commit log's map (totalSize and magic last), its consume queue unit,
 * its index entries and the index header, and the store's state (the file's wrote position and store
 * time, the queue table, the queue's file and counts, the index file's header fields, reput's offset,
 * the checkpoint's logics time) set as the Python path sets it. The message goes when its queue is
 * there and takes its unit at its end in its current file, the record fits in the current segment,
 * nothing waits for dispatch, and it is the common case; else None, nothing written, nothing read
 * from the clock. */
static PyObject *appender_put(appender_t *a, PyObject *msg, long long *wrote)
{
    /* the message's own objects (its map, stored properties, born host) are asked for at once: their
     * cache misses overlap instead of coming one after the other as read_message reaches them */
    static const int own[] = {M_PROPERTIES, M_PROPERTIES_STRING, M_BORN_HOST};
    for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
        PyObject **at = slot_at(&msg_slots, msg, own[k]);
        if (at != NULL && *at != NULL)
            __builtin_prefetch(*at, 1, 3);
    }
    PyObject *append_prop_crc = PyObject_GetAttr(a->encoder, a_append_prop_crc);
    if (append_prop_crc == NULL)
        return NULL;
    PyObject *qid = msg_get(msg, M_QUEUE_ID);
    message_t m;
    int ok = qid != NULL && read_message(msg, qid, a->shapes, a->tags_codes, append_prop_crc, a->max_body,
                                         a->max_record, a->max_props, appender_shape(a), &m);
    Py_XDECREF(qid);
    Py_DECREF(append_prop_crc);
    if (!ok) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    appender_keep_shape(a, &m);
    PyObject *out = NULL;
    Py_buffer clb;
    int has_cl = 0, written = 0;
    kept_queue_t *e = NULL;
    long long hashes[MAX_KEYS], pos;
    Py_ssize_t nkeys = 0;
    if (a->service != Py_None) {
        nkeys = key_hashes(m.topic, m.uniq, m.keys, hashes, MAX_KEYS, &a->th);
        if (a->th.topic != a->th_topic) /* held, so that no other str takes its address */
            Py_XSETREF(a->th_topic, Py_NewRef(a->th.topic));
        /* the hash slots are read far apart in the slot table: asked for now, they are in the cache by
         * the time index_put reads them (a hint: the address is never dereferenced here) */
        if (a->ix_kept && a->ix_at != 0 && a->ix.slots > 0)
            for (Py_ssize_t k = 0; k < nkeys; k++)
                __builtin_prefetch((const void *)(a->ix_at + (uintptr_t)index_header_size +
                                                  (uintptr_t)(hashes[k] % a->ix.slots) * (uintptr_t)slot_width),
                                   1, 1);
    }
    if (!(has_cl = appender_file(a, &clb, &pos)))
        goto declined;
    long long offset = a->mf_base + pos;
    if (pos + m.total + a->end_blank > a->mf_size || pos > clb.len || m.total > clb.len - pos)
        goto declined; /* the next segment: Python */
    if ((e = appender_queue(a, m.topic, m.queue_id, offset)) == NULL)
        goto declined;
    if (a->service != Py_None) {
        if (!appender_index(a, offset, nkeys))
            goto declined;
        a->ix_at = (uintptr_t)a->ix.mm.buf;
    }
    /* every byte the put writes through a map allocated first; a full disk stops it here */
    if (backed_to(a->mf, pos + m.total, &a->mf_backed) < 0 ||
        backed_to(e->q.file, e->q.pos + cq_unit_size, &e->q.backed) < 0 ||
        (a->service != Py_None && index_backed(&a->ix, hashes, nkeys) < 0))
        goto fail;
    long long crc;
    if (body_crc_of(&m, &crc) < 0)
        goto fail;
    long long store_ts;
    if (m.has_store_ts) {
        store_ts = m.store_ts;
    } else if (a->clock == Py_None) {
        store_ts = wall_clock_ms();
    } else {
        PyObject *now = PyObject_CallNoArgs(a->clock);
        if (now == NULL)
            goto fail;
        store_ts = PyLong_AsLongLong(now);
        Py_DECREF(now);
        if (store_ts == -1 && PyErr_Occurred())
            goto fail;
    }
    /* the broker's order: the record (its start last), its unit, its index entries */
    written = 1;
    queue_t *q = &e->q;
    unsigned char *rec = (unsigned char *)clb.buf + pos;
    encode_record(rec, &m, crc, q->queue_offset, offset, store_ts);
    write_start(rec, &m);
    unsigned char *unit = (unsigned char *)q->mm.buf + q->pos;
    put_be(unit + cq_unit[U_OFFSET].pos, cq_unit[U_OFFSET].width, offset);
    put_be(unit + cq_unit[U_SIZE].pos, cq_unit[U_SIZE].width, m.total);
    put_be(unit + cq_unit[U_CODE].pos, cq_unit[U_CODE].width, m.code);
    if (a->service != Py_None) {
        index_put(&a->ix, hashes, nkeys, offset, store_ts);
        index_header_write(&a->ix);
    }
    long long queue_offset = q->queue_offset;
    q->touched = 1;
    q->queue_offset++;
    q->pos += cq_unit_size;
    q->max_phys = offset + m.total;
    q->bytes_written += cq_unit_size;
    /* one object a value: the record's offset (the result's, the index's end), its end (reput's, the
     * queue's max physical offset), its store time; the queue offset is the table's entry as it was */
    PyObject *ts_obj = PyLong_FromLongLong(store_ts), *offset_obj = PyLong_FromLongLong(offset);
    PyObject *end_obj = PyLong_FromLongLong(offset + m.total);
    PyObject *qo_obj = e->next_seen != NULL ? Py_NewRef(e->next_seen) : PyLong_FromLongLong(queue_offset);
    int stored = ts_obj != NULL && offset_obj != NULL && end_obj != NULL && qo_obj != NULL &&
                 queue_store(q, a->table, &e->next_seen, &e->pos_seen, end_obj) == 0 &&
                 (a->service == Py_None ||
                  index_store(&a->ix, a->service, nkeys, &a->ix_count_seen, offset_obj, ts_obj) == 0) &&
                 appender_file_store(a, pos + m.total, ts_obj, end_obj) == 0;
    Py_XDECREF(end_obj);
    if (!stored) {
        Py_XDECREF(ts_obj);
        Py_XDECREF(offset_obj);
        Py_XDECREF(qo_obj);
        goto fail;
    }
    out = put_result_of(a->result_type, &m, offset_obj, qo_obj, ts_obj);
    if (out == NULL)
        goto fail;
    *wrote = offset;
    goto done;
declined:
    PyErr_Clear();
    out = Py_NewRef(Py_None);
    goto done;
fail:
    out = NULL;
    if (written)
        appender_forget(a); /* half stored: everything is read again */
done:
    if (e != NULL && e->q.has_mm) {
        PyBuffer_Release(&e->q.mm);
        e->q.has_mm = 0;
    }
    if (e != NULL)
        e->q.touched = 0;
    if (a->ix.has_mm) {
        PyBuffer_Release(&a->ix.mm);
        a->ix.has_mm = 0;
    }
    if (has_cl)
        PyBuffer_Release(&clb);
    message_clear(&m);
    return out;
}

/* appender(msg): appender_put in the store's put lock */
static PyObject *appender_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    appender_t *a = (appender_t *)self;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "appender(msg)");
        return NULL;
    }
    PyObject *got = PyObject_CallNoArgs(a->acquire);
    if (got == NULL)
        return NULL;
    Py_DECREF(got);
    long long wrote = 0;
    PyObject *out = appender_put(a, args[0], &wrote);
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace); /* an error of the put stays the one raised */
    got = PyObject_CallNoArgs(a->release);
    if (got == NULL) {
        Py_XDECREF(out);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(trace);
        return NULL;
    }
    Py_DECREF(got);
    PyErr_Restore(type, value, trace);
    if (out != NULL && out != Py_None && a->wake != NULL && wrote >= a->wake_at) {
        /* out of the lock, as append() wakes the flusher after a put */
        PyObject *at = PyObject_CallOneArg(a->wake, PyTuple_GET_ITEM(out, 1));
        long long next;
        if (at == NULL || !int_of(at, INT64_MIN, INT64_MAX, &next)) {
            if (at != NULL && !PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "the flusher's wake gave no int");
            Py_XDECREF(at);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(at);
        a->wake_at = next;
    }
    return out;
}

/* appender.put_many(messages, start, queue_ids, stamps, results): put_many_run from messages[start] into
 * the commit log's current file (the put lock held by the caller), then the file's, reput's and the
 * checkpoint's bookkeeping as for one message (appender_file_store). None when the store is not in
 * the common case (no file, something to dispatch first) or put_many_run declined; else (messages done,
 * the file's new wrote position, errno: 0, or the write's error with nothing written or accounted). */
static PyObject *appender_put_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    appender_t *a = (appender_t *)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "put_many(messages, start, queue_ids, stamps, results)");
        return NULL;
    }
    Py_buffer clb;
    long long pos, fd;
    if (!appender_file(a, &clb, &pos)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyBuffer_Release(&clb); /* written with pwrite, not through the map */
    if (!mf_ll(a->mf, MF_FD, &fd)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *append_prop_crc = PyObject_GetAttr(a->encoder, a_append_prop_crc);
    if (append_prop_crc == NULL)
        return NULL;
    PyObject *fd_obj = PyLong_FromLongLong(fd), *pos_obj = PyLong_FromLongLong(pos);
    PyObject *base_obj = PyLong_FromLongLong(a->mf_base), *limit_obj = PyLong_FromLongLong(a->mf_size - a->end_blank);
    PyObject *max_body = PyLong_FromLongLong(a->max_body), *max_record = PyLong_FromLongLong(a->max_record);
    PyObject *max_props = PyLong_FromLongLong(a->max_props);
    PyObject *got = NULL;
    if (fd_obj != NULL && pos_obj != NULL && base_obj != NULL && limit_obj != NULL && max_body != NULL &&
        max_record != NULL && max_props != NULL) {
        PyObject *run[20] = {args[0], args[1], args[2], args[3], fd_obj, pos_obj, base_obj, limit_obj, a->queues,
                             a->table, a->service, a->shapes, a->tags_codes, append_prop_crc, max_body, max_record,
                             max_props, a->result_type, args[4], a->clock};
        got = put_many_run(run);
    }
    Py_DECREF(append_prop_crc);
    Py_XDECREF(fd_obj);
    Py_XDECREF(pos_obj);
    Py_XDECREF(base_obj);
    Py_XDECREF(limit_obj);
    Py_XDECREF(max_body);
    Py_XDECREF(max_record);
    Py_XDECREF(max_props);
    if (got == NULL || got == Py_None)
        return got;
    Py_ssize_t done;
    long long start, new_pos, last_ts;
    int err;
    if (!PyArg_ParseTuple(got, "nLLi", &done, &new_pos, &last_ts, &err) || !int_of(args[1], 0, PY_SSIZE_T_MAX, &start)) {
        Py_DECREF(got);
        return NULL;
    }
    Py_DECREF(got);
    if (!err && done > start) {
        PyObject *ts = PyLong_FromLongLong(last_ts);
        int r = ts == NULL ? -1 : appender_file_store(a, new_pos, ts, NULL);
        Py_XDECREF(ts);
        if (r < 0) {
            appender_forget(a);
            return NULL;
        }
    }
    return Py_BuildValue("(nLi)", done, new_pos, err);
}

static PyMethodDef appender_methods[] = {
    {"put_many", (PyCFunction)(void (*)(void))appender_put_many, METH_FASTCALL,
     "put_many(messages, start, queue_ids, stamps, results): append_many's put of messages in a row "
     "(engine/store.py _put_many_native), in the put lock the caller holds."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject appender_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rmqtool.native._kernel.Appender",
    .tp_basicsize = sizeof(appender_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(appender_t, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = appender_dealloc,
    .tp_traverse = appender_traverse,
    .tp_clear = appender_clear,
    .tp_methods = appender_methods,
    .tp_doc = "append()'s put of one message in C, for one open store (appender(commit_log, ...)).",
};

/* appender(commit_log, queues, table, reput, checkpoint, index_service, shapes, tags_codes, encoder,
 *          clock, max_body, max_record, max_props, result_type, end_blank, put_lock, wake): the Appender of
 * an open store (engine/store.py), or None when these are not what it takes; ``wake``: None, or (async
 * flush) the store's wake of the flusher, called after a put once the offset reaches what it last gave */
static PyObject *appender_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "appender takes 17 arguments");
        return NULL;
    }
    if (!layout_set) {
        PyErr_SetString(PyExc_RuntimeError, "set_append_layout was not called");
        return NULL;
    }
    long long max_body, max_record, max_props, end_blank;
    if (!int_of(args[10], 0, INT64_MAX, &max_body) || !int_of(args[11], 0, INT64_MAX, &max_record) ||
        !int_of(args[12], 0, INT64_MAX, &max_props) || !int_of(args[14], 0, INT64_MAX, &end_blank) ||
        !PyDict_Check(args[1]) || !PyDict_Check(args[2]) || !PyDict_Check(args[6]) || !PyDict_Check(args[7]) ||
        !PyType_Check(args[13]) || !PyType_IsSubtype((PyTypeObject *)args[13], &PyTuple_Type))
        Py_RETURN_NONE;
    if (!(appender_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&appender_type) < 0)
        return NULL;
    appender_t *a = PyObject_GC_New(appender_t, &appender_type);
    if (a == NULL)
        return NULL;
    memset((char *)a + sizeof(PyObject), 0, sizeof(appender_t) - sizeof(PyObject));
    a->vectorcall = appender_call;
    a->kept = PyMem_Calloc(MAX_KEPT_QUEUES, sizeof(kept_queue_t));
    if (a->kept == NULL) {
        Py_DECREF(a);
        return PyErr_NoMemory();
    }
    PyObject **slots[] = {&a->commit_log, &a->queues, &a->table, &a->reput, &a->checkpoint, &a->service,
                          &a->shapes, &a->tags_codes, &a->encoder, &a->clock};
    for (int i = 0; i < 10; i++)
        *slots[i] = Py_NewRef(args[i]);
    a->result_type = Py_NewRef(args[13]);
    a->wake = args[16] == Py_None ? NULL : Py_NewRef(args[16]);
    a->wake_at = INT64_MIN; /* asked at the first put */
    a->acquire = PyObject_GetAttrString(args[15], "acquire");
    a->release = PyObject_GetAttrString(args[15], "release");
    if (a->acquire == NULL || a->release == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    a->max_body = max_body;
    a->max_record = max_record;
    a->max_props = max_props;
    a->end_blank = end_blank;
    PyObject_GC_Track(a);
    return (PyObject *)a;
}

PyMethodDef rmq_append_methods[] = {
    {"set_append_layout", set_append_layout, METH_VARARGS,
     "set_append_layout(heads, head_sizes, prop_len_width, index_header, index_header_size, slot_width, "
     "index_entry, entry_size, invalid_index, time_diff_max, cq_unit, cq_unit_size, crc_mask, property_names, "
     "key_separator, key_space, put_ok): the layouts the append functions write, from formats/."},
    {"appender", (PyCFunction)(void (*)(void))appender_new, METH_FASTCALL,
     "appender(commit_log, queues, table, reput, checkpoint, index_service, shapes, tags_codes, encoder, clock, "
     "max_body, max_record, max_props, result_type, end_blank, put_lock, wake): append()'s put of one message, "
     "for one open store (engine/store.py); called with a message, in the put lock, its PutResult or None (then "
     "wake(offset), when given, once the offset reaches what wake last returned)."},
    {NULL, NULL, 0, NULL},
};
