/* dump's table lines: a window's clean records written as report/table.py's TextTable._line
 * writes their message_record rows, byte for byte, once the table's layout is fixed.
 *
 * The Python line (message_record, then TextTable._line: the cell's text, escaped, cut with an
 * ellipsis, padded, the line's end stripped) is the definition; this is a fast copy of its
 * common case. table_records picks, when the window is scanned, the records whose row has no
 * finding (the rest stay Messages, the Python way); table_lines writes their lines given the
 * layout's cells, and stops at a record it does not cover (its line is then made in Python).
 * Declined: a compressed body, a failed CRC, a physicalOffset naming another place, a topic or
 * properties that are not UTF-8, properties that are not the common string, a property name
 * twice, a shown cell whose text is not ASCII (wide and combining characters, escapes past
 * ASCII: the Python line's), a file name that is not ASCII, a cell source it does not know (the
 * caller then takes the Python path for the layout). A host's text and the msgId's head are
 * asked of Python (message_record's own), once for each host in a row of records.
 *
 * Header field positions (by hosts kind), the property names read and the flags come from
 * Python (set_table_layout), derived from formats/; the cells (which value, width, alignment,
 * cut at the front or not) from the table's layout, each call. */
#include "kernel.h"
#include <string.h>

/* the header fields, in report/jsonl_rows.py _FIELDS' order (the same layout rows.c gets) */
enum { F_STORE_SIZE, F_MAGIC, F_BODY_CRC, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_PHYSICAL_OFFSET, F_SYS_FLAG,
       F_BORN_TIMESTAMP, F_BORN_IP, F_BORN_PORT, F_STORE_TIMESTAMP, F_STORE_IP, F_STORE_PORT, F_RECONSUME,
       F_PREPARED, N_FIELDS };
#define HOST_KINDS 4
#define NAME_MAX_LEN 64

static struct {
    int ready;
    Py_ssize_t at[HOST_KINDS][N_FIELDS], size[HOST_KINDS][N_FIELDS], header_size[HOST_KINDS];
    char tags[NAME_MAX_LEN], keys[NAME_MAX_LEN], uniq[NAME_MAX_LEN];
    Py_ssize_t tags_len, keys_len, uniq_len;
    unsigned char key_separator;
    uint32_t magic_v2;
    int64_t compressed_flag;
    int64_t last_time;  /* the seconds whose text is in time_head (as columns.iso_ms keeps it) */
    char time_head[20];
} T;

static int64_t field(const unsigned char *rec, int kind, int f)
{
    const unsigned char *p = rec + T.at[kind][f];
    switch (T.size[kind][f]) {
    case 2: return rmq_i16(p);
    case 4: return rmq_i32(p);
    case 8: return rmq_i64(p);
    default: return 0;
    }
}

/* where a cell's value comes from; table_sources() gives Python these names in this order */
enum { SRC_CONST, SRC_OFFSET, SRC_POSITION, SRC_INT, SRC_TIME, SRC_MAGIC, SRC_VERSION, SRC_BODY_LENGTH,
       SRC_BODY_CRC_OK, SRC_PROPERTY_CRC_OK, SRC_BODY_BASE64, SRC_TOPIC, SRC_PROPERTIES, SRC_PROPERTIES_RAW,
       SRC_TAGS, SRC_KEYS, SRC_UNIQ, SRC_FILE, SRC_BODY_TEXT, SRC_HOST, SRC_MSG_ID, N_SOURCES };
static const char *SOURCE_NAMES[N_SOURCES] = {
    "const", "offset", "position", "int", "time", "magic", "version", "body_length", "body_crc_ok",
    "property_crc_ok", "body_base64", "topic", "properties", "properties_raw", "tags", "keys", "uniq", "file",
    "body_text", "host", "msg_id"};

/* spans: int64 rows of (position, end, hosts, body_at, body_end, topic_at, topic_end, properties_at) */
enum { S_POS, S_END, S_HOSTS, S_BODY_AT, S_BODY_END, S_TOPIC_AT, S_TOPIC_END, S_PROPS_AT, N_SPANS };
/* verdicts: uint8 rows of (body CRC holds, has a __CRC32# entry, the entry holds) */
enum { V_BODY_OK, V_HAS_ENTRY, V_ENTRY_OK, N_VERDICTS };

#define MAX_CELLS 64
typedef struct {
    int source, arg, right, front;
    Py_ssize_t width;
    const char *text;  /* SRC_CONST's */
    Py_ssize_t text_len;
} cell_t;

