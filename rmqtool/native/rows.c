/* dump's JSON Lines rows: a window's clean records written as report/records.message_record
 * rows encoded by orjson, byte for byte, into one bytes object.
 *
 * The Python row (message_record, then orjson) is the definition; this is a fast copy of its
 * common case. A record the copy does not cover is declined: the call stops there and says
 * how many rows it wrote, and the caller builds that record's row in Python. Declined: a
 * topic or property string that is not printable ASCII (tab and the like are escaped as orjson
 * escapes them), properties that are not the common string, a property name twice, a
 * compressed body, a failed CRC, a physicalOffset naming another place, an IPv4-mapped IPv6
 * address (Python versions print it differently), any span outside the buffer.
 *
 * The record's reading is record.c's (its layout set from Python, set_record_layout), its text's
 * writing text.c's; the row's keys come from Python (set_row_keys), from a row made by
 * message_record itself. */
#include "kernel.h"
#include <string.h>

/* the row's keys, each written as "key": in this order (message_record's) */
enum { K_RECORD, K_COMMIT_LOG_OFFSET, K_STORE_SIZE, K_MAGIC_CODE, K_MESSAGE_VERSION, K_BODY_CRC, K_BODY_CRC_OK,
       K_QUEUE_ID, K_FLAG, K_QUEUE_OFFSET, K_PHYSICAL_OFFSET, K_SYS_FLAG, K_BORN_TIMESTAMP, K_BORN_HOST,
       K_STORE_TIMESTAMP, K_STORE_HOST, K_RECONSUME_TIMES, K_PREPARED, K_BODY_LENGTH, K_BODY_COMPRESSION,
       K_BODY, K_TOPIC, K_PROPERTIES, K_PROPERTIES_RAW, K_TAGS, K_KEYS, K_UNIQ_KEY, K_MSG_ID, K_FILE,
       K_FILE_POSITION, K_PROPERTY_CRC_OK, N_KEYS };
#define KEY_MAX 64
#define KEY_COPY 32  /* a key's bytes copied at once: the longest key fits */

/* what Python sets once (set_row_keys) */
static struct {
    int ready;
    char key[N_KEYS][KEY_MAX];
    Py_ssize_t key_len[N_KEYS];
    char record_value[KEY_MAX];  /* "message", JSON-encoded */
    Py_ssize_t record_value_len;
} L;

/* --- the output buffer -------------------------------------------------------------------- */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} out_t;

/* a key copied whole, KEY_COPY bytes in four moves (the row's bound leaves room past it) */
static char *put_key(char *w, int k)
{
    const char *key = L.key[k];
    for (int b = 0; b < KEY_COPY; b += 8) {
        uint64_t word;
        memcpy(&word, key + b, 8);
        memcpy(w + b, &word, 8);
    }
    return w + L.key_len[k];
}

static char *put_string(char *w, const unsigned char *s, Py_ssize_t n)
{
    *w++ = '"';
    w = rmq_put_json_escaped(w, s, n);
    *w++ = '"';
    return w;
}

/* a JSON string of the base64 of s */
static char *put_base64(char *w, const unsigned char *s, Py_ssize_t n)
{
    *w++ = '"';
    w = rmq_put_base64(w, s, n);
    *w++ = '"';
    return w;
}

/* "ip:port" or "[v6]:port" as store/hosts.format_host writes it; NULL when declined */
static char *put_host(char *w, const unsigned char *ip, Py_ssize_t ip_len, int64_t port)
{
    *w++ = '"';
    if (ip_len == 4) {
        for (int k = 0; k < 4; k++) {
            if (k)
                *w++ = '.';
            w = rmq_put_int(w, ip[k]);
        }
    } else if (ip_len == 16) {
        unsigned h[8];
        for (int k = 0; k < 8; k++)
            h[k] = ((unsigned)ip[2 * k] << 8) | ip[2 * k + 1];
        if (!h[0] && !h[1] && !h[2] && !h[3] && !h[4] && h[5] == 0xFFFF)
            return NULL;  /* IPv4-mapped: printed dotted by newer Pythons */
        /* ipaddress's compression: the longest run of two or more zero hextets, the first of equals */
        int best = -1, best_len = 0;
        for (int k = 0; k < 8;) {
            if (h[k]) {
                k++;
                continue;
            }
            int e = k;
            while (e < 8 && !h[e])
                e++;
            if (e - k > best_len) {
                best = k;
                best_len = e - k;
            }
            k = e;
        }
        if (best_len < 2)
            best = -1;
        *w++ = '[';
        for (int k = 0; k < 8; k++) {
            if (k == best) {
                *w++ = ':';
                if (k == 0)
                    *w++ = ':';
                k += best_len - 1;
                continue;
            }
            char tmp[4];
            int n = 0;
            unsigned v = h[k];
            do {
                tmp[n++] = rmq_hex_lower[v & 15];
                v >>= 4;
            } while (v);
            while (n)
                *w++ = tmp[--n];
            if (k < 7)
                *w++ = ':';
        }
        *w++ = ']';
    } else {
        return NULL;
    }
    *w++ = ':';
    w = rmq_put_int(w, port);
    *w++ = '"';
    return w;
}

