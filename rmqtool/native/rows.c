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
 * The header's field positions (by hosts kind), the row's keys, the property names read and
 * the flags come from Python (set_row_layout), derived from formats/ and from a row made by
 * message_record itself. */
#include "kernel.h"
#include <string.h>

/* --- what Python sets once (set_row_layout) -------------------------------------------- */
enum { F_STORE_SIZE, F_MAGIC, F_BODY_CRC, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_PHYSICAL_OFFSET, F_SYS_FLAG,
       F_BORN_TIMESTAMP, F_BORN_IP, F_BORN_PORT, F_STORE_TIMESTAMP, F_STORE_IP, F_STORE_PORT, F_RECONSUME,
       F_PREPARED, N_FIELDS };
#define HOST_KINDS 4
/* the row's keys, each written as "key": in this order (message_record's) */
enum { K_RECORD, K_COMMIT_LOG_OFFSET, K_STORE_SIZE, K_MAGIC_CODE, K_MESSAGE_VERSION, K_BODY_CRC, K_BODY_CRC_OK,
       K_QUEUE_ID, K_FLAG, K_QUEUE_OFFSET, K_PHYSICAL_OFFSET, K_SYS_FLAG, K_BORN_TIMESTAMP, K_BORN_HOST,
       K_STORE_TIMESTAMP, K_STORE_HOST, K_RECONSUME_TIMES, K_PREPARED, K_BODY_LENGTH, K_BODY_COMPRESSION,
       K_BODY, K_TOPIC, K_PROPERTIES, K_PROPERTIES_RAW, K_TAGS, K_KEYS, K_UNIQ_KEY, K_MSG_ID, K_FILE,
       K_FILE_POSITION, K_PROPERTY_CRC_OK, N_KEYS };
#define KEY_MAX 64
#define KEY_COPY 32  /* a key's bytes copied at once: the longest key fits */

static struct {
    int ready;
    Py_ssize_t at[HOST_KINDS][N_FIELDS], size[HOST_KINDS][N_FIELDS], header_size[HOST_KINDS];
    char key[N_KEYS][KEY_MAX];
    Py_ssize_t key_len[N_KEYS];
    char record_value[KEY_MAX];  /* "message", JSON-encoded */
    Py_ssize_t record_value_len;
    char tags[KEY_MAX], keys[KEY_MAX], uniq[KEY_MAX];
    Py_ssize_t tags_len, keys_len, uniq_len;
    unsigned char key_separator;
    uint32_t magic_v2;
    int64_t compressed_flag;
} L;

static int64_t field(const unsigned char *rec, int kind, int f)
{
    const unsigned char *p = rec + L.at[kind][f];
    switch (L.size[kind][f]) {
    case 2: return rmq_i16(p);
    case 4: return rmq_i32(p);
    case 8: return rmq_i64(p);
    default: return 0;
    }
}

/* --- the output buffer -------------------------------------------------------------------- */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} out_t;

/* The writers below write at w and return where they stopped (a cursor in a local: writes
 * through char pointers would make the compiler reload a length kept in memory after each
 * byte); the caller made room for them first (each record's bound is reserved before it). */
static char *put(char *w, const char *s, Py_ssize_t n)
{
    memcpy(w, s, (size_t)n);
    return w + n;
}

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

static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static char *put_int(char *w, int64_t v)
{
    char tmp[24];
    int n = 24;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        n -= 2;
        memcpy(tmp + n, DIGIT_PAIRS + 2 * r, 2);
    }
    if (u >= 10) {
        n -= 2;
        memcpy(tmp + n, DIGIT_PAIRS + 2 * u, 2);
    } else {
        tmp[--n] = (char)('0' + u);
    }
    if (v < 0)
        *w++ = '-';
    memcpy(w, tmp + n, (size_t)(24 - n));
    return w + (24 - n);
}

static const char HEX_UPPER[] = "0123456789ABCDEF";
static const char HEX_LOWER[] = "0123456789abcdef";

/* a JSON string's content as orjson writes it, for bytes known to be ASCII (at most 6 a byte) */
static char *put_escaped(char *w, const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *w++ = (char)c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\b': *w++ = 'b'; break;
        case '\t': *w++ = 't'; break;
        case '\n': *w++ = 'n'; break;
        case '\f': *w++ = 'f'; break;
        case '\r': *w++ = 'r'; break;
        default:
            *w++ = 'u';
            *w++ = '0';
            *w++ = '0';
            *w++ = HEX_LOWER[c >> 4];
            *w++ = HEX_LOWER[c & 15];
        }
    }
    return w;
}