/* --- a record's parts, checked once ---------------------------------------------------------- */
typedef struct {
    const unsigned char *rec, *topic, *props, *body;
    Py_ssize_t topic_len, props_len, body_len;
    int kind, np, tags, keys, uniq, topic_ascii, props_ascii;
    int64_t offset, position;
    PyObject *hosts[2];  /* (host text, msgId head) of the born and the store host, as bytes (hosts_t's) */
    rmq_property_span sp[RMQ_MAX_PROPERTIES];
} record_t;

static int all_ascii(const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return 0;
    return 1;
}

/* valid UTF-8, as Python's strict decoding (store/message.py's reading of a topic and properties) says */
static int utf8(const unsigned char *s, Py_ssize_t n)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    if (text == NULL) {
        PyErr_Clear();  /* not UTF-8 (or no memory): declined either way */
        return 0;
    }
    Py_DECREF(text);
    return 1;
}

static int same(const unsigned char *a, Py_ssize_t a_len, const char *b, Py_ssize_t b_len)
{
    return a_len == b_len && memcmp(a, b, (size_t)a_len) == 0;
}

/* 1 when the record is one this part covers (its row has no finding: its strings UTF-8; its
 * properties the common string with each name once, its body not compressed), its parts in r;
 * 0 when declined. A cell of text that is not ASCII is declined by covered(). */
static int read_record(record_t *r, const unsigned char *buf, Py_ssize_t buf_len, const int64_t *s,
                       const unsigned char *v, int64_t offset0, int64_t position0)
{
    int64_t pos = s[S_POS], end = s[S_END], kind = s[S_HOSTS];
    int64_t body_at = s[S_BODY_AT], body_end = s[S_BODY_END], topic_at = s[S_TOPIC_AT], topic_end = s[S_TOPIC_END];
    int64_t props_at = s[S_PROPS_AT];
    if (kind < 0 || kind >= HOST_KINDS || pos < 0 || end > buf_len || pos + T.header_size[kind] > end
        || body_at < pos || body_end < body_at || body_end > end || topic_at < pos || topic_end < topic_at
        || topic_end > end || props_at < pos || props_at > end || end - pos > 1 << 30)
        return 0;
    if (offset0 < 0 || position0 < 0 || offset0 > INT64_MAX / 2 || position0 > INT64_MAX / 2)
        return 0;
    r->rec = buf + pos;
    r->kind = (int)kind;
    r->offset = offset0 + pos;
    r->position = position0 + pos;
    if (field(r->rec, r->kind, F_SYS_FLAG) & T.compressed_flag)
        return 0;  /* body_compression names the codec: the Python row */
    if (field(r->rec, r->kind, F_PHYSICAL_OFFSET) != r->offset)
        return 0;  /* a finding: the Python row, with its finding */
    if (v != NULL && (!v[V_BODY_OK] || (v[V_HAS_ENTRY] && !v[V_ENTRY_OK])))
        return 0;
    r->topic = buf + topic_at;
    r->topic_len = (Py_ssize_t)(topic_end - topic_at);
    r->props = buf + props_at;
    r->props_len = (Py_ssize_t)(end - props_at);
    r->body = buf + body_at;
    r->body_len = (Py_ssize_t)(body_end - body_at);
    r->topic_ascii = all_ascii(r->topic, r->topic_len);
    if (!r->topic_ascii && !utf8(r->topic, r->topic_len))
        return 0;
    r->np = rmq_properties_spans(r->props, r->props_len, r->sp, RMQ_MAX_PROPERTIES, &r->props_ascii);
    if (r->np < 0 || (!r->props_ascii && !utf8(r->props, r->props_len)))
        return 0;
    r->tags = r->keys = r->uniq = -1;
    for (int a = 0; a < r->np; a++) {
        const unsigned char *name = r->props + r->sp[a].name_at;
        Py_ssize_t len = r->sp[a].name_len;
        for (int b = 0; b < a; b++)
            if (same(name, len, (const char *)r->props + r->sp[b].name_at, r->sp[b].name_len))
                return 0;  /* a name twice: the dict keeps the first place and the last value */
        if (same(name, len, T.tags, T.tags_len))
            r->tags = a;
        else if (same(name, len, T.keys, T.keys_len))
            r->keys = a;
        else if (same(name, len, T.uniq, T.uniq_len))
            r->uniq = a;
    }
    return 1;
}

/* --- hosts: their text from Python ----------------------------------------------------------- */
/* A host's text and the msgId's head are message_record's own, asked of Python (a callable
 * (ip, port) -> (host text, msgId head), ASCII bytes) once for each host in a row of records. */
enum { HOST_BORN, HOST_STORE };
typedef struct {
    PyObject *texts;  /* the callable; NULL: a host cell is not written */
    struct {
        unsigned char ip[16];
        Py_ssize_t ip_len;
        int64_t port;
        PyObject *value;  /* owned */
    } slot[2];
} hosts_t;