/* The most a record's row takes: keys and numbers (and a key's whole copy past the row's end),
 * the file's name, each string at most 6 bytes a byte (the properties: as the dict, then their
 * values again as tags, keys, uniq_key, then in base64), the body in base64. */
static Py_ssize_t row_bound(const int64_t *s, Py_ssize_t file_json_len, int body_base64)
{
    int64_t topic_len = s[RMQ_S_TOPIC_END] - s[RMQ_S_TOPIC_AT], props_len = s[RMQ_S_END] - s[RMQ_S_PROPS_AT];
    int64_t body_len = s[RMQ_S_BODY_END] - s[RMQ_S_BODY_AT];
    if (topic_len < 0 || props_len < 0 || body_len < 0 || topic_len > 1 << 30 || props_len > 1 << 30
        || body_len > 1 << 30)
        return -1;
    return (Py_ssize_t)(2048 + KEY_MAX + file_json_len + 6 * topic_len + 14 * props_len + 16
                        + (body_base64 ? 2 * body_len + 8 : 0));
}

/* One record's row appended to o; 0 when declined (o is left as it was), -1 when o lacks room. */
static int write_row(out_t *o, const unsigned char *buf, Py_ssize_t buf_len, const int64_t *s,
                     const unsigned char *v, int64_t offset0, int64_t position0, const char *file_json,
                     Py_ssize_t file_json_len, int body_base64)
{
    rmq_record r;
    if (!rmq_read_record(&r, buf, buf_len, s, v, offset0, position0) || !r.topic_ascii || !r.props_ascii)
        return 0;  /* JSON of non-ASCII strings is the Python path's */
    const unsigned char *rec = r.rec, *topic = r.topic, *props = r.props;
    Py_ssize_t topic_len = r.topic_len, props_len = r.props_len, body_len = r.body_len;
    int64_t offset = r.offset, sys_flag = r.sys_flag;
    const rmq_property_span *sp = r.sp;
    int np = r.np, tags = r.tags, keys = r.keys, uniq = r.uniq;
    Py_ssize_t bound = row_bound(s, file_json_len, body_base64);
    if (bound < 0 || o->cap - o->len < bound)
        return -1;  /* cannot be: the caller made room for every record's bound */
    char *w = o->p + o->len;
    int k = r.kind;
    uint32_t magic = (uint32_t)rmq_field(rec, k, RMQ_F_MAGIC);

    *w++ = '{';
    w = put_key(w, K_RECORD);
    w = rmq_put(w, L.record_value, L.record_value_len);
    w = put_key(w, K_COMMIT_LOG_OFFSET);
    w = rmq_put_int(w, offset);
    w = put_key(w, K_STORE_SIZE);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_STORE_SIZE));
    w = put_key(w, K_MAGIC_CODE);
    w = rmq_put(w, "\"0x", 3);
    w = rmq_put_hex_upper(w, magic, 8);
    *w++ = '"';
    w = put_key(w, K_MESSAGE_VERSION);
    w = rmq_put_int(w, magic == rmq_layout.magic_v2 ? 2 : 1);
    w = put_key(w, K_BODY_CRC);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_BODY_CRC));
    w = put_key(w, K_BODY_CRC_OK);
    if (v == NULL)
        w = rmq_put(w, "null", 4);
    else
        w = rmq_put(w, "true", 4);
    w = put_key(w, K_QUEUE_ID);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_QUEUE_ID));
    w = put_key(w, K_FLAG);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_FLAG));
    w = put_key(w, K_QUEUE_OFFSET);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_QUEUE_OFFSET));
    w = put_key(w, K_PHYSICAL_OFFSET);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_PHYSICAL_OFFSET));
    w = put_key(w, K_SYS_FLAG);
    w = rmq_put_int(w, sys_flag);
    w = put_key(w, K_BORN_TIMESTAMP);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_BORN_TIMESTAMP));
    w = put_key(w, K_BORN_HOST);
    w = put_host(w, rec + rmq_layout.at[k][RMQ_F_BORN_IP], rmq_layout.size[k][RMQ_F_BORN_IP], rmq_field(rec, k, RMQ_F_BORN_PORT));
    if (w == NULL)
        return 0;
    w = put_key(w, K_STORE_TIMESTAMP);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_STORE_TIMESTAMP));
    w = put_key(w, K_STORE_HOST);
    const unsigned char *store_ip = rec + rmq_layout.at[k][RMQ_F_STORE_IP];
    Py_ssize_t store_ip_len = rmq_layout.size[k][RMQ_F_STORE_IP];
    int64_t store_port = rmq_field(rec, k, RMQ_F_STORE_PORT);
    w = put_host(w, store_ip, store_ip_len, store_port);
    if (w == NULL)
        return 0;
    w = put_key(w, K_RECONSUME_TIMES);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_RECONSUME));
    w = put_key(w, K_PREPARED);
    w = rmq_put_int(w, rmq_field(rec, k, RMQ_F_PREPARED));
    w = put_key(w, K_BODY_LENGTH);
    w = rmq_put_int(w, body_len);
    w = put_key(w, K_BODY_COMPRESSION);
    w = rmq_put(w, "null", 4);
    w = put_key(w, K_BODY);
    if (body_base64)
        w = put_base64(w, r.body, body_len);
    else
        w = rmq_put(w, "null", 4);
    w = put_key(w, K_TOPIC);
    w = put_string(w, topic, topic_len);
    w = put_key(w, K_PROPERTIES);
    *w++ = '{';
    for (int a = 0; a < np; a++) {
        if (a)
            *w++ = ',';
        w = put_string(w, props + sp[a].name_at, sp[a].name_len);
        *w++ = ':';
        w = put_string(w, props + sp[a].value_at, sp[a].value_len);
    }
    *w++ = '}';
    w = put_key(w, K_PROPERTIES_RAW);
    w = put_base64(w, props, props_len);
    w = put_key(w, K_TAGS);
    if (tags >= 0)
        w = put_string(w, props + sp[tags].value_at, sp[tags].value_len);
    else
        w = rmq_put(w, "null", 4);
    w = put_key(w, K_KEYS);
    *w++ = '[';
    if (keys >= 0) {  /* a JSON list of the keys */
        const unsigned char *kv = props + sp[keys].value_at;
        Py_ssize_t i = 0, at, len;
        for (int first = 1; (at = rmq_next_key(kv, sp[keys].value_len, &i, &len)) >= 0; first = 0) {
            if (!first)
                *w++ = ',';
            w = put_string(w, kv + at, len);
        }
    }
    *w++ = ']';
    w = put_key(w, K_UNIQ_KEY);
    if (uniq >= 0)
        w = put_string(w, props + sp[uniq].value_at, sp[uniq].value_len);
    else
        w = rmq_put(w, "null", 4);
    w = put_key(w, K_MSG_ID);
    *w++ = '"';
    for (Py_ssize_t b = 0; b < store_ip_len; b++) {
        *w++ = rmq_hex_upper[store_ip[b] >> 4];
        *w++ = rmq_hex_upper[store_ip[b] & 15];
    }
    w = rmq_put_hex_upper(w, (uint32_t)store_port, 8);
    w = rmq_put_hex_upper(w, (uint64_t)offset, 16);
    *w++ = '"';
    w = put_key(w, K_FILE);
    w = rmq_put(w, file_json, file_json_len);
    w = put_key(w, K_FILE_POSITION);
    w = rmq_put_int(w, r.position);
    if (v != NULL && v[RMQ_V_HAS_ENTRY]) {
        w = put_key(w, K_PROPERTY_CRC_OK);
        w = rmq_put(w, "true", 4);
    }
    w = rmq_put(w, "}\n", 2);
    o->len = w - o->p;
    return 1;
}