static char *put_string(char *w, const unsigned char *s, Py_ssize_t n)
{
    *w++ = '"';
    w = put_escaped(w, s, n);
    *w++ = '"';
    return w;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static char B64_PAIRS[4096][2];  /* 12 bits -> two letters; filled by set_row_layout */

static char *put_base64(char *w, const unsigned char *s, Py_ssize_t n)
{
    *w++ = '"';
    Py_ssize_t i = 0;
    /* six bytes (eight letters) a step, read as one 8-byte load while 8 bytes are left to read */
    for (; i + 8 <= n; i += 6) {
        uint64_t v = (uint64_t)rmq_i64(s + i);
        char out[8];
        memcpy(out, B64_PAIRS[v >> 52], 2);
        memcpy(out + 2, B64_PAIRS[(v >> 40) & 4095], 2);
        memcpy(out + 4, B64_PAIRS[(v >> 28) & 4095], 2);
        memcpy(out + 6, B64_PAIRS[(v >> 16) & 4095], 2);
        memcpy(w, out, 8);
        w += 8;
    }
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        memcpy(w, B64_PAIRS[v >> 12], 2);
        memcpy(w + 2, B64_PAIRS[v & 4095], 2);
        w += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = '=';
        *w++ = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = B64[(v >> 6) & 63];
        *w++ = '=';
    }
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
            w = put_int(w, ip[k]);
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
                tmp[n++] = HEX_LOWER[v & 15];
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
    w = put_int(w, port);
    *w++ = '"';
    return w;
}

static char *put_hex_upper(char *w, uint64_t v, int digits)
{
    for (int k = digits - 1; k >= 0; k--)
        *w++ = HEX_UPPER[(v >> (4 * k)) & 15];
    return w;
}

static int printable_ascii(const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return 0;
    return 1;
}

static int same(const unsigned char *a, Py_ssize_t a_len, const char *b, Py_ssize_t b_len)
{
    return a_len == b_len && memcmp(a, b, (size_t)a_len) == 0;
}

/* spans: int64 rows of (position, end, hosts, body_at, body_end, topic_at, topic_end, properties_at) */
enum { S_POS, S_END, S_HOSTS, S_BODY_AT, S_BODY_END, S_TOPIC_AT, S_TOPIC_END, S_PROPS_AT, N_SPANS };
/* verdicts: uint8 rows of (body CRC holds, has a __CRC32# entry, the entry holds) */
enum { V_BODY_OK, V_HAS_ENTRY, V_ENTRY_OK, N_VERDICTS };

/* The most a record's row takes: keys and numbers (and a key's whole copy past the row's end),
 * the file's name, each string at most 6 bytes a byte (the properties: as the dict, then their
 * values again as tags, keys, uniq_key, then in base64), the body in base64. */