static void hosts_release(hosts_t *h)
{
    for (int k = 0; k < 2; k++)
        Py_CLEAR(h->slot[k].value);
}

/* the (host text, msgId head) of the record's born or store host (a reference the slot holds);
 * NULL when the callable fails or gives what is not two ASCII bytes objects (declined) */
static PyObject *host_texts(hosts_t *h, const record_t *r, int which)
{
    int ip_field = which == HOST_BORN ? F_BORN_IP : F_STORE_IP, port_field = which == HOST_BORN ? F_BORN_PORT : F_STORE_PORT;
    const unsigned char *ip = r->rec + T.at[r->kind][ip_field];
    Py_ssize_t ip_len = T.size[r->kind][ip_field];
    int64_t port = field(r->rec, r->kind, port_field);
    if (h->texts == NULL || ip_len > 16)
        return NULL;
    if (h->slot[which].value != NULL && h->slot[which].ip_len == ip_len && h->slot[which].port == port
        && memcmp(h->slot[which].ip, ip, (size_t)ip_len) == 0)
        return h->slot[which].value;
    Py_CLEAR(h->slot[which].value);
    PyObject *got = PyObject_CallFunction(h->texts, "y#L", (const char *)ip, ip_len, (long long)port);
    if (got == NULL || !PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) {
        PyErr_Clear();
        Py_XDECREF(got);
        return NULL;
    }
    for (int k = 0; k < 2; k++) {
        PyObject *text = PyTuple_GET_ITEM(got, k);
        if (!PyBytes_Check(text) || !all_ascii((const unsigned char *)PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))
            || PyBytes_GET_SIZE(text) > 256) {
            Py_DECREF(got);
            return NULL;
        }
    }
    memcpy(h->slot[which].ip, ip, (size_t)ip_len);
    h->slot[which].ip_len = ip_len;
    h->slot[which].port = port;
    h->slot[which].value = got;
    return got;
}

/* --- a cell's text (before cutting): escaped as columns.terminal_safe escapes ---------------- */
static const char HEX_LOWER[] = "0123456789abcdef";
static const char HEX_UPPER[] = "0123456789ABCDEF";
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ASCII bytes with C0 controls and DEL as \xNN (at most 4 bytes a byte) */
static char *put_text(char *t, const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != 0x7F) {
            *t++ = (char)c;
        } else {
            *t++ = '\\';
            *t++ = 'x';
            *t++ = HEX_LOWER[c >> 4];
            *t++ = HEX_LOWER[c & 15];
        }
    }
    return t;
}

static char *put_int(char *t, int64_t v)
{
    char tmp[24];
    int n = 24;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *t++ = '-';
    memcpy(t, tmp + n, (size_t)(24 - n));
    return t + (24 - n);
}

static char *put_digits(char *t, int64_t v, int digits)
{
    for (int k = digits - 1; k >= 0; k--) {
        t[k] = (char)('0' + v % 10);
        v /= 10;
    }
    return t + digits;
}

/* the last second datetime reads (9999-12-31T23:59:59): past it columns.iso_ms shows the number */
#define LAST_SECOND INT64_C(253402300799)

/* columns.cell_text of a *_timestamp: epoch ms > 0 as 2023-11-14T22:13:20.000Z, else the number */
static char *put_time(char *t, int64_t ms)
{
    if (ms <= 0 || ms / 1000 > LAST_SECOND)
        return put_int(t, ms);
    int64_t sec = ms / 1000, milli = ms % 1000;
    if (sec != T.last_time) {  /* days to a civil date (H. Hinnant's days_from_civil, inverted) */
        int64_t z = sec / 86400 + 719468, rem = sec % 86400;
        int64_t era = z / 146097, doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
        int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
        int64_t year = yoe + era * 400 + (month <= 2);
        char *h = T.time_head;
        h = put_digits(h, year, 4);
        *h++ = '-';
        h = put_digits(h, month, 2);
        *h++ = '-';
        h = put_digits(h, day, 2);
        *h++ = 'T';
        h = put_digits(h, rem / 3600, 2);
        *h++ = ':';
        h = put_digits(h, rem / 60 % 60, 2);
        *h++ = ':';
        put_digits(h, rem % 60, 2);
        T.last_time = sec;
    }
    memcpy(t, T.time_head, 19);
    t += 19;
    *t++ = '.';
    t = put_digits(t, milli, 3);
    *t++ = 'Z';
    return t;
}