/* where rows are written before their bytes are made; kept between calls, grown as needed */
static char *scratch = NULL;
static Py_ssize_t scratch_cap = 0;

static PyObject *jsonl_rows(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *spans_obj, *verdicts_obj;
    Py_ssize_t first;
    long long offset0, position0;
    const char *file_json;
    Py_ssize_t file_json_len;
    int body_base64;
    if (!PyArg_ParseTuple(args, "OOOnLLy#p", &buf_obj, &spans_obj, &verdicts_obj, &first, &offset0, &position0,
                          &file_json, &file_json_len, &body_base64))
        return NULL;
    if (!L.ready || !rmq_layout.ready)
        Py_RETURN_NONE;  /* set_row_keys or set_record_layout not called: decline all */
    if (first < 0 || file_json_len > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "jsonl_rows: first or file out of range");
        return NULL;
    }
    rmq_window win;
    if (rmq_window_get(&win, buf_obj, spans_obj, verdicts_obj) < 0)
        return NULL;
    PyObject *result = NULL;
    out_t o = {NULL, 0, 0};
    Py_ssize_t n = win.n;
    const int64_t *s = win.spans.buf;
    const unsigned char *v = win.have_verdicts ? win.verdicts.buf : NULL;
    /* the rows are written into the scratch buffer, grown to the bound of them all (of the
     * records up to a bound that cannot be: declined there), then copied into bytes of their
     * size: a buffer made at the bound each call would cost fresh pages each call */
    Py_ssize_t upto = first, total = 0;
    for (; upto < n; upto++) {
        Py_ssize_t b = row_bound(s + upto * RMQ_N_SPANS, file_json_len, body_base64);
        if (b < 0 || total > PY_SSIZE_T_MAX / 4 - b)
            break;
        total += b;
    }
    if (total > scratch_cap) {
        char *p = PyMem_RawRealloc(scratch, (size_t)total);
        if (p == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        scratch = p;
        scratch_cap = total;
    }
    o.p = scratch;
    o.cap = total;
    Py_ssize_t k = first;
    for (; k < upto; k++) {
        int got = write_row(&o, win.buf.buf, win.buf.len, s + k * RMQ_N_SPANS, v ? v + k * RMQ_N_VERDICTS : NULL, offset0,
                            position0, file_json, file_json_len, body_base64);
        if (got <= 0)
            break;  /* declined (no room cannot happen: the bound was made for it) */
    }
    PyObject *data = PyBytes_FromStringAndSize(o.p, o.len);
    if (data != NULL)
        result = Py_BuildValue("Nn", data, k - first);
done:
    rmq_window_release(&win);
    return result;
}