static Py_ssize_t row_bound(const int64_t *s, Py_ssize_t file_json_len, int body_base64)
{
    int64_t topic_len = s[S_TOPIC_END] - s[S_TOPIC_AT], props_len = s[S_END] - s[S_PROPS_AT];
    int64_t body_len = s[S_BODY_END] - s[S_BODY_AT];
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
    int64_t pos = s[S_POS], end = s[S_END], kind = s[S_HOSTS];
    int64_t body_at = s[S_BODY_AT], body_end = s[S_BODY_END], topic_at = s[S_TOPIC_AT], topic_end = s[S_TOPIC_END];
    int64_t props_at = s[S_PROPS_AT];
    if (kind < 0 || kind >= HOST_KINDS || pos < 0 || end > buf_len || pos + L.header_size[kind] > end
        || body_at < pos || body_end < body_at || body_end > end || topic_at < pos || topic_end < topic_at
        || topic_end > end || props_at < pos || props_at > end)
        return 0;
    if (offset0 > INT64_MAX / 2 || position0 > INT64_MAX / 2)
        return 0;
    const unsigned char *rec = buf + pos;
    int64_t offset = offset0 + pos;
    int64_t sys_flag = field(rec, (int)kind, F_SYS_FLAG);
    if (sys_flag & L.compressed_flag)
        return 0;  /* body_compression names the codec: the Python row */
    if (field(rec, (int)kind, F_PHYSICAL_OFFSET) != offset)
        return 0;  /* a finding: the Python row, with its finding */
    if (v != NULL && (!v[V_BODY_OK] || (v[V_HAS_ENTRY] && !v[V_ENTRY_OK])))
        return 0;
    const unsigned char *topic = buf + topic_at, *props = buf + props_at;
    Py_ssize_t topic_len = (Py_ssize_t)(topic_end - topic_at), props_len = (Py_ssize_t)(end - props_at);
    Py_ssize_t body_len = (Py_ssize_t)(body_end - body_at);
    if (!printable_ascii(topic, topic_len))
        return 0;
    rmq_property_span sp[RMQ_MAX_PROPERTIES];
    int ascii;
    int np = rmq_properties_spans(props, props_len, sp, RMQ_MAX_PROPERTIES, &ascii);
    if (np < 0 || !ascii)
        return 0;  /* JSON of non-ASCII strings is the Python path's */
    int tags = -1, keys = -1, uniq = -1;
    for (int a = 0; a < np; a++) {
        for (int b = 0; b < a; b++)
            if (same(props + sp[a].name_at, sp[a].name_len, (const char *)props + sp[b].name_at, sp[b].name_len))
                return 0;  /* a name twice: the dict keeps the first place and the last value */
        const unsigned char *name = props + sp[a].name_at;
        if (same(name, sp[a].name_len, L.tags, L.tags_len))
            tags = a;
        else if (same(name, sp[a].name_len, L.keys, L.keys_len))
            keys = a;
        else if (same(name, sp[a].name_len, L.uniq, L.uniq_len))
            uniq = a;
    }
    Py_ssize_t bound = row_bound(s, file_json_len, body_base64);
    if (bound < 0 || o->cap - o->len < bound)
        return -1;  /* cannot be: the caller made room for every record's bound */
    char *w = o->p + o->len;
    int k = (int)kind;
    uint32_t magic = (uint32_t)field(rec, k, F_MAGIC);

    *w++ = '{';
    w = put_key(w, K_RECORD);
    w = put(w, L.record_value, L.record_value_len);
    w = put_key(w, K_COMMIT_LOG_OFFSET);
    w = put_int(w, offset);
    w = put_key(w, K_STORE_SIZE);
    w = put_int(w, field(rec, k, F_STORE_SIZE));
    w = put_key(w, K_MAGIC_CODE);
    w = put(w, "\"0x", 3);
    w = put_hex_upper(w, magic, 8);
    *w++ = '"';
    w = put_key(w, K_MESSAGE_VERSION);
    w = put_int(w, magic == L.magic_v2 ? 2 : 1);
    w = put_key(w, K_BODY_CRC);
    w = put_int(w, field(rec, k, F_BODY_CRC));
    w = put_key(w, K_BODY_CRC_OK);
    if (v == NULL)
        w = put(w, "null", 4);
    else
        w = put(w, "true", 4);
    w = put_key(w, K_QUEUE_ID);
    w = put_int(w, field(rec, k, F_QUEUE_ID));
    w = put_key(w, K_FLAG);
    w = put_int(w, field(rec, k, F_FLAG));
    w = put_key(w, K_QUEUE_OFFSET);
    w = put_int(w, field(rec, k, F_QUEUE_OFFSET));
    w = put_key(w, K_PHYSICAL_OFFSET);
    w = put_int(w, field(rec, k, F_PHYSICAL_OFFSET));
    w = put_key(w, K_SYS_FLAG);
    w = put_int(w, sys_flag);
    w = put_key(w, K_BORN_TIMESTAMP);
    w = put_int(w, field(rec, k, F_BORN_TIMESTAMP));
    w = put_key(w, K_BORN_HOST);
    w = put_host(w, rec + L.at[k][F_BORN_IP], L.size[k][F_BORN_IP], field(rec, k, F_BORN_PORT));
    if (w == NULL)
        return 0;
    w = put_key(w, K_STORE_TIMESTAMP);
    w = put_int(w, field(rec, k, F_STORE_TIMESTAMP));
    w = put_key(w, K_STORE_HOST);
    const unsigned char *store_ip = rec + L.at[k][F_STORE_IP];
    Py_ssize_t store_ip_len = L.size[k][F_STORE_IP];
    int64_t store_port = field(rec, k, F_STORE_PORT);
    w = put_host(w, store_ip, store_ip_len, store_port);
    if (w == NULL)
        return 0;
    w = put_key(w, K_RECONSUME_TIMES);
    w = put_int(w, field(rec, k, F_RECONSUME));
    w = put_key(w, K_PREPARED);
    w = put_int(w, field(rec, k, F_PREPARED));
    w = put_key(w, K_BODY_LENGTH);
    w = put_int(w, body_len);
    w = put_key(w, K_BODY_COMPRESSION);
    w = put(w, "null", 4);
    w = put_key(w, K_BODY);
    if (body_base64)
        w = put_base64(w, buf + body_at, body_len);
    else
        w = put(w, "null", 4);
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
        w = put(w, "null", 4);
    w = put_key(w, K_KEYS);
    *w++ = '[';
    if (keys >= 0) {  /* split at the key separator, empty pieces left out (formats/properties.split_keys) */
        const unsigned char *kv = props + sp[keys].value_at;
        Py_ssize_t n = sp[keys].value_len, i = 0;
        int first = 1;
        while (i < n) {
            Py_ssize_t j = i;
            while (j < n && kv[j] != L.key_separator)
                j++;
            if (j > i) {
                if (!first)
                    *w++ = ',';
                first = 0;
                w = put_string(w, kv + i, j - i);
            }
            i = j + 1;
        }
    }
    *w++ = ']';
    w = put_key(w, K_UNIQ_KEY);
    if (uniq >= 0)
        w = put_string(w, props + sp[uniq].value_at, sp[uniq].value_len);
    else
        w = put(w, "null", 4);
    w = put_key(w, K_MSG_ID);
    *w++ = '"';
    for (Py_ssize_t b = 0; b < store_ip_len; b++) {
        *w++ = HEX_UPPER[store_ip[b] >> 4];
        *w++ = HEX_UPPER[store_ip[b] & 15];
    }
    w = put_hex_upper(w, (uint32_t)store_port, 8);
    w = put_hex_upper(w, (uint64_t)offset, 16);
    *w++ = '"';
    w = put_key(w, K_FILE);
    w = put(w, file_json, file_json_len);
    w = put_key(w, K_FILE_POSITION);
    w = put_int(w, position0 + pos);
    if (v != NULL && v[V_HAS_ENTRY]) {
        w = put_key(w, K_PROPERTY_CRC_OK);
        w = put(w, "true", 4);
    }
    w = put(w, "}\n", 2);
    o->len = w - o->p;
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
    if (!L.ready)
        Py_RETURN_NONE;  /* set_row_layout not called: decline all */
    Py_buffer buf, spans, verdicts;
    int have_verdicts = verdicts_obj != Py_None;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(spans_obj, &spans, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (have_verdicts && PyObject_GetBuffer(verdicts_obj, &verdicts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&spans);
        PyBuffer_Release(&buf);
        return NULL;
    }
    PyObject *result = NULL;
    out_t o = {NULL, 0, 0};
    Py_ssize_t n = spans.len / (Py_ssize_t)(N_SPANS * sizeof(int64_t));
    if (spans.itemsize != (Py_ssize_t)sizeof(int64_t) || !integer_format(spans.format)
        || spans.len % (Py_ssize_t)(N_SPANS * sizeof(int64_t))
        || (have_verdicts && (verdicts.itemsize != 1 || !integer_format(verdicts.format)
                              || verdicts.len != n * N_VERDICTS)) || first < 0
        || file_json_len > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "jsonl_rows: spans must be int64 rows of 8, verdicts uint8 rows of 3");
        goto done;
    }
    const int64_t *s = spans.buf;
    const unsigned char *v = have_verdicts ? verdicts.buf : NULL;
    /* the rows are written into the scratch buffer, grown to the bound of them all (of the
     * records up to a bound that cannot be: declined there), then copied into bytes of their
     * size: a buffer made at the bound each call would cost fresh pages each call */
    Py_ssize_t upto = first, total = 0;
    for (; upto < n; upto++) {
        Py_ssize_t b = row_bound(s + upto * N_SPANS, file_json_len, body_base64);
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
        int got = write_row(&o, buf.buf, buf.len, s + k * N_SPANS, v ? v + k * N_VERDICTS : NULL, offset0,
                            position0, file_json, file_json_len, body_base64);
        if (got <= 0)
            break;  /* declined (no room cannot happen: the bound was made for it) */
    }
    PyObject *data = PyBytes_FromStringAndSize(o.p, o.len);
    if (data != NULL)
        result = Py_BuildValue("Nn", data, k - first);
done:
    if (have_verdicts)
        PyBuffer_Release(&verdicts);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&buf);
    return result;
}