/* base64 of s (as message_record's), only of its first bytes when ``most`` letters are all that
 * is shown (a whole multiple of 3 bytes: the letters are then the whole text's first ones) */
static char *put_base64(char *t, const unsigned char *s, Py_ssize_t n, Py_ssize_t most)
{
    if (most >= 0 && most / 4 * 3 + 3 < n)
        n = most / 4 * 3 + 3;
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        t[0] = B64[v >> 18];
        t[1] = B64[(v >> 12) & 63];
        t[2] = B64[(v >> 6) & 63];
        t[3] = B64[v & 63];
        t += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        t[0] = B64[v >> 18];
        t[1] = B64[(v >> 12) & 63];
        t[2] = '=';
        t[3] = '=';
        t += 4;
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        t[0] = B64[v >> 18];
        t[1] = B64[(v >> 12) & 63];
        t[2] = B64[(v >> 6) & 63];
        t[3] = '=';
        t += 4;
    }
    return t;
}

static char *put_value(char *t, const record_t *r, int a)
{
    return a < 0 ? t : put_text(t, r->props + r->sp[a].value_at, r->sp[a].value_len);
}

/* records.render_body's text of a body, cut to ``preview`` letters (-1: whole) when its letters
 * up to there are ASCII (then they are its bytes); -1 when they are not (declined) */
static Py_ssize_t body_text_bytes(const record_t *r, int preview)
{
    Py_ssize_t n = preview >= 0 && r->body_len > preview ? preview : r->body_len;
    return all_ascii(r->body, n) ? n : -1;
}

/* The cell's text into t (room: cell_room), escaped; ``most``: the letters shown, -1 for all.
 * *ellipsis: 1 when the text ends in an ellipsis (a body preview cut short), else 0. */
static char *cell_text(char *t, const cell_t *c, const record_t *r, const unsigned char *v, const char *file,
                       Py_ssize_t file_len, Py_ssize_t most, int *ellipsis)
{
    const unsigned char *rec = r->rec;
    *ellipsis = 0;
    switch (c->source) {
    case SRC_CONST: return put_text(t, (const unsigned char *)c->text, c->text_len);
    case SRC_OFFSET: return put_int(t, r->offset);
    case SRC_POSITION: return put_int(t, r->position);
    case SRC_INT: return put_int(t, field(rec, r->kind, c->arg));
    case SRC_TIME: return put_time(t, field(rec, r->kind, c->arg));
    case SRC_MAGIC: {
        uint32_t magic = (uint32_t)field(rec, r->kind, F_MAGIC);
        *t++ = '0';
        *t++ = 'x';
        for (int k = 7; k >= 0; k--)
            *t++ = HEX_UPPER[(magic >> (4 * k)) & 15];
        return t;
    }
    case SRC_VERSION: return put_int(t, (uint32_t)field(rec, r->kind, F_MAGIC) == T.magic_v2 ? 2 : 1);
    case SRC_BODY_LENGTH: return put_int(t, r->body_len);
    case SRC_BODY_CRC_OK:  /* verdicts are there only when checked, and a taken record's hold */
        return v == NULL ? t : put_text(t, (const unsigned char *)"yes", 3);
    case SRC_PROPERTY_CRC_OK:  /* a field of the row only with a __CRC32# entry */
        return v == NULL || !v[V_HAS_ENTRY] ? t : put_text(t, (const unsigned char *)"yes", 3);
    case SRC_BODY_BASE64: return put_base64(t, r->body, r->body_len, most);
    case SRC_TOPIC: return put_text(t, r->topic, r->topic_len);
    case SRC_PROPERTIES:  /* the dict as cell_text joins it: name=value, a space between */
        for (int a = 0; a < r->np; a++) {
            if (a)
                *t++ = ' ';
            t = put_text(t, r->props + r->sp[a].name_at, r->sp[a].name_len);
            *t++ = '=';
            t = put_value(t, r, a);
        }
        return t;
    case SRC_PROPERTIES_RAW: return put_base64(t, r->props, r->props_len, most);
    case SRC_TAGS: return put_value(t, r, r->tags);
    case SRC_UNIQ: return put_value(t, r, r->uniq);
    case SRC_KEYS:
        if (r->keys >= 0) {  /* split at the key separator, empty pieces left out, joined by spaces */
            const unsigned char *kv = r->props + r->sp[r->keys].value_at;
            Py_ssize_t n = r->sp[r->keys].value_len, i = 0;
            int first = 1;
            while (i < n) {
                Py_ssize_t j = i;
                while (j < n && kv[j] != T.key_separator)
                    j++;
                if (j > i) {
                    if (!first)
                        *t++ = ' ';
                    first = 0;
                    t = put_text(t, kv + i, j - i);
                }
                i = j + 1;
            }
        }
        return t;
    case SRC_FILE: return put_text(t, (const unsigned char *)file, file_len);
    case SRC_HOST: {  /* covered() asked for it */
        PyObject *host = PyTuple_GET_ITEM(r->hosts[c->arg], 0);
        return put_text(t, (const unsigned char *)PyBytes_AS_STRING(host), PyBytes_GET_SIZE(host));
    }
    case SRC_MSG_ID: {  /* the head, then the commit log offset in 16 hex digits (records.message_record) */
        PyObject *head = PyTuple_GET_ITEM(r->hosts[HOST_STORE], 1);
        t = put_text(t, (const unsigned char *)PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head));
        for (int k = 15; k >= 0; k--)
            *t++ = HEX_UPPER[((uint64_t)r->offset >> (4 * k)) & 15];
        return t;
    }
    case SRC_BODY_TEXT: {  /* ASCII up to the preview (table_lines checked it): its bytes, "…" when longer */
        Py_ssize_t n = body_text_bytes(r, c->arg);
        if (n < 0)
            return t;
        *ellipsis = n < r->body_len;
        return put_text(t, r->body, most >= 0 && most < n ? most : n);
    }
    default: return t;
    }
}