/* set_row_keys(keys, record_value): keys: N_KEYS JSON texts '"key":' (the first without its
 * comma); record_value: the row's "record" value, JSON-encoded. */
static PyObject *set_row_keys(PyObject *self, PyObject *args)
{
    PyObject *keys;
    const char *record_value;
    Py_ssize_t record_value_len;
    if (!PyArg_ParseTuple(args, "O!y#", &PyTuple_Type, &keys, &record_value, &record_value_len))
        return NULL;
    L.ready = 0;
    if (PyTuple_GET_SIZE(keys) != N_KEYS || record_value_len >= KEY_MAX) {
        PyErr_SetString(PyExc_ValueError, "set_row_keys: wrong counts");
        return NULL;
    }
    for (int k = 0; k < N_KEYS; k++) {
        const char *text;
        Py_ssize_t len;
        if (!PyArg_Parse(PyTuple_GET_ITEM(keys, k), "y#", &text, &len))
            return NULL;
        if (len > KEY_COPY) {
            PyErr_SetString(PyExc_ValueError, "set_row_keys: a key too long");
            return NULL;
        }
        memcpy(L.key[k], text, (size_t)len);
        L.key_len[k] = len;
    }
    memcpy(L.record_value, record_value, (size_t)record_value_len);
    L.record_value_len = record_value_len;
    L.ready = 1;
    Py_RETURN_NONE;
}

PyMethodDef rmq_rows_methods[] = {
    {"jsonl_rows", jsonl_rows, METH_VARARGS,
     "jsonl_rows(buf, spans, verdicts, first, offset0, position0, file_json, body_base64) -> (bytes, rows): "
     "the JSON Lines rows of records first.. up to the first one declined; None before set_row_keys and "
     "set_record_layout"},
    {"set_row_keys", set_row_keys, METH_VARARGS,
     "set_row_keys(keys, record_value): the row's keys and its record value, from Python once"},
    {NULL, NULL, 0, NULL},
};