/* set_row_layout(fields, keys, record_value, names, key_separator, magic_v2, compressed_flag):
 * fields: per hosts kind a tuple of N_FIELDS (offset, size) pairs and the header's size, as
 * (pairs, header_size); keys: N_KEYS JSON texts '"key":'; names: (TAGS, KEYS, UNIQ_KEY). */
static PyObject *set_row_layout(PyObject *self, PyObject *args)
{
    PyObject *fields, *keys, *names;
    const char *record_value;
    Py_ssize_t record_value_len;
    unsigned char key_separator;
    unsigned long magic_v2;
    long long compressed_flag;
    if (!PyArg_ParseTuple(args, "O!O!y#O!bkL", &PyTuple_Type, &fields, &PyTuple_Type, &keys, &record_value,
                          &record_value_len, &PyTuple_Type, &names, &key_separator, &magic_v2,
                          &compressed_flag))
        return NULL;
    L.ready = 0;
    if (PyTuple_GET_SIZE(fields) != HOST_KINDS || PyTuple_GET_SIZE(keys) != N_KEYS || PyTuple_GET_SIZE(names) != 3
        || record_value_len >= KEY_MAX) {
        PyErr_SetString(PyExc_ValueError, "set_row_layout: wrong counts");
        return NULL;
    }
    for (int h = 0; h < HOST_KINDS; h++) {
        PyObject *pairs;
        Py_ssize_t header_size;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, h), "O!n", &PyTuple_Type, &pairs, &header_size))
            return NULL;
        if (PyTuple_GET_SIZE(pairs) != N_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "set_row_layout: wrong field count");
            return NULL;
        }
        L.header_size[h] = header_size;
        for (int f = 0; f < N_FIELDS; f++) {
            Py_ssize_t at, size;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, f), "nn", &at, &size))
                return NULL;
            if (at < 0 || size < 0 || at + size > header_size) {
                PyErr_SetString(PyExc_ValueError, "set_row_layout: a field outside the header");
                return NULL;
            }
            L.at[h][f] = at;
            L.size[h][f] = size;
        }
    }
    for (int k = 0; k < N_KEYS; k++) {
        const char *text;
        Py_ssize_t len;
        if (!PyArg_Parse(PyTuple_GET_ITEM(keys, k), "y#", &text, &len))
            return NULL;
        if (len > KEY_COPY) {
            PyErr_SetString(PyExc_ValueError, "set_row_layout: a key too long");
            return NULL;
        }
        memcpy(L.key[k], text, (size_t)len);
        L.key_len[k] = len;
    }
    char *name_to[3] = {L.tags, L.keys, L.uniq};
    Py_ssize_t *name_len[3] = {&L.tags_len, &L.keys_len, &L.uniq_len};
    for (int k = 0; k < 3; k++) {
        const char *text;
        Py_ssize_t len;
        if (!PyArg_Parse(PyTuple_GET_ITEM(names, k), "y#", &text, &len))
            return NULL;
        if (len >= KEY_MAX) {
            PyErr_SetString(PyExc_ValueError, "set_row_layout: a name too long");
            return NULL;
        }
        memcpy(name_to[k], text, (size_t)len);
        *name_len[k] = len;
    }
    memcpy(L.record_value, record_value, (size_t)record_value_len);
    L.record_value_len = record_value_len;
    L.key_separator = key_separator;
    L.magic_v2 = (uint32_t)magic_v2;
    L.compressed_flag = compressed_flag;
    for (int b = 0; b < 4096; b++) {
        B64_PAIRS[b][0] = B64[b >> 6];
        B64_PAIRS[b][1] = B64[b & 63];
    }
    L.ready = 1;
    Py_RETURN_NONE;
}

PyMethodDef rmq_rows_methods[] = {
    {"jsonl_rows", jsonl_rows, METH_VARARGS,
     "jsonl_rows(buf, spans, verdicts, first, offset0, position0, file_json, body_base64) -> (bytes, rows): "
     "the JSON Lines rows of records first.. up to the first one declined; None before set_row_layout"},
    {"set_row_layout", set_row_layout, METH_VARARGS,
     "set_row_layout(fields, keys, record_value, names, key_separator, magic_v2, "
     "compressed_flag): the header layout, the row's keys and names, from Python once"},
    {NULL, NULL, 0, NULL},
};