/* --- the line ---------------------------------------------------------------------------- */
static const char ELLIPSIS[] = "\xe2\x80\xa6";  /* U+2026, one terminal cell */

static char *put(char *w, const char *s, Py_ssize_t n)
{
    memcpy(w, s, (size_t)n);
    return w + n;
}

static char *put_spaces(char *w, Py_ssize_t n)
{
    if (n > 0) {
        memset(w, ' ', (size_t)n);
        w += n;
    }
    return w;
}

/* the cell's text t (n letters, ASCII, then an ellipsis when ``ellipsis``) as TextTable._line
 * writes it: cut (columns.cut, or table.cut_front for a path) unless wide, padded to the width */
static char *put_cell(char *w, const cell_t *c, const char *t, Py_ssize_t n, int ellipsis, int wide)
{
    Py_ssize_t width = c->width, cells = n + ellipsis;
    if (wide || cells <= width) {
        if (c->right)
            w = put_spaces(w, width - cells);
        memcpy(w, t, (size_t)n);
        w += n;
        if (ellipsis)
            w = put(w, ELLIPSIS, 3);
        return c->right ? w : put_spaces(w, width - cells);
    }
    /* longer than the width: width - 1 letters and the ellipsis (just the ellipsis at width 1 or
     * less; the letters kept are ASCII: an ellipsis of the text's own is its last letter); the cut
     * text is width cells wide, so no pad but at width 0 (where it is one cell over) */
    Py_ssize_t keep = width > 1 ? width - 1 : 0;
    if (c->front) {
        w = put(w, ELLIPSIS, 3);
        memcpy(w, t + n - keep, (size_t)keep);
        return w + keep;
    }
    memcpy(w, t, (size_t)keep);
    w += keep;
    return put(w, ELLIPSIS, 3);
}

/* the room one cell's text may take: every string of a record at most 4 bytes a byte (escaped),
 * the file's name alike, numbers and times in 32, a host's texts (256 bytes at most) alike */
static Py_ssize_t cell_room(const record_t *r, Py_ssize_t file_len, const cell_t *cells, int n_cells)
{
    Py_ssize_t room = 2200 + 4 * file_len + 4 * (Py_ssize_t)(r->props_len + r->topic_len + r->body_len);
    for (int c = 0; c < n_cells; c++)
        if (cells[c].source == SRC_CONST && 4 * cells[c].text_len + 64 > room)
            room = 4 * cells[c].text_len + 64;
    return room;
}

/* buffers kept between calls, grown as needed: the lines, and one cell's text */
static char *lines = NULL, *text = NULL;
static Py_ssize_t lines_cap = 0, text_cap = 0;

static int grow(char **p, Py_ssize_t *cap, Py_ssize_t need)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t to = *cap ? *cap : 1 << 16;
    while (to < need) {
        if (to > PY_SSIZE_T_MAX / 2)
            return -1;
        to *= 2;
    }
    char *q = PyMem_RawRealloc(*p, (size_t)to);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = to;
    return 0;
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

typedef struct {
    Py_buffer buf, spans, verdicts;
    int have_verdicts;
    Py_ssize_t n;
} window_t;

static void release(window_t *win)
{
    if (win->have_verdicts)
        PyBuffer_Release(&win->verdicts);
    PyBuffer_Release(&win->spans);
    PyBuffer_Release(&win->buf);
}

/* the window's buffers, checked: spans int64 rows of N_SPANS, verdicts (or None) uint8 rows of N_VERDICTS */
static int get_window(window_t *win, PyObject *buf_obj, PyObject *spans_obj, PyObject *verdicts_obj)
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
    win->n = win->spans.len / (Py_ssize_t)(N_SPANS * sizeof(int64_t));
    if (win->spans.itemsize != (Py_ssize_t)sizeof(int64_t) || !integer_format(win->spans.format)
        || win->spans.len % (Py_ssize_t)(N_SPANS * sizeof(int64_t))
        || (win->have_verdicts && (win->verdicts.itemsize != 1 || !integer_format(win->verdicts.format)
                                   || win->verdicts.len != win->n * N_VERDICTS))) {
        PyErr_SetString(PyExc_ValueError, "table: spans must be int64 rows of 8, verdicts uint8 rows of 3");
        release(win);
        return -1;
    }
    return 0;
}

/* table_records(buf, spans, verdicts, first, offset0, position0) -> the count of records from
 * first on that table_lines covers (none of them with a finding); 0 before set_table_layout */
static PyObject *table_records(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *spans_obj, *verdicts_obj;
    Py_ssize_t first;
    long long offset0, position0;
    if (!PyArg_ParseTuple(args, "OOOnLL", &buf_obj, &spans_obj, &verdicts_obj, &first, &offset0, &position0))
        return NULL;
    window_t win;
    if (get_window(&win, buf_obj, spans_obj, verdicts_obj) < 0)
        return NULL;
    const int64_t *s = win.spans.buf;
    const unsigned char *v = win.have_verdicts ? win.verdicts.buf : NULL;
    Py_ssize_t k = first < 0 ? win.n : first;
    if (T.ready) {
        record_t r;
        for (; k < win.n; k++)
            if (!read_record(&r, win.buf.buf, win.buf.len, s + k * N_SPANS, v ? v + k * N_VERDICTS : NULL,
                             offset0, position0))
                break;
    }
    Py_ssize_t taken = T.ready && first >= 0 && k > first ? k - first : 0;
    release(&win);
    return PyLong_FromSsize_t(taken);
}

/* the cells: a tuple of (source, arg, width, right, front, text) from Python (report/table_rows.py) */
static int get_cells(PyObject *cells_obj, cell_t *cells, int *n_cells)
{
    Py_ssize_t n = PyTuple_GET_SIZE(cells_obj);
    if (n < 1 || n > MAX_CELLS) {
        PyErr_SetString(PyExc_ValueError, "table_lines: 1 to 64 cells");
        return -1;
    }
    for (Py_ssize_t c = 0; c < n; c++) {
        cell_t *cell = &cells[c];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(cells_obj, c), "iinppy#", &cell->source, &cell->arg, &cell->width,
                              &cell->right, &cell->front, &cell->text, &cell->text_len))
            return -1;
        if (cell->source < 0 || cell->source >= N_SOURCES || cell->width < 0 || cell->width > 1 << 20
            || cell->text_len > 1 << 20
            || ((cell->source == SRC_INT || cell->source == SRC_TIME) && (cell->arg < 0 || cell->arg >= N_FIELDS))
            || (cell->source == SRC_HOST && cell->arg != HOST_BORN && cell->arg != HOST_STORE)) {
            PyErr_SetString(PyExc_ValueError, "table_lines: a cell out of range");
            return -1;
        }
    }
    *n_cells = (int)n;
    return 0;
}

static int value_ascii(const record_t *r, int a)
{
    return r->props_ascii || a < 0 || all_ascii(r->props + r->sp[a].value_at, r->sp[a].value_len);
}

/* 1 when the record's cells are ones this part writes (read_record's, and the text of each cell
 * ASCII: a body shown as text as far as it is shown) */
static int covered(record_t *r, const window_t *win, Py_ssize_t k, int64_t offset0, int64_t position0,
                   const cell_t *cells, int n_cells, hosts_t *hosts)
{
    const unsigned char *v = win->have_verdicts ? (const unsigned char *)win->verdicts.buf + k * N_VERDICTS : NULL;
    if (!read_record(r, win->buf.buf, win->buf.len, (const int64_t *)win->spans.buf + k * N_SPANS, v, offset0,
                     position0))
        return 0;
    for (int c = 0; c < n_cells; c++) {
        switch (cells[c].source) {
        case SRC_BODY_TEXT:
            if (body_text_bytes(r, cells[c].arg) < 0)
                return 0;
            break;
        case SRC_TOPIC:
            if (!r->topic_ascii)
                return 0;
            break;
        case SRC_PROPERTIES:
            if (!r->props_ascii)
                return 0;
            break;
        case SRC_TAGS:
            if (!value_ascii(r, r->tags))
                return 0;
            break;
        case SRC_KEYS:
            if (!value_ascii(r, r->keys))
                return 0;
            break;
        case SRC_UNIQ:
            if (!value_ascii(r, r->uniq))
                return 0;
            break;
        case SRC_HOST:
        case SRC_MSG_ID: {
            int which = cells[c].source == SRC_HOST ? cells[c].arg : HOST_STORE;
            if ((r->hosts[which] = host_texts(hosts, r, which)) == NULL)
                return 0;
            break;
        }
        default:
            break;
        }
    }
    return 1;
}

/* table_lines(buf, spans, verdicts, first, offset0, position0, cells, file, gap, wide, hosts)
 * -> (text, lines, declined): the lines (joined by newlines, none after the last) of the records
 * from first on up to the first one declined, and how many records from there it declines in a
 * row (their lines are the Python path's); file: the records' file name (ASCII), or None when
 * it is not; hosts: the callable host_texts asks (None: no host cell is written). None when a
 * cell needs what is not there (set_table_layout not called, the file, hosts). */
static PyObject *table_lines(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *spans_obj, *verdicts_obj, *cells_obj, *file_obj, *texts_obj;
    Py_ssize_t first, gap;
    long long offset0, position0;
    int wide;
    if (!PyArg_ParseTuple(args, "OOOnLLO!OnpO", &buf_obj, &spans_obj, &verdicts_obj, &first, &offset0, &position0,
                          &PyTuple_Type, &cells_obj, &file_obj, &gap, &wide, &texts_obj))
        return NULL;
    cell_t cells[MAX_CELLS];
    int n_cells;
    if (get_cells(cells_obj, cells, &n_cells) < 0)
        return NULL;
    const char *file = NULL;
    Py_ssize_t file_len = 0;
    if (file_obj != Py_None) {
        if (!PyBytes_Check(file_obj)) {
            PyErr_SetString(PyExc_TypeError, "table_lines: file must be bytes or None");
            return NULL;
        }
        file = PyBytes_AS_STRING(file_obj);
        file_len = PyBytes_GET_SIZE(file_obj);
        if (!all_ascii((const unsigned char *)file, file_len) || file_len > 1 << 20)
            file = NULL;
    }
    if (gap < 0 || gap > 16) {
        PyErr_SetString(PyExc_ValueError, "table_lines: gap out of range");
        return NULL;
    }
    int usable = T.ready && first >= 0;
    hosts_t hosts = {PyCallable_Check(texts_obj) ? texts_obj : NULL, {{{0}, 0, 0, NULL}, {{0}, 0, 0, NULL}}};
    for (int c = 0; c < n_cells; c++)
        if ((cells[c].source == SRC_FILE && file == NULL)
            || ((cells[c].source == SRC_HOST || cells[c].source == SRC_MSG_ID) && hosts.texts == NULL))
            usable = 0;
    if (!usable)
        Py_RETURN_NONE;
    window_t win;
    if (get_window(&win, buf_obj, spans_obj, verdicts_obj) < 0)
        return NULL;
    const unsigned char *v = win.have_verdicts ? win.verdicts.buf : NULL;
    PyObject *result = NULL;
    Py_ssize_t widths = 0;
    for (int c = 0; c < n_cells; c++)
        widths += cells[c].width + 3 + gap;  /* a cut cell: its ellipsis takes 3 bytes */
    Py_ssize_t len = 0, k = first;
    record_t r;
    for (; k < win.n; k++) {
        if (!covered(&r, &win, k, offset0, position0, cells, n_cells, &hosts))
            break;
        const unsigned char *vk = v ? v + k * N_VERDICTS : NULL;
        Py_ssize_t room = cell_room(&r, file_len, cells, n_cells);
        /* a line: each cell at most its width and an ellipsis, or (wide) its whole text */
        Py_ssize_t line_room = widths + 1 + (wide ? n_cells * room : 0);
        if (grow(&text, &text_cap, room) < 0 || grow(&lines, &lines_cap, len + line_room) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        char *w = lines + len;
        if (k > first)
            *w++ = '\n';
        char *line = w;
        for (int c = 0; c < n_cells; c++) {
            const cell_t *cell = &cells[c];
            /* a cell cut at its end shows its first width letters at most: no need to make more */
            Py_ssize_t most = wide || cell->front ? -1 : cell->width + 1;
            int ellipsis;
            char *end = cell_text(text, cell, &r, vk, file, file_len, most, &ellipsis);
            if (c)
                w = put_spaces(w, gap);
            w = put_cell(w, cell, text, end - text, ellipsis, wide);
        }
        while (w > line && w[-1] == ' ')  /* the line's end stripped, as str.rstrip (no other blank is left) */
            w--;
        len = w - lines;
    }
    Py_ssize_t declined = k;
    while (declined < win.n && !covered(&r, &win, declined, offset0, position0, cells, n_cells, &hosts))
        declined++;
    PyObject *out = PyUnicode_DecodeUTF8(lines, len, NULL);
    if (out != NULL)
        result = Py_BuildValue("Nnn", out, k - first, declined - k);
done:
    hosts_release(&hosts);
    release(&win);
    return result;
}

/* set_table_layout(fields, names, key_separator, magic_v2, compressed_flag): fields: per hosts
 * kind (pairs of (offset, size) in _FIELDS' order, header size), as set_row_layout takes them;
 * names: (TAGS, KEYS, UNIQ_KEY). */
static PyObject *set_table_layout(PyObject *self, PyObject *args)
{
    PyObject *fields, *names;
    unsigned char key_separator;
    unsigned long magic_v2;
    long long compressed_flag;
    if (!PyArg_ParseTuple(args, "O!O!bkL", &PyTuple_Type, &fields, &PyTuple_Type, &names, &key_separator, &magic_v2,
                          &compressed_flag))
        return NULL;
    T.ready = 0;
    if (PyTuple_GET_SIZE(fields) != HOST_KINDS || PyTuple_GET_SIZE(names) != 3) {
        PyErr_SetString(PyExc_ValueError, "set_table_layout: wrong counts");
        return NULL;
    }
    for (int h = 0; h < HOST_KINDS; h++) {
        PyObject *pairs;
        Py_ssize_t header_size;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, h), "O!n", &PyTuple_Type, &pairs, &header_size))
            return NULL;
        if (PyTuple_GET_SIZE(pairs) != N_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "set_table_layout: wrong field count");
            return NULL;
        }
        T.header_size[h] = header_size;
        for (int f = 0; f < N_FIELDS; f++) {
            Py_ssize_t at, size;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, f), "nn", &at, &size))
                return NULL;
            if (at < 0 || size < 0 || at + size > header_size) {
                PyErr_SetString(PyExc_ValueError, "set_table_layout: a field outside the header");
                return NULL;
            }
            T.at[h][f] = at;
            T.size[h][f] = size;
        }
    }
    char *name_to[3] = {T.tags, T.keys, T.uniq};
    Py_ssize_t *name_len[3] = {&T.tags_len, &T.keys_len, &T.uniq_len};
    for (int k = 0; k < 3; k++) {
        const char *name;
        Py_ssize_t len;
        if (!PyArg_Parse(PyTuple_GET_ITEM(names, k), "y#", &name, &len))
            return NULL;
        if (len >= NAME_MAX_LEN) {
            PyErr_SetString(PyExc_ValueError, "set_table_layout: a name too long");
            return NULL;
        }
        memcpy(name_to[k], name, (size_t)len);
        *name_len[k] = len;
    }
    T.key_separator = key_separator;
    T.magic_v2 = (uint32_t)magic_v2;
    T.compressed_flag = compressed_flag;
    T.last_time = -1;
    T.ready = 1;
    Py_RETURN_NONE;
}

static PyObject *table_sources(PyObject *self, PyObject *unused)
{
    PyObject *names = PyTuple_New(N_SOURCES);
    if (names == NULL)
        return NULL;
    for (int k = 0; k < N_SOURCES; k++) {
        PyObject *name = PyUnicode_FromString(SOURCE_NAMES[k]);
        if (name == NULL) {
            Py_DECREF(names);
            return NULL;
        }
        PyTuple_SET_ITEM(names, k, name);
    }
    return names;
}

PyMethodDef rmq_table_methods[] = {
    {"table_records", table_records, METH_VARARGS,
     "table_records(buf, spans, verdicts, first, offset0, position0) -> the count of records from first on "
     "that table_lines writes (none with a finding)"},
    {"table_lines", table_lines, METH_VARARGS,
     "table_lines(buf, spans, verdicts, first, offset0, position0, cells, file, gap, wide, hosts) -> (text, lines, "
     "declined): lines up to the first record declined, and the records declined from there; None when the cells "
     "cannot be written"},
    {"set_table_layout", set_table_layout, METH_VARARGS,
     "set_table_layout(fields, names, key_separator, magic_v2, compressed_flag): the header layout and the "
     "property names, from Python once"},
    {"table_sources", table_sources, METH_NOARGS, "table_sources() -> the cell sources' names, in their codes' order"},
    {NULL, NULL, 0, NULL},
};
